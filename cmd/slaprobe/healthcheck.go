package main

import (
	"context"
	"fmt"
	"os"

	"github.com/slaprobe/slaprobe/internal/healthcheck"
)

func init() {
	cmd := app.Command("healthcheck", "Exit 0 when a running slaprobe answers /-/healthy with 200, 1 otherwise: a container health check that needs no shell or curl.")
	url := cmd.Flag("healthcheck.url", "slaprobe's address (host:port or :port, as in --web.listen-address) or a full URL to GET.").
		Default(healthcheck.DefaultURL).String()
	timeout := cmd.Flag("healthcheck.timeout", "How long to wait for the answer.").Default("5s").Duration()
	httpCfg := cmd.Flag("healthcheck.http-config.file",
		"Prometheus HTTP client config (basic_auth, authorization, tls_config) when --web.config.file protects the endpoints.").
		PlaceHolder("PATH").String()
	register(cmd, func() int {
		err := healthcheck.Check(context.Background(), healthcheck.Options{URL: *url, Timeout: *timeout, HTTPConfigFile: *httpCfg})
		if err != nil {
			fmt.Fprintf(os.Stderr, "slaprobe healthcheck: %v\n", err)
			return 1
		}
		return 0
	})
}

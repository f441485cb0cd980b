package main

import (
	"context"
	"fmt"

	"github.com/slaprobe/slaprobe/internal/healthcheck"
)

func addHealthcheck(c *cli) {
	cmd := c.app.Command("healthcheck", "Exit 0 when a running slaprobe answers /-/healthy with 200, 1 otherwise: a container health check that needs no shell or curl.")
	url := cmd.Flag("healthcheck.url", "slaprobe's address (host:port or :port, as in --web.listen-address) or a full URL to GET.").
		Default(healthcheck.DefaultURL).String()
	timeout := cmd.Flag("healthcheck.timeout", "How long to wait for the answer.").Default("5s").Duration()
	httpCfg := cmd.Flag("healthcheck.http-config.file",
		"Prometheus HTTP client config (basic_auth, authorization, tls_config) when --web.config.file protects the endpoints.").
		PlaceHolder("PATH").String()
	c.command(cmd, func(ctx context.Context) int {
		err := healthcheck.Check(ctx, healthcheck.Options{URL: *url, Timeout: *timeout, HTTPConfigFile: *httpCfg})
		if err != nil {
			fmt.Fprintf(c.stderr, "slaprobe healthcheck: %v\n", err)
			return 1
		}
		return 0
	})
}

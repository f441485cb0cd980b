// Package healthcheck asks a running slaprobe whether it is healthy, for
// container health checks in images that have no shell or curl.
package healthcheck

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	promcfg "github.com/prometheus/common/config"
)

// DefaultURL is slaprobe's /-/healthy on its default port.
const DefaultURL = "http://127.0.0.1:9781/-/healthy"

// Options configure a check.
type Options struct {
	// URL to GET; empty is DefaultURL. A bare host:port, or :port, gets
	// http:// and /-/healthy.
	URL string
	// Timeout of the whole request (default 5s).
	Timeout time.Duration
	// HTTPConfigFile is a Prometheus HTTP client config (basic_auth,
	// authorization, tls_config) for a slaprobe behind --web.config.file;
	// empty means none.
	HTTPConfigFile string
}

// NormalizeURL turns ":9781" or "host:9781" into a /-/healthy URL and
// leaves full URLs as they are.
func NormalizeURL(u string) string {
	switch {
	case u == "":
		return DefaultURL
	case strings.Contains(u, "://"):
		return u
	}
	host, port, err := net.SplitHostPort(u)
	if err != nil {
		return "http://" + u + "/-/healthy"
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/-/healthy"
}

// Check GETs the URL and returns nil on a 200 answer, otherwise an error
// that says what came back.
func Check(ctx context.Context, o Options) error {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	u := NormalizeURL(o.URL)
	client := &http.Client{}
	if o.HTTPConfigFile != "" {
		cfg, _, err := promcfg.LoadHTTPConfigFile(o.HTTPConfigFile)
		if err != nil {
			return fmt.Errorf("http config %s: %w", o.HTTPConfigFile, err)
		}
		if client, err = promcfg.NewClientFromConfig(*cfg, "slaprobe_healthcheck"); err != nil {
			return fmt.Errorf("http config %s: %w", o.HTTPConfigFile, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("url %q: %w", u, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

package config

import (
	"fmt"
	"net/http"

	promcfg "github.com/prometheus/common/config"

	"github.com/slaprobe/slaprobe/prober"
)

// NewTargetClient builds the HTTP client of a target (probes, /v1/models,
// /tokenize, /props, the engine scrape) from its http_client_config. It
// follows no redirect, whatever follow_redirects says: prometheus/common
// adds the authorization, basic auth, OAuth2 and header round-trippers to
// every hop, so a 3xx to another host would carry the target's
// credentials there. A 3xx fails the probe with reason redirect instead.
func NewTargetClient(cfg promcfg.HTTPClientConfig, name string) (*http.Client, error) {
	cfg.FollowRedirects = false
	// Each connection's reads carry the kernel's receive time where the
	// platform gives it (prober.DialKernelStamps; user-space stamps else).
	c, err := promcfg.NewClientFromConfig(cfg, name, promcfg.WithDialContextFunc(prober.DialKernelStamps))
	if err != nil {
		return nil, err
	}
	c.CheckRedirect = prober.NoRedirect
	return c, nil
}

// defaultHTTPClientConfig is prometheus/common's default with
// follow_redirects off, as every target client is built (NewTargetClient),
// so that /config and check-config show what is done.
func defaultHTTPClientConfig() promcfg.HTTPClientConfig {
	c := promcfg.DefaultHTTPClientConfig
	c.FollowRedirects = false
	return c
}

// noFollow turns follow_redirects off in c. prometheus/common sets it
// true in every http_client_config section it reads, before the section's
// own fields, so an explicit true cannot be told from none: it is turned
// off, and /config and check-config show false, which is what is done.
func noFollow(c *promcfg.HTTPClientConfig) { c.FollowRedirects = false }

// maxMaxAnswerBytes bounds global.max_answer_bytes: a conversation replays
// what it keeps in every later turn's body.
const maxMaxAnswerBytes = 64 << 20

func checkMaxAnswerBytes(n int) error {
	if n < 4096 || n > maxMaxAnswerBytes {
		return fmt.Errorf("global.max_answer_bytes=%d; expected from 4096 to %d (64 MiB); the default is %d (1 MiB)",
			n, maxMaxAnswerBytes, prober.DefaultMaxAnswerBytes)
	}
	return nil
}

package prober

// This file holds the Target one probes (its base URL, API, client and headers),
// the Clock, and the warming of a target's connections before a burst.

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Target is one inference server to probe.
type Target struct {
	Name       string       // the `target` label
	BaseURL    string       // e.g. http://vllm:8000 (no trailing /v1)
	Model      string       // empty: auto-detect from /v1/models
	MetricsURL string       // engine metrics; default BaseURL + "/metrics"
	API        API          // required: config resolves its default (chat); Prepare rejects an empty one
	Client     *http.Client // built from the target's http_client_config
	// StallTimeout fails a probe whose stream sends nothing for this long
	// once the first token has arrived. Zero means the scenario timeout only.
	StallTimeout time.Duration
	// Headers are sent with every request (besides auth from Client).
	Headers map[string]string
	// PerRequestMetrics asks the engine for its per-request metrics:
	// chat and completions probes set "include_metrics": true (vLLM >= 0.25
	// with --enable-per-request-metrics answers with a `metrics` object).
	// Opt-in: a strict server may refuse a field it does not know.
	PerRequestMetrics bool
}

// Clock is the time source; tests inject a fake one. Now must carry a
// monotonic reading (time.Now does).
type Clock interface {
	Now() time.Time
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// WarmConnections leaves up to n open connections to t in the client's
// idle pool, so that the requests of a burst do not queue behind n TCP (and
// TLS) handshakes and really reach the server together. It sends n
// concurrent GET /v1/models and holds every response open until all n have
// arrived (so each needs its own connection), then closes them together.
// Failures are ignored: the burst still runs, only less tightly. The pool
// keeps them only up to the transport's MaxIdleConnsPerHost (1000 for
// clients built from http_client_config, 2 for http.DefaultTransport).
func (t Target) WarmConnections(ctx context.Context, n int) {
	if n < 2 || t.BaseURL == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var got, done sync.WaitGroup
	release := make(chan struct{})
	got.Add(n)
	done.Add(n)
	for range n {
		go func() {
			defer done.Done()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpointURL(t.BaseURL, "/v1/models"), nil)
			if err != nil {
				got.Done()
				return
			}
			setTargetHeaders(req, t)
			resp, err := targetClient(t).Do(req)
			got.Done()
			if err != nil {
				return
			}
			select { // hold the connection until every request has one
			case <-release:
			case <-ctx.Done():
			}
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			_ = resp.Body.Close()
		}()
	}
	// A transport with MaxConnsPerHost < n cannot open n connections; do
	// not wait for ever.
	all := make(chan struct{})
	go func() { got.Wait(); close(all) }()
	select {
	case <-all:
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
	}
	close(release)
	done.Wait()
}

func baseURLOf(u string) string { return strings.TrimRight(u, "/") }

// defaultClient is http.DefaultClient that follows no redirect.
var defaultClient = &http.Client{CheckRedirect: NoRedirect}

// targetClient is t's client, made to follow no redirect whoever built it:
// a 3xx comes back as the answer (reason redirect), so the target's
// credentials (the client's auth, t.Headers) never go to another origin.
// The copy shares the transport and its connections.
func targetClient(t Target) *http.Client {
	if t.Client == nil {
		return defaultClient
	}
	c := *t.Client
	c.CheckRedirect = NoRedirect
	return &c
}

func setTargetHeaders(req *http.Request, t Target) {
	for k, v := range t.Headers {
		if http.CanonicalHeaderKey(k) == "Host" {
			req.Host = v // net/http ignores a Host entry in Header
			continue
		}
		req.Header.Set(k, v)
	}
}

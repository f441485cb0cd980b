package prober

import (
	"net/http"
	"time"
)

// API selects the OpenAI-compatible endpoint a target is probed on.
type API string

const (
	APIChat        API = "chat"        // POST /v1/chat/completions
	APICompletions API = "completions" // POST /v1/completions
)

// Target is one inference server to probe.
type Target struct {
	Name       string       // the `target` label
	BaseURL    string       // e.g. http://vllm:8000 (no trailing /v1)
	Model      string       // empty: auto-detect from /v1/models
	MetricsURL string       // engine metrics; default BaseURL + "/metrics"
	API        API          // default APIChat
	Client     *http.Client // built from the target's http_client_config
	// StallTimeout fails a probe whose stream sends nothing for this long
	// once the first token has arrived. Zero means the scenario timeout only.
	StallTimeout time.Duration
	// Headers are sent with every request (besides auth from Client).
	Headers map[string]string
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

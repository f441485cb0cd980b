package prober

import (
	"net/http"
	"time"
)

// API selects the endpoint a target (or a scenario) is probed on; it is the
// `api` label of the probe metrics.
type API string

const (
	APIChat        API = "chat"        // POST /v1/chat/completions
	APICompletions API = "completions" // POST /v1/completions
	APIResponses   API = "responses"   // POST /v1/responses (OpenAI Responses API; api_responses.go)
	APIMessages    API = "messages"    // POST /v1/messages (Anthropic Messages API; api_messages.go)
)

// APIs lists every API, so counters can be initialised and values checked.
var APIs = []API{APIChat, APICompletions, APIResponses, APIMessages}

// OrDefault is a, or APIChat when a is empty: the API a target or result
// that does not say is probed on.
func (a API) OrDefault() API {
	if a == "" {
		return APIChat
	}
	return a
}

// Valid reports whether a is one of APIs.
func (a API) Valid() bool {
	for _, x := range APIs {
		if a == x {
			return true
		}
	}
	return false
}

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

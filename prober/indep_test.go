package prober_test

// The independent client: the truth the accuracy checks against third-party
// engines (Ollama, llm-d-inference-sim) hold slaprobe to. It is a proxy
// between slaprobe and the engine, written with net/http, bufio and
// encoding/json and nothing of the prober: it sends each request slaprobe
// sends on to the engine itself, and times the answer as the bytes come from
// the engine. So slaprobe and the client measure the very same requests, and
// neither an engine's variance from request to request nor a simulator whose
// timer runs late on this machine can hide or fake a disagreement.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// indepTiming is what the independent client measured of one streamed
// request.
type indepTiming struct {
	// ttft is from just before the client sent the request to the arrival
	// of the first line with generated text; zero when none came. itl is
	// (last − first) / (outputTokens − 1), zero below two tokens.
	ttft, itl    time.Duration
	outputTokens int // from the final usage (native: eval_count)
	// Ollama's own figures, from the native API's last line: its
	// generation of the answer, without the HTTP around it.
	evalCount    int
	evalDuration time.Duration
}

// indepClient is the independent client. Streamed POSTs to
// /v1/chat/completions, /v1/completions, /v1/responses and /v1/messages are
// timed: t0 just before the request goes to the engine, then the arrival of
// every line, a token being a line with non-empty generated text
// (delta.content for chat, text for completions, a response.output_text.delta
// for responses, a content_block_delta's text_delta for messages); the output
// tokens come from the final usage (response.completed's, message_delta's). Each line is
// passed on to slaprobe as it arrives. Everything else (/v1/models, the
// calibration's /tokenize and max_tokens=1 requests) goes through untouched.
//
// In native mode (Ollama only) a chat request goes to Ollama's native
// /api/chat (streamed) instead, and the answer is written back as OpenAI
// chunks, which is what Ollama's own OpenAI endpoint does inside; the native
// API's last line carries Ollama's eval_count and eval_duration for the
// request.
type indepClient struct {
	upstream string
	native   bool
	client   *http.Client

	mu      sync.Mutex
	timings []indepTiming
	active  int // streams being passed on and timed now
}

func (c *indepClient) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	timed := r.Method == http.MethodPost && (r.URL.Path == "/v1/chat/completions" || r.URL.Path == "/v1/completions" ||
		r.URL.Path == "/v1/responses" || r.URL.Path == "/v1/messages")
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// Whether to time it is read from the body without decoding it: the
	// client's own work before t0 is slaprobe's TTFT but not the client's,
	// and a 4K prompt's JSON takes a millisecond to decode under -race.
	stream := timed && bytes.Contains(body, []byte(`"stream":true`))
	if stream {
		c.mu.Lock()
		c.active++
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			c.active--
			c.mu.Unlock()
		}()
	}
	url := c.upstream + r.URL.Path
	native := c.native && stream && r.URL.Path == "/v1/chat/completions"
	if native {
		var in struct {
			Model     string            `json:"model"`
			Messages  []json.RawMessage `json:"messages"`
			MaxTokens int               `json:"max_tokens"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		url = c.upstream + "/api/chat"
		body, _ = json.Marshal(map[string]any{"model": in.Model, "messages": in.Messages, "stream": true,
			"options": map[string]any{"num_predict": in.MaxTokens}})
	}
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, url, bytes.NewReader(body))
	req.Header = r.Header.Clone()
	req.Header.Del("Content-Length")
	t0 := time.Now()
	resp, err := c.client.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if !stream || resp.StatusCode != http.StatusOK {
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	flush := func() { w.(http.Flusher).Flush() }
	var tm indepTiming
	var first, last time.Time
	token := func(at time.Time) {
		if first.IsZero() {
			first = at
		}
		last = at
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, rerr := br.ReadBytes('\n')
		at := time.Now()
		if native {
			var n struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
				Done            bool          `json:"done"`
				DoneReason      string        `json:"done_reason"`
				PromptEvalCount int           `json:"prompt_eval_count"`
				EvalCount       int           `json:"eval_count"`
				EvalDuration    time.Duration `json:"eval_duration"`
			}
			if len(bytes.TrimSpace(line)) > 0 && json.Unmarshal(line, &n) == nil {
				if n.Message.Content != "" {
					token(at)
					fmt.Fprintf(w, "data: {\"id\":\"n\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", n.Message.Content)
					flush()
				}
				if n.Done {
					tm.evalCount, tm.evalDuration, tm.outputTokens = n.EvalCount, n.EvalDuration, n.EvalCount
					reason := "stop"
					if n.DoneReason == "length" {
						reason = "length"
					}
					fmt.Fprintf(w, "data: {\"id\":\"n\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":%q}]}\n\n", reason)
					fmt.Fprintf(w, "data: {\"id\":\"n\",\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\ndata: [DONE]\n\n",
						n.PromptEvalCount, n.EvalCount, n.PromptEvalCount+n.EvalCount)
					flush()
				}
			}
		} else {
			_, _ = w.Write(line)
			flush()
			if data, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data: ")); ok && string(data) != "[DONE]" {
				var ch struct {
					Choices []struct {
						Text  string `json:"text"`
						Delta struct {
							Content string `json:"content"`
						} `json:"delta"`
					} `json:"choices"`
					Usage *struct {
						CompletionTokens int  `json:"completion_tokens"`
						OutputTokens     *int `json:"output_tokens"` // messages: message_delta
					} `json:"usage"`
					// The typed events of /v1/responses and /v1/messages.
					Type     string          `json:"type"`
					Delta    json.RawMessage `json:"delta"`
					Response *struct {
						Usage *struct {
							OutputTokens int `json:"output_tokens"`
						} `json:"usage"`
					} `json:"response"`
				}
				if json.Unmarshal(data, &ch) == nil {
					switch ch.Type {
					case "response.output_text.delta":
						var text string
						if json.Unmarshal(ch.Delta, &text) == nil && text != "" {
							token(at)
						}
					case "response.completed", "response.incomplete":
						if ch.Response != nil && ch.Response.Usage != nil {
							tm.outputTokens = ch.Response.Usage.OutputTokens
						}
					case "content_block_delta":
						var d struct{ Type, Text string }
						if json.Unmarshal(ch.Delta, &d) == nil && d.Type == "text_delta" && d.Text != "" {
							token(at)
						}
					case "message_delta":
						if ch.Usage != nil && ch.Usage.OutputTokens != nil {
							tm.outputTokens = *ch.Usage.OutputTokens
						}
					default:
						if len(ch.Choices) > 0 && (ch.Choices[0].Delta.Content != "" || ch.Choices[0].Text != "") {
							token(at)
						}
						if ch.Usage != nil {
							tm.outputTokens = ch.Usage.CompletionTokens
						}
					}
				}
			}
		}
		if rerr != nil {
			break
		}
	}
	if !first.IsZero() {
		tm.ttft = first.Sub(t0)
		if tm.outputTokens >= 2 {
			tm.itl = last.Sub(first) / time.Duration(tm.outputTokens-1)
		}
	}
	c.mu.Lock()
	c.timings = append(c.timings, tm)
	c.mu.Unlock()
}

// timing returns the independent client's timing of the i-th stream it
// passed (counting from 0, every streamed generation request). slaprobe may
// be done with a stream (it has the usage chunk) a moment before the proxy's
// handler returns, so it waits a little.
func (c *indepClient) timing(t *testing.T, i int) indepTiming {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		n := len(c.timings)
		if n > i {
			defer c.mu.Unlock()
			return c.timings[i]
		}
		c.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("the independent client timed %d streams, want %d", n, i+1)
		}
	}
}

// settled waits until no stream is being passed on, and returns how many
// streams the independent client has timed: the index the next request's
// timing will have. slaprobe may be done with a stream (it has the usage
// chunk) a moment before the proxy's handler records its timing, so counting
// without waiting can come one short, and then each probe is compared with
// the request before it (it happened on Ollama's Messages API: TTFTs 80 ms
// apart, which medians over the rounds hid).
func (c *indepClient) settled(t *testing.T) int {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		n, active := len(c.timings), c.active
		c.mu.Unlock()
		if active == 0 {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("the independent client is still passing %d streams after 5 s", active)
		}
	}
}

func medianF(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[len(s)/2]
}

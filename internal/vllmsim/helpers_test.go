package vllmsim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fastConfig is a small, quick engine: 2 ms prefill and ~2 ms decode steps, no early stops.
func fastConfig() Config {
	c := DefaultConfig()
	c.MaxModelLen = 8192
	c.KVCacheTokens = 1 << 20
	c.PrefillOverhead = 2 * time.Millisecond
	c.PrefillTokensPerSecond = 1e6
	c.PrefillQuadratic = 0
	c.DecodeBase = 2 * time.Millisecond
	c.DecodePerSeq = 50 * time.Microsecond
	c.DecodePerKVToken = 0
	c.EOSMeanTokens = 0
	return c
}

type testServer struct {
	e   *Engine
	srv *httptest.Server
}

func start(t *testing.T, cfg Config) *testServer {
	t.Helper()
	e, err := New(cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(e.Handler())
	// Cleanups run last-in first-out: the engine closes first so that no handler blocks srv.Close.
	t.Cleanup(srv.Close)
	t.Cleanup(e.Close)
	return &testServer{e: e, srv: srv}
}

type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

type wireChunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index        int            `json:"index"`
		Delta        map[string]any `json:"delta"`
		Text         *string        `json:"text"`
		FinishReason *string        `json:"finish_reason"`
		TokenIDs     []uint32       `json:"token_ids"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
	Error *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    int    `json:"code"`
	} `json:"error"`
}

// event is one SSE data payload.
type event struct {
	data  string
	chunk *wireChunk // nil for [DONE] and unparsable payloads
}

type streamResult struct {
	status  int
	header  http.Header
	body    string // non-SSE body (errors)
	events  []event
	done    bool  // saw [DONE]
	readErr error // error reading the body (a cut connection)
}

func chatBody(content string, maxTokens int, extra map[string]any) map[string]any {
	b := map[string]any{
		"model":      DefaultConfig().ModelName,
		"messages":   []map[string]any{{"role": "user", "content": content}},
		"stream":     true,
		"max_tokens": maxTokens,
		"min_tokens": maxTokens,
		"ignore_eos": true,
		"stream_options": map[string]any{
			"include_usage": true,
		},
	}
	for k, v := range extra {
		if v == nil {
			delete(b, k)
			continue
		}
		b[k] = v
	}
	return b
}

func (ts *testServer) post(t *testing.T, path string, body any, header map[string]string) streamResult {
	t.Helper()
	return ts.postCtx(t, context.Background(), path, body, header, nil)
}

// postCtx sends body and reads the response; onEvent (optional) sees each SSE event as it arrives.
func (ts *testServer) postCtx(t *testing.T, ctx context.Context, path string, body any, header map[string]string, onEvent func(event)) streamResult {
	t.Helper()
	b, raw := body.([]byte) // raw bytes go as they are (invalid JSON tests)
	if !raw {
		var err error
		if b, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.srv.URL+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := ts.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	res := streamResult{status: resp.StatusCode, header: resp.Header}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw, err := io.ReadAll(resp.Body)
		res.body, res.readErr = string(raw), err
		return res
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Errorf("unexpected SSE line %q", line)
			continue
		}
		ev := event{data: data}
		if data == "[DONE]" {
			res.done = true
		} else {
			var c wireChunk
			if json.Unmarshal([]byte(data), &c) == nil {
				ev.chunk = &c
			}
		}
		res.events = append(res.events, ev)
		if onEvent != nil {
			onEvent(ev)
		}
	}
	res.readErr = sc.Err()
	return res
}

// outputTokens returns the events that carry output (content, reasoning or text).
func (r streamResult) outputChunks() []*wireChunk {
	var out []*wireChunk
	for _, ev := range r.events {
		c := ev.chunk
		if c == nil || len(c.Choices) == 0 {
			continue
		}
		ch := c.Choices[0]
		if ch.Text != nil && *ch.Text != "" {
			out = append(out, c)
			continue
		}
		for _, k := range []string{"content", "reasoning", "reasoning_content"} {
			if s, _ := ch.Delta[k].(string); s != "" {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

func (r streamResult) finalUsage() *usage {
	for i := len(r.events) - 1; i >= 0; i-- {
		if c := r.events[i].chunk; c != nil && len(c.Choices) == 0 && c.Usage != nil {
			return c.Usage
		}
	}
	return nil
}

// text joins the output of the given fields: delta keys, or "text" for completions.
func (r streamResult) text(fields ...string) string {
	var b strings.Builder
	for _, c := range r.outputChunks() {
		ch := c.Choices[0]
		for _, f := range fields {
			if f == "text" && ch.Text != nil {
				b.WriteString(*ch.Text)
			}
			if s, ok := ch.Delta[f].(string); ok {
				b.WriteString(s)
			}
		}
	}
	return b.String()
}

func (r streamResult) id() string {
	for _, ev := range r.events {
		if ev.chunk != nil && ev.chunk.ID != "" {
			return ev.chunk.ID
		}
	}
	return ""
}

// get fetches path and returns status and body.
func (ts *testServer) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := ts.srv.Client().Get(ts.srv.URL + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricValue returns the value of the series of name whose labels include want, from the
// engine's registry.
func metricValue(t *testing.T, e *Engine, name string, want map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := e.Gatherer().Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue metrics
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func words(n int) string {
	return strings.Repeat("data ", n)
}

// CountTokens returns the number of tokens the simulator's tokenizer gives text.
func CountTokens(text string) int {
	return scanTokens(text, nil, false)
}

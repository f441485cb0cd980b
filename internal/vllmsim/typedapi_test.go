package vllmsim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// typedEvent is one event of a typed stream: its SSE name and its JSON.
type typedEvent struct {
	name string
	data map[string]any
}

func postTyped(t *testing.T, url string, body map[string]any) (int, []typedEvent, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		return resp.StatusCode, nil, buf.String()
	}
	var out []typedEvent
	sc := bufio.NewScanner(resp.Body)
	name := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("event %s: data is not JSON: %q", name, line)
			}
			if d["type"] != name {
				t.Errorf("event %q carries type %v", name, d["type"])
			}
			out = append(out, typedEvent{name, d})
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return resp.StatusCode, out, ""
}

func names(evs []typedEvent) []string {
	var n []string
	for _, e := range evs {
		n = append(n, e.name)
	}
	return n
}

func count(evs []typedEvent, name string) int {
	n := 0
	for _, e := range evs {
		if e.name == name {
			n++
		}
	}
	return n
}

// TestTypedAPIs checks the Responses and Messages streams the simulator
// writes: framing, one delta per token chunk, usage and the stop at the end,
// each API's error event on a fault, and the request validation.
func TestTypedAPIs(t *testing.T) {
	cfg := fastConfig()
	cfg.EnablePerRequestMetrics = true
	ts := start(t, cfg)
	model := cfg.ModelName

	t.Run("responses", func(t *testing.T) {
		st, evs, body := postTyped(t, ts.srv.URL+"/v1/responses", map[string]any{"model": model, "input": "hello there", "max_output_tokens": 5,
			"min_tokens": 5, "ignore_eos": true, "stream": true})
		if st != 200 {
			t.Fatalf("status %d %s", st, body)
		}
		want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}
		if got := names(evs); len(got) < 8 || strings.Join(got[:4], ",") != strings.Join(want, ",") || got[len(got)-1] != "response.incomplete" {
			t.Fatalf("events %v", got)
		}
		if n := count(evs, "response.output_text.delta"); n < 1 || n > 5 {
			t.Errorf("%d text deltas for 5 tokens", n)
		}
		last := evs[len(evs)-1].data
		usage := last["response"].(map[string]any)["usage"].(map[string]any)
		if usage["output_tokens"].(float64) != 5 || usage["input_tokens"].(float64) < 1 || last["metrics"] == nil {
			t.Errorf("final event %v", last)
		}
		if tr, ok := ts.e.Trace(last["response"].(map[string]any)["id"].(string)); !ok || tr.Endpoint != "/v1/responses" || tr.CompletionTokens != 5 || !tr.IgnoreEOS {
			t.Errorf("trace %+v (found %v)", tr, ok)
		}
	})
	t.Run("messages", func(t *testing.T) {
		st, evs, body := postTyped(t, ts.srv.URL+"/v1/messages", map[string]any{"model": model, "max_tokens": 5, "system": "be brief",
			"messages": []map[string]any{{"role": "user", "content": []map[string]any{{"type": "text", "text": "hello"}}}}, "stream": true})
		if st != 200 {
			t.Fatalf("status %d %s", st, body)
		}
		got := names(evs)
		if len(got) < 7 || got[0] != "message_start" || got[1] != "content_block_start" || got[len(got)-2] != "message_delta" || got[len(got)-1] != "message_stop" {
			t.Fatalf("events %v", got)
		}
		start := evs[0].data["message"].(map[string]any)
		delta := evs[len(evs)-2].data
		if start["usage"].(map[string]any)["input_tokens"].(float64) < 1 || delta["usage"].(map[string]any)["output_tokens"].(float64) < 1 {
			t.Errorf("usage: start %v, delta %v", start, delta)
		}
		if tr, ok := ts.e.Trace(start["id"].(string)); !ok || tr.Endpoint != "/v1/messages" || !strings.Contains(tr.PromptHead, "be brief") {
			t.Errorf("trace %+v (found %v)", tr, ok)
		}
	})
	t.Run("error events", func(t *testing.T) {
		for path, body := range map[string]map[string]any{
			"/v1/responses": {"model": model, "input": "hi", "max_output_tokens": 8, "stream": true},
			"/v1/messages":  {"model": model, "max_tokens": 8, "messages": []map[string]any{{"role": "user", "content": "hi"}}, "stream": true},
		} {
			b, _ := json.Marshal(body)
			req, _ := http.NewRequest(http.MethodPost, ts.srv.URL+path, bytes.NewReader(b))
			req.Header.Set(FaultHeader, "error_event=2")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(resp.Body)
			resp.Body.Close()
			s := buf.String()
			if !strings.Contains(s, "event: error\ndata: {\"type\":\"error\"") || strings.Contains(s, "[DONE]") {
				t.Errorf("%s with an error fault: %q", path, s)
			}
		}
	})
	t.Run("non-streaming", func(t *testing.T) {
		st, _, body := postTyped(t, ts.srv.URL+"/v1/messages", map[string]any{"model": model, "max_tokens": 1, "messages": []map[string]any{{"role": "user", "content": "hi"}}})
		if st != 200 || !strings.Contains(body, `"input_tokens"`) || !strings.Contains(body, `"type":"message"`) {
			t.Errorf("messages: %d %s", st, body)
		}
		st, _, body = postTyped(t, ts.srv.URL+"/v1/responses", map[string]any{"model": model, "input": "hi", "max_output_tokens": 1})
		if st != 200 || !strings.Contains(body, `"input_tokens"`) || !strings.Contains(body, `"object":"response"`) {
			t.Errorf("responses: %d %s", st, body)
		}
	})
	t.Run("validation", func(t *testing.T) {
		if st, _, body := postTyped(t, ts.srv.URL+"/v1/messages", map[string]any{"model": model, "messages": []map[string]any{{"role": "user", "content": "hi"}}}); st != 400 || !strings.Contains(body, "max_tokens") {
			t.Errorf("messages without max_tokens: %d %s", st, body)
		}
		if st, _, body := postTyped(t, ts.srv.URL+"/v1/responses", map[string]any{"model": model}); st != 400 || !strings.Contains(body, "input") {
			t.Errorf("responses without input: %d %s", st, body)
		}
	})
}

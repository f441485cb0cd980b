package vllmsim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// postJSONUsage posts a non-streaming request and returns the status, the
// response id, its prompt count (usage.prompt_tokens, else input_tokens and
// cache_read_input_tokens) and the body.
func postJSONUsage(t *testing.T, url string, body any) (int, string, int, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	var out struct {
		ID    string `json:"id"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			InputTokens  int `json:"input_tokens"`
			CacheRead    int `json:"cache_read_input_tokens"` // Messages counts it apart
		} `json:"usage"`
	}
	_ = json.Unmarshal(buf.Bytes(), &out)
	return resp.StatusCode, out.ID, out.Usage.PromptTokens + out.Usage.InputTokens + out.Usage.CacheRead, buf.String()
}

// TestToolHistoryShapes: one agent history (a task, an answer with a tool
// call, the tool's result, a second answer and call, its result) sent in the
// chat, Responses and Messages shapes is the same chat-template prompt: the
// same prompt length, and the same messages in the trace (the answers' text,
// one call per assistant message, the results as tool messages). The length
// is the template's count of the messages with the calls rendered after the
// answer, so a tool message's tokens count like any other message's.
func TestToolHistoryShapes(t *testing.T) {
	cfg := fastConfig()
	ts := start(t, cfg)
	model := cfg.ModelName
	const task, a1, r1, a2, r2 = "Fix the failing test in the parser.", "I will run the tests first.", "FAIL parser_test.go:12 want 3 got 4", "The off-by-one is in the loop.", "ok all tests passed"
	call := func(id, cmd string) map[string]any {
		return map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "run_command", "arguments": `{"command": "` + cmd + `"}`}}
	}
	chat := map[string]any{"model": model, "max_tokens": 2, "messages": []any{
		map[string]any{"role": "user", "content": task},
		map[string]any{"role": "assistant", "content": a1, "tool_calls": []any{call("c1", "go test")}},
		map[string]any{"role": "tool", "tool_call_id": "c1", "content": r1},
		map[string]any{"role": "assistant", "content": a2, "tool_calls": []any{call("c2", "go test ./...")}},
		map[string]any{"role": "tool", "tool_call_id": "c2", "content": r2},
	}}
	responses := map[string]any{"model": model, "max_output_tokens": 2, "input": []any{
		map[string]any{"role": "user", "content": task},
		map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": a1}}},
		map[string]any{"type": "function_call", "call_id": "c1", "name": "run_command", "arguments": `{"command":"go test"}`},
		map[string]any{"type": "function_call_output", "call_id": "c1", "output": r1},
		map[string]any{"role": "assistant", "content": a2},
		map[string]any{"type": "function_call", "call_id": "c2", "name": "run_command", "arguments": `{"command":"go test ./..."}`},
		map[string]any{"type": "function_call_output", "call_id": "c2", "output": r2},
	}}
	messages := map[string]any{"model": model, "max_tokens": 2, "messages": []any{
		map[string]any{"role": "user", "content": task},
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": a1},
			map[string]any{"type": "tool_use", "id": "c1", "name": "run_command", "input": map[string]any{"command": "go test"}}}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "c1", "content": r1}}},
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": a2},
			map[string]any{"type": "tool_use", "id": "c2", "name": "run_command", "input": map[string]any{"command": "go test ./..."}}}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "c2", "content": []any{map[string]any{"type": "text", "text": r2}}}}},
	}}
	rendered := func(cmd string) string {
		return "\n<tool_call>\n{\"name\": \"run_command\", \"arguments\": {\"command\":\"" + cmd + "\"}}\n</tool_call>"
	}
	want := cfg.ChatPromptTokens([]ChatMessage{{"user", task}, {"assistant", a1 + rendered("go test")}, {"tool", r1},
		{"assistant", a2 + rendered("go test ./...")}, {"tool", r2}})
	wantMsgs := []TraceMessage{
		{Role: "user", Tokens: scanTokens(task, nil, false)},
		{Role: "assistant", Tokens: scanTokens(a1+rendered("go test"), nil, false), ToolCalls: 1, Text: a1},
		{Role: "tool", Tokens: scanTokens(r1, nil, false), ToolCallID: "c1"},
		{Role: "assistant", Tokens: scanTokens(a2+rendered("go test ./..."), nil, false), ToolCalls: 1, Text: a2},
		{Role: "tool", Tokens: scanTokens(r2, nil, false), ToolCallID: "c2"},
	}
	for _, tc := range []struct {
		path string
		body any
	}{{"/v1/chat/completions", chat}, {"/v1/responses", responses}, {"/v1/messages", messages}} {
		st, id, prompt, raw := postJSONUsage(t, ts.srv.URL+tc.path, tc.body)
		if st != 200 {
			t.Fatalf("%s: status %d %s", tc.path, st, raw)
		}
		tr, ok := ts.e.Trace(id)
		if !ok {
			t.Fatalf("%s: no trace of %q", tc.path, id)
		}
		if prompt != want || tr.PromptTokens != want {
			t.Errorf("%s: prompt %d tokens (trace %d), want %d", tc.path, prompt, tr.PromptTokens, want)
		}
		if !reflect.DeepEqual(tr.Messages, wantMsgs) {
			t.Errorf("%s: trace messages\n got %+v\nwant %+v", tc.path, tr.Messages, wantMsgs)
		}
	}
}

// TestToolHistoryErrors: a malformed tool shape is a 400 naming what is
// missing.
func TestToolHistoryErrors(t *testing.T) {
	cfg := fastConfig()
	ts := start(t, cfg)
	model := cfg.ModelName
	for _, tc := range []struct {
		path string
		body map[string]any
		want string
	}{
		{"/v1/chat/completions", map[string]any{"model": model, "max_tokens": 2, "messages": []any{
			map[string]any{"role": "user", "content": "x"}, map[string]any{"role": "tool", "content": "out"}}}, "messages[1].tool_call_id is required"},
		{"/v1/chat/completions", map[string]any{"model": model, "max_tokens": 2, "messages": []any{
			map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"id": "c", "type": "function", "function": map[string]any{"arguments": "{}"}}}}}}, "function.name is required"},
		{"/v1/responses", map[string]any{"model": model, "max_output_tokens": 2, "input": []any{
			map[string]any{"type": "function_call", "name": "f", "arguments": "{}"}}}, "needs call_id and name"},
		{"/v1/responses", map[string]any{"model": model, "max_output_tokens": 2, "input": []any{
			map[string]any{"type": "reasoning"}}}, `expected message, function_call or function_call_output`},
		{"/v1/messages", map[string]any{"model": model, "max_tokens": 2, "messages": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "content": "x"}}}}}, "needs tool_use_id"},
	} {
		st, _, _, raw := postJSONUsage(t, ts.srv.URL+tc.path, tc.body)
		if st != 400 || !strings.Contains(raw, tc.want) {
			t.Errorf("%s %v: status %d %s; want 400 with %q", tc.path, tc.body, st, raw, tc.want)
		}
	}
}

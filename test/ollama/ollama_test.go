package ollama

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// What the engine does that slaprobe must cope with, checked on the engine itself so that a new
// pin that changes it is noticed here first: no /tokenize, no /metrics, max_tokens exact while
// ignore_eos is ignored, usage in a chunk of its own, and a prompt longer than the context cut
// silently on the OpenAI endpoint (the native one refuses it).
func TestEngineFacts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real engine")
	}
	s := Start(t, Options{ContextLength: 2048})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	for _, path := range []string{"/tokenize", "/metrics"} {
		resp, err := http.Post(s.URL+path, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: HTTP %d, expected the engine to lack it", path, resp.StatusCode)
		}
	}
	resp, err := http.Get(s.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(b, []byte(`"`+s.Model+`"`)) {
		t.Errorf("/v1/models does not list %s: %s", s.Model, b)
	}

	words := func(n int) string { return strings.Repeat("tokens of prompt text ", n/4) }
	type chunk struct {
		Choices []struct {
			Delta struct {
				Content string `json:"content"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	stream := func(prompt string, maxTokens int) (chunks []chunk) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"model": s.Model, "stream": true, "max_tokens": maxTokens, "ignore_eos": true,
			"stream_options": map[string]any{"include_usage": true},
			"messages":       []map[string]string{{"role": "user", "content": prompt}}})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v1/chat/completions", bytes.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("HTTP %d: %s", resp.StatusCode, b)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			l, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || l == "[DONE]" {
				continue
			}
			var c chunk
			if err := json.Unmarshal([]byte(l), &c); err != nil {
				t.Fatalf("chunk %q: %v", l, err)
			}
			chunks = append(chunks, c)
		}
		return chunks
	}

	chunks := stream(words(400), 24)
	last := chunks[len(chunks)-1]
	if len(last.Choices) != 0 || last.Usage == nil || last.Usage.CompletionTokens != 24 {
		t.Fatalf("last chunk %+v: want usage alone with 24 completion tokens", last)
	}
	if n := len(chunks); n != 24+2 { // one token a chunk, the finish chunk, the usage chunk
		t.Errorf("%d chunks for 24 tokens, want 26", n)
	}
	read := last.Usage.PromptTokens
	// Four times the context: answered 200, the prompt cut to about the context window.
	chunks = stream(words(4*read*2048/read), 4)
	if u := chunks[len(chunks)-1].Usage; u == nil || u.PromptTokens > 2048 || u.PromptTokens < 1024 {
		t.Errorf("overlong prompt: usage %+v, want prompt_tokens cut to at most the 2048-token context", u)
	} else {
		t.Logf("a ~%d-token prompt was read as %d tokens", 4*2048, u.PromptTokens)
	}
	if _, err := s.Chat(ctx, ChatRequest{Prompt: words(4 * 2048), NumPredict: 4}); err == nil || !strings.Contains(err.Error(), "context length") {
		t.Errorf("native /api/chat with truncate off: err = %v, want the context-length error", err)
	}
	r, err := s.Chat(ctx, ChatRequest{Prompt: words(400), NumPredict: 32})
	if err != nil {
		t.Fatal(err)
	}
	if r.EvalCount != 32 || r.EvalDuration <= 0 || r.PromptEvalCount <= 0 || r.DecodeSpeed() <= 0 {
		t.Errorf("native timings %+v", r)
	}
	t.Logf("native: %d prompt tokens in %v, %d tokens in %v (%.0f tok/s)", r.PromptEvalCount, r.PromptEvalDuration,
		r.EvalCount, r.EvalDuration, r.DecodeSpeed())
}

// BenchmarkDecode reports the engine's own decode speed (eval_count / eval_duration of the native
// API, tok/s) on the model the accuracy checks use (4 layers, 768 wide), so that builds with other
// flags can be compared: build each, then
// SLAPROBE_OLLAMA=<binary> go test -run '^$' -bench Decode -count 5 ./test/ollama
// (test/ollama/README.md says what to expect).
func BenchmarkDecode(b *testing.B) {
	s := Start(b, Options{Layers: 4, Embedding: 768})
	ctx := context.Background()
	prompt := strings.Repeat("tokens of prompt text ", 64)
	if _, err := s.Chat(ctx, ChatRequest{Prompt: prompt, NumPredict: 8}); err != nil {
		b.Fatal(err) // the first request on a fresh slot costs extra
	}
	var tokens int
	var eval time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := s.Chat(ctx, ChatRequest{Prompt: prompt, NumPredict: 64})
		if err != nil {
			b.Fatal(err)
		}
		tokens, eval = tokens+r.EvalCount, eval+r.EvalDuration
	}
	b.ReportMetric(float64(tokens)/eval.Seconds(), "tok/s")
}

package llmd

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBinaryHonoursEnv(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvBinary, self)
	if p, ok := Binary(); !ok || p != self {
		t.Errorf("Binary() = %q, %v; want %q, true", p, ok, self)
	}

	missing := filepath.Join(t.TempDir(), BinaryName)
	t.Setenv(EnvBinary, missing)
	if p, ok := Binary(); ok || p != missing {
		t.Errorf("Binary() = %q, %v; want %q, false", p, ok, missing)
	}
}

func TestArgsAreOffline(t *testing.T) {
	args := strings.Join(Options{KVCache: true}.withDefaults().args(1234), " ")
	for _, want := range []string{"--port=1234", "--force-dummy-tokenizer", "--model=" + DefaultModel,
		"--max-num-seqs=8", "--max-model-len=8192", "--seed=1", "--enable-kvcache", "--zmq-endpoint="} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
}

// The fixtures are real output of v0.10.2 (test/llmd/README.md says how they were made).
func TestFixtures(t *testing.T) {
	stream, err := os.ReadFile("testdata/stream_chat.txt")
	if err != nil {
		t.Fatal(err)
	}
	chunks := parseSSE(t, bytes.NewReader(stream))
	if n := len(chunks); n != 8 {
		t.Fatalf("stream_chat.txt: %d chunks, want 8 (role, 5 tokens, finish, usage)", n)
	}
	if last := chunks[len(chunks)-1]; last.Usage == nil || last.Usage.CompletionTokens != 5 {
		t.Errorf("stream_chat.txt: last chunk usage = %+v, want completion_tokens 5", last.Usage)
	}

	metrics, err := os.ReadFile("testdata/metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{
		"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
		"vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:request_success_total",
		"vllm:prefix_cache_hits", "vllm:prefix_cache_queries",
		"vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
		"vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
	} {
		if !bytes.Contains(metrics, []byte("# TYPE "+name+" ")) {
			t.Errorf("metrics.txt has no %s", name)
		}
	}
}

// TestStartServes runs the real simulator and checks the facts test/llmd/README.md states about it.
func TestStartServes(t *testing.T) {
	const (
		ttft = 40 * time.Millisecond
		itl  = 10 * time.Millisecond
		n    = 20
	)
	s := Start(t, Options{TTFT: ttft, ITL: itl})

	var models struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	getJSON(t, s.URL+"/v1/models", &models)
	if len(models.Data) != 1 || models.Data[0].ID != s.Model || models.Data[0].MaxModelLen != 8192 {
		t.Errorf("/v1/models = %+v, want one model %q with max_model_len 8192", models.Data, s.Model)
	}

	messages := []map[string]string{{"role": "user", "content": "Hello world, this is a probe."}}
	var tok struct {
		Count       int `json:"count"`
		MaxModelLen int `json:"max_model_len"`
	}
	postJSON(t, s.URL+"/tokenize", map[string]any{"model": s.Model, "messages": messages, "add_generation_prompt": true}, &tok)
	// "### user: Hello world, this is a probe.\n": #, #, "# ", user, ": ", then 8 for the text.
	if tok.Count != 13 || tok.MaxModelLen != 8192 {
		t.Errorf("/tokenize = %+v, want count 13, max_model_len 8192", tok)
	}

	body := map[string]any{
		"model": s.Model, "messages": messages, "stream": true,
		"stream_options": map[string]any{"include_usage": true, "continuous_usage_stats": true},
		"max_tokens":     n, "min_tokens": n, "ignore_eos": true, "cache_salt": "x",
	}
	b, _ := json.Marshal(body)
	t0 := time.Now()
	resp, err := http.Post(s.URL+"/v1/chat/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	chunks := parseSSE(t, resp.Body)

	var content []time.Time
	var usage *usage
	for i, c := range chunks {
		switch {
		case c.Usage != nil:
			if i != len(chunks)-1 || len(c.Choices) != 0 {
				t.Errorf("chunk %d carries usage; only the last, choice-less chunk should (no continuous usage)", i)
			}
			usage = c.Usage
		case len(c.Choices) == 1 && c.Choices[0].Delta.Content != "":
			content = append(content, c.at)
		}
	}
	if len(chunks) == 0 || chunks[0].Choices[0].Delta.Role != "assistant" {
		t.Errorf("first chunk is not role-only")
	}
	if usage == nil || usage.PromptTokens != tok.Count || usage.CompletionTokens != n || usage.Details == nil {
		t.Fatalf("usage = %+v, want prompt_tokens %d (as /tokenize), completion_tokens %d, prompt_tokens_details", usage, tok.Count, n)
	}
	if len(content) != n {
		t.Fatalf("%d content chunks, want %d (one token each)", len(content), n)
	}

	// Sanity only: the simulator sleeps TTFT and ITL and adds its own overhead on top.
	gotTTFT := content[0].Sub(t0)
	gotITL := content[n-1].Sub(content[0]) / (n - 1)
	t.Logf("TTFT %v (configured %v), ITL %v (configured %v)", gotTTFT, ttft, gotITL, itl)
	if gotTTFT < ttft || gotTTFT > ttft+time.Second {
		t.Errorf("TTFT %v, want ≥ %v and not much more", gotTTFT, ttft)
	}
	// The lower bound is on the whole answer from the request's send, which
	// a stall of this client cannot shorten (a stall at the first chunk
	// shortens the span from it: the rest then arrive at once); the upper
	// one allows a second's stall, as for the TTFT.
	if total, least := content[n-1].Sub(t0), ttft+(n-1)*itl*9/10; total < least || gotITL > 3*itl+time.Second/(n-1) {
		t.Errorf("ITL %v (the answer's last token %v after the send, want ≥ %v), want about %v", gotITL, total, least, itl)
	}
}

func TestKVCacheReportsCachedTokens(t *testing.T) {
	s := Start(t, Options{KVCache: true})
	prompt := "The quick brown fox jumps over the lazy dog and then runs far away into the deep green forest."
	req := map[string]any{
		"model": s.Model, "messages": []map[string]string{{"role": "user", "content": prompt}},
		"max_tokens": 1, "cache_salt": "ignored-by-the-simulator",
	}
	var first, second struct {
		Usage usage `json:"usage"`
	}
	postJSON(t, s.URL+"/v1/chat/completions", req, &first)
	req["cache_salt"] = "another-salt"
	postJSON(t, s.URL+"/v1/chat/completions", req, &second)
	if first.Usage.Details == nil || first.Usage.Details.CachedTokens != 0 {
		t.Errorf("first request: prompt_tokens_details = %+v, want cached_tokens 0", first.Usage.Details)
	}
	// Whole 16-token blocks of the repeated prompt hit, cache_salt or not.
	if d := second.Usage.Details; d == nil || d.CachedTokens == 0 || d.CachedTokens%16 != 0 {
		t.Errorf("repeated prompt: prompt_tokens_details = %+v, want a multiple of 16 above 0", d)
	}
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	Details          *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

type chunk struct {
	Choices []struct {
		Delta struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
	at    time.Time
}

// parseSSE reads data: lines up to [DONE], stamping each chunk when its line arrives.
func parseSSE(t *testing.T, r io.Reader) []chunk {
	t.Helper()
	var out []chunk
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			return out
		}
		c := chunk{at: time.Now()}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		out = append(out, c)
	}
	t.Fatalf("stream ended without [DONE] (err %v)", sc.Err())
	return nil
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	decode(t, resp, v)
}

func postJSON(t *testing.T, url string, body, v any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	decode(t, resp, v)
}

func decode(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d: %s", resp.Request.URL, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v: %s", resp.Request.URL, err, b)
	}
}

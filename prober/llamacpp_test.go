package prober

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeLlamaCpp answers as llama.cpp server does (tools/server): /v1/models
// without max_model_len, /props with the per-slot n_ctx, /tokenize in its
// own form ({"content"} → {"tokens"}; a body without content gives no
// tokens), and a 400 exceed_context_size_error for a prompt over n_ctx.
type fakeLlamaCpp struct {
	t       *testing.T
	nCtx    atomic.Int32
	noProps bool // /props answers 404 (a build or server without it)
	models  string

	propsCalls, tokenizeCalls, usageCalls atomic.Int32
}

func newFakeLlamaCpp(t *testing.T, f *fakeLlamaCpp) (*fakeLlamaCpp, Target) {
	f.t = t
	if f.models == "" {
		f.models = `{"object":"list","data":[{"id":"tiny.gguf","object":"model","created":1,"owned_by":"llamacpp","meta":{"vocab_type":2,"n_vocab":32000,"n_ctx_train":131072,"n_embd":64,"n_params":1000000,"size":4000000}}]}`
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, Target{Name: "llama", API: APIChat, BaseURL: srv.URL, Client: srv.Client()}
}

func (f *fakeLlamaCpp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/models":
		_, _ = io.WriteString(w, f.models)
		return
	case "/props":
		f.propsCalls.Add(1)
		if f.noProps {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `{"default_generation_settings":{"n_ctx":%d,"params":{"n_predict":-1}},"total_slots":2,"model_path":"tiny.gguf","chat_template":"x","build_info":"b1-test"}`, f.nCtx.Load())
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		w.WriteHeader(400)
		return
	}
	if r.URL.Path == "/tokenize" {
		f.tokenizeCalls.Add(1)
		n := 0
		if c, ok := body["content"].(string); ok {
			n = fakeTokens(c)
		}
		ids := make([]string, n)
		for i := range ids {
			ids[i] = "7"
		}
		fmt.Fprintf(w, `{"tokens":[%s]}`, strings.Join(ids, ","))
		return
	}
	if r.URL.Path != "/v1/chat/completions" {
		w.WriteHeader(404)
		return
	}
	msgs, _ := body["messages"].([]any)
	text := ""
	if len(msgs) > 0 {
		text, _ = msgs[0].(map[string]any)["content"].(string)
	}
	n := fakeChatTemplate + fakeTokens(text)
	if ctx := int(f.nCtx.Load()); n > ctx {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(400)
		fmt.Fprintf(w, `{"error":{"code":400,"message":"request (%d tokens) exceeds the available context size (%d tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":%d,"n_ctx":%d}}`, n, ctx, n, ctx)
		return
	}
	if body["stream"] != true {
		f.usageCalls.Add(1)
		fmt.Fprintf(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"A"},"finish_reason":"length"}],"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":1}}`, n, n+1)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, s := range sseTokenStream(n, int(body["max_tokens"].(float64)), 1, 0, 0) {
		_, _ = io.WriteString(w, s.data)
	}
}

func TestLlamaCppListModelsTakesPropsContext(t *testing.T) {
	twoModels := `{"object":"list","data":[{"id":"a"},{"id":"b"}]}`
	vllm := `{"object":"list","data":[{"id":"q","max_model_len":4096}]}`
	for _, tc := range []struct {
		name     string
		noProps  bool
		models   string
		want     int
		propsHit bool
	}{
		{"n_ctx stands in for max_model_len", false, "", 2048, true},
		{"no /props (Ollama): unknown", true, "", 0, true},
		{"several models: /props not asked", false, twoModels, 0, false},
		{"max_model_len given: /props not asked", false, vllm, 4096, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, target := newFakeLlamaCpp(t, &fakeLlamaCpp{noProps: tc.noProps, models: tc.models})
			f.nCtx.Store(2048)
			models, err := ListModels(context.Background(), target)
			if err != nil {
				t.Fatal(err)
			}
			if models[0].MaxModelLen != tc.want || (f.propsCalls.Load() > 0) != tc.propsHit {
				t.Fatalf("MaxModelLen %d after %d /props reads; want %d, read %v", models[0].MaxModelLen, f.propsCalls.Load(), tc.want, tc.propsHit)
			}
		})
	}
}

// /props that is not llama.cpp's (a catch-all 200, a huge body) leaves the
// length unknown and the listing intact.
func TestLlamaCppPropsUnreadable(t *testing.T) {
	for name, body := range map[string]string{
		"html":       "<html>ok</html>",
		"negative":   `{"total_slots":1,"default_generation_settings":{"n_ctx":-5}}`,
		"over 1 MiB": `{"total_slots":1,"x":"` + strings.Repeat("a", MaxPropsBytes) + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/models" {
					_, _ = io.WriteString(w, `{"data":[{"id":"m"}]}`)
					return
				}
				_, _ = io.WriteString(w, body)
			}))
			defer srv.Close()
			models, err := ListModels(context.Background(), Target{BaseURL: srv.URL})
			if err != nil || len(models) != 1 || models[0].MaxModelLen != 0 {
				t.Fatalf("%v %+v", err, models)
			}
		})
	}
}

// llama.cpp's /tokenize answers {"tokens": […]} to vLLM's request form
// (empty: it reads only "content"): calibration must not take that for a
// count, and falls back to usage counts with n_ctx as the length.
func TestLlamaCppTokenizeFormFallsBack(t *testing.T) {
	f, target := newFakeLlamaCpp(t, &fakeLlamaCpp{})
	f.nCtx.Store(4096)
	p := New(nil, nil)
	prep, err := p.Prepare(context.Background(), target, "tiny.gguf", calScenario("chatbot", 1024, 64))
	if err != nil {
		t.Fatal(err)
	}
	if prep.Method != CalibrationUsage || prep.MaxModelLen != 4096 || f.tokenizeCalls.Load() != 1 {
		t.Fatalf("method %q, max_model_len %d, %d /tokenize calls; want usage, 4096 (from /props), 1", prep.Method, prep.MaxModelLen, f.tokenizeCalls.Load())
	}
	if got := serverCount(prep); !PromptLengthWithin(got, 1024) {
		t.Fatalf("calibrated prompt counts %d tokens, want about 1024", got)
	}
	// A scenario longer than n_ctx does not fit, as over max_model_len.
	if _, err := p.Prepare(context.Background(), target, "tiny.gguf", calScenario("rag", 3000, 1500)); err == nil ||
		!strings.Contains(err.Error(), "exceed max_model_len 4096") {
		t.Fatalf("err = %v", err)
	}
}

// llama.cpp's 400 exceed_context_size_error is a prompt that does not fit
// (prompt_truncated, with the context to set), in calibration and in a probe.
func TestLlamaCppContextRefusal(t *testing.T) {
	f, target := newFakeLlamaCpp(t, &fakeLlamaCpp{noProps: true}) // length unknown: the prompt is sent
	f.nCtx.Store(2048)
	p := New(nil, nil)
	s := calScenario("rag", 3000, 256)
	r := p.Probe(context.Background(), target, "tiny.gguf", s)
	var cut *PromptCutError
	if r.Kind != KindError || r.Reason != ReasonPromptTruncated || !errors.As(r.Err, &cut) {
		t.Fatalf("calibration: %s/%s %v", r.Kind, r.Reason, r.Err)
	}
	if !cut.Refused || cut.Context != 2048 || cut.Sent <= 2048 || cut.Needed != 3256 || r.PromptTokens != 0 {
		t.Fatalf("cut = %+v, prompt tokens %d", *cut, r.PromptTokens)
	}
	for _, want := range []string{"refused a", "context of 2048 tokens", "at least 3256 tokens", "--ctx-size"} {
		if !strings.Contains(r.Err.Error(), want) {
			t.Errorf("error %q does not say %q", r.Err, want)
		}
	}
	// Calibrated on a larger context, then restarted with a smaller one:
	// the probe itself is refused.
	f.nCtx.Store(8192)
	p.Invalidate(target, "")
	prep, err := p.Prepare(context.Background(), target, "tiny.gguf", s)
	if err != nil {
		t.Fatal(err)
	}
	f.nCtx.Store(2048)
	r = p.Run(context.Background(), target, prep)
	var he *HTTPError
	if r.Reason != ReasonPromptTruncated || !errors.As(r.Err, &cut) || !errors.As(r.Err, &he) || he.StatusCode != 400 || cut.Needed != 3256 {
		t.Fatalf("probe: %s/%s %v", r.Kind, r.Reason, r.Err)
	}
	if got := ClassifyError(r.Err); got != ReasonPromptTruncated {
		t.Errorf("ClassifyError = %s", got)
	}
}

func TestContextRefusal(t *testing.T) {
	body := `{"error":{"code":400,"message":"request (13392 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":13392,"n_ctx":8192}}`
	he := newHTTPError(400, []byte(body))
	if he.Reason() != ReasonPromptTruncated || he.cut == nil || he.cut.Sent != 13392 || he.cut.Context != 8192 ||
		!strings.Contains(he.Error(), "exceeds the available context size") {
		t.Fatalf("%+v %v", he, he.cut)
	}
	bare := newHTTPError(400, []byte(`{"error":{"code":400,"message":"too long","type":"exceed_context_size_error"}}`))
	if bare.Reason() != ReasonPromptTruncated || bare.cut.Error() != "the server refused the prompt as longer than its context (exceed_context_size_error)" {
		t.Errorf("without n_ctx: %s, %q", bare.Reason(), bare.cut.Error())
	}
	for name, tc := range map[string]struct {
		status int
		body   string
	}{
		"vLLM's 400":         {400, `{"object":"error","message":"This model's maximum context length is 4096 tokens","type":"BadRequestError","code":400}`},
		"other type":         {400, `{"error":{"type":"invalid_request_error","n_ctx":8192}}`},
		"same body, not 400": {500, body},
		"not JSON":           {400, "exceed_context_size_error"},
	} {
		if he := newHTTPError(tc.status, []byte(tc.body)); he.cut != nil || errors.Unwrap(he) != nil {
			t.Errorf("%s: taken for a context refusal", name)
		}
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The scheduler disables a scenario over llama.cpp's n_ctx as one over
// vLLM's max_model_len, with the same log line.
func TestSchedulerDisablesScenarioOverLlamaCppContext(t *testing.T) {
	f, target := newFakeLlamaCpp(t, &fakeLlamaCpp{})
	f.nCtx.Store(2048)
	obs := newSchedObserver()
	var logs lockedBuffer
	var probed sync.Map
	probe := func(ctx context.Context, tg Target, model string, s Scenario, think ThinkFunc) Result {
		probed.Store(s.Name, model)
		return schedOK(tg, model, s)
	}
	fits, tooLong := schedScenario("chatbot", 1024, time.Minute), schedScenario("rag", 4096, time.Minute)
	s := NewScheduler([]ScheduledTarget{{Target: target, Scenarios: []Scenario{fits, tooLong}}},
		SchedulerOptions{Probe: probe, Observer: obs, Sleep: schedFastSleep, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	schedRunFor(t, s, 2*time.Second, func() bool { r, _, _, _ := obs.snapshot(); return len(r) >= 3 })
	if d, maxLen := s.ScenarioDisabled("llama", "rag"); !d || maxLen != 2048 {
		t.Errorf("ScenarioDisabled(rag) = %v, %d; want true, 2048", d, maxLen)
	}
	if d, _ := s.ScenarioDisabled("llama", "chatbot"); d {
		t.Error("chatbot disabled")
	}
	if _, ok := probed.Load("rag"); ok {
		t.Error("the scenario over n_ctx was probed")
	}
	if got := logs.String(); strings.Count(got, "scenario disabled") != 1 || !strings.Contains(got, "scenario=rag") || !strings.Contains(got, "max_model_len=2048") {
		t.Errorf("log:\n%s", got)
	}
}

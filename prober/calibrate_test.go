package prober

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"
)

// fakeTokens is a tokenizer deliberately unlike word counting: letters cost
// one token per started group of four, every digit and punctuation mark is
// a token, and a paragraph break is one more.
func fakeTokens(text string) int {
	n := strings.Count(text, "\n\n")
	for _, w := range strings.Fields(text) {
		letters := 0
		for _, r := range w {
			if unicode.IsLetter(r) {
				letters++
			} else {
				n++
			}
		}
		if letters > 0 {
			n += 1 + (letters-1)/4
		}
	}
	return n
}

// Template overheads of the fake server: a chat template, a BOS token.
const (
	fakeChatTemplate = 14
	fakeBOS          = 1
)

// fakeVLLM is a minimal vLLM: /tokenize, non-streaming calibration requests,
// canned streams and /v1/models, all counting with fakeTokens.
type fakeVLLM struct {
	t            *testing.T
	noTokenize   bool // /tokenize answers 404
	tokenizeHTML bool // /tokenize answers 200 with HTML
	maxModelLen  int
	delay        time.Duration // per /tokenize call
	promptSkew   atomic.Int32  // added to prompt_tokens in streams
	// cutAt, when positive, makes the completions endpoints cut longer
	// prompts to this many tokens and answer 200, as Ollama does.
	cutAt atomic.Int32

	tokenizeCalls, usageCalls, streamCalls atomic.Int32
	mu                                     sync.Mutex
	salts                                  []string
}

func newFakeVLLM(t *testing.T, f *fakeVLLM) (*fakeVLLM, Target) {
	f.t = t
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, Target{Name: "fake", API: APIChat, BaseURL: srv.URL + "/", Client: srv.Client()} // trailing slash on purpose
}

func (f *fakeVLLM) prompt(body map[string]any) (string, API) {
	if p, ok := body["prompt"].(string); ok {
		return p, APICompletions
	}
	msgs, _ := body["messages"].([]any)
	if len(msgs) != 1 {
		f.t.Errorf("messages = %v", body["messages"])
		return "", APIChat
	}
	c, _ := msgs[0].(map[string]any)["content"].(string)
	return c, APIChat
}

func (f *fakeVLLM) count(text string, api API) int {
	if api == APICompletions {
		return fakeBOS + fakeTokens(text)
	}
	return fakeChatTemplate + fakeTokens(text)
}

func (f *fakeVLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/models" {
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"auto-model","object":"model","root":"org/auto-model","max_model_len":8192}]}`)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		f.t.Errorf("%s: body: %v", r.URL.Path, err)
		w.WriteHeader(400)
		return
	}
	text, api := f.prompt(body)
	if !strings.HasPrefix(text, "[probe ") {
		f.t.Errorf("prompt does not start with the nonce: %.40q", text)
	}
	n := f.count(text, api)
	read := n // what the completions endpoints read
	if c := int(f.cutAt.Load()); c > 0 && read > c {
		read = c
	}
	switch r.URL.Path {
	case "/tokenize":
		f.tokenizeCalls.Add(1)
		time.Sleep(f.delay)
		switch {
		case f.noTokenize:
			w.WriteHeader(404)
			_, _ = io.WriteString(w, `{"detail":"Not Found"}`)
			return
		case f.tokenizeHTML:
			_, _ = io.WriteString(w, "<html><body>hello</body></html>")
			return
		}
		if api == APIChat && body["add_generation_prompt"] != true {
			f.t.Errorf("tokenize chat form without add_generation_prompt: %v", body["add_generation_prompt"])
		}
		ids := make([]string, n)
		for i := range ids {
			ids[i] = "7"
		}
		fmt.Fprintf(w, `{"count":%d,"max_model_len":%d,"tokens":[%s],"token_strs":null}`, n, f.maxModelLen, strings.Join(ids, ","))
	case "/v1/chat/completions", "/v1/completions":
		if body["stream"] != true {
			f.usageCalls.Add(1)
			salt, _ := body["cache_salt"].(string)
			if body["max_tokens"] != 1.0 || salt == "" {
				f.t.Errorf("calibration request: max_tokens=%v cache_salt=%q", body["max_tokens"], salt)
			}
			f.mu.Lock()
			f.salts = append(f.salts, salt)
			f.mu.Unlock()
			fmt.Fprintf(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"A"},"finish_reason":"length"}],"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":1}}`, read, read+1)
			return
		}
		f.streamCalls.Add(1)
		out := int(body["max_tokens"].(float64))
		w.Header().Set("Content-Type", "text/event-stream")
		for _, s := range sseTokenStream(read+int(f.promptSkew.Load()), out, 1, 0, 0) {
			_, _ = io.WriteString(w, s.data)
		}
	default:
		w.WriteHeader(404)
	}
}

func calScenario(name string, in, out int) Scenario {
	return Scenario{Name: name, Family: FamilyCustom, InputTokens: in, OutputTokens: out, Interval: time.Minute, Timeout: time.Minute}
}

// serverCount is what the fake server counts for a prompt of prep's length.
func serverCount(prep *Prepared) int {
	text := promptText(newNonce(), bodyText(prep.Words, prep.Fill))
	if prep.API == APICompletions {
		return fakeBOS + fakeTokens(text)
	}
	return fakeChatTemplate + fakeTokens(text)
}

func TestCalibrateTokenize(t *testing.T) {
	tests := []struct {
		api API
		in  int
	}{
		{APIChat, 64}, {APIChat, 1024}, {APIChat, 4096}, {APICompletions, 1024}, {APIChat, 32768}, {APICompletions, 98304},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%d", tc.api, tc.in), func(t *testing.T) {
			f, target := newFakeVLLM(t, &fakeVLLM{maxModelLen: 200000})
			target.API = tc.api
			p := New(nil, nil)
			s := calScenario("cal", tc.in, 8)
			prep, err := p.Prepare(context.Background(), target, "m", s)
			if err != nil {
				t.Fatal(err)
			}
			got := serverCount(prep)
			if got != prep.PromptTokens {
				t.Errorf("server counts %d, Prepared says %d (nonce token count must not vary)", got, prep.PromptTokens)
			}
			if !PromptLengthWithin(got, tc.in) {
				t.Fatalf("calibrated prompt is %d tokens, want %d±%d", got, tc.in, PromptTolerance(tc.in))
			}
			if got != tc.in {
				t.Errorf("calibrated prompt is %d tokens (%d words, fill %q), want exactly %d", got, prep.Words, prep.Fill, tc.in)
			}
			if calls := f.tokenizeCalls.Load(); calls > 8 { // the word search, then at most two counts to fill the gap
				t.Errorf("%d /tokenize calls, want few", calls)
			}
			if prep.Method != CalibrationTokenize || prep.MaxModelLen != 200000 {
				t.Errorf("method %q max_model_len %d", prep.Method, prep.MaxModelLen)
			}
			t.Logf("%d tokens in %d words and fill %q with %d /tokenize calls", got, prep.Words, prep.Fill, f.tokenizeCalls.Load())

			r := p.Run(context.Background(), target, prep)
			if r.Kind != KindSuccess || !r.PromptLengthOK || r.PromptTokens != got {
				t.Fatalf("probe: %s/%s %v prompt=%d ok=%v", r.Kind, r.Reason, r.Err, r.PromptTokens, r.PromptLengthOK)
			}
		})
	}
}

func TestCalibrateFallback(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    *fakeVLLM
	}{
		{"tokenize 404", &fakeVLLM{noTokenize: true}},
		{"tokenize not JSON", &fakeVLLM{tokenizeHTML: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, target := newFakeVLLM(t, tc.f)
			p := New(nil, nil)
			prep, err := p.Prepare(context.Background(), target, "m", calScenario("a", 4096, 8))
			if err != nil {
				t.Fatal(err)
			}
			if prep.MaxModelLen != 0 {
				t.Errorf("max_model_len %d, but the fake lists no model m", prep.MaxModelLen)
			}
			if got := serverCount(prep); !PromptLengthWithin(got, 4096) || prep.Method != CalibrationUsage {
				t.Fatalf("calibrated to %d tokens by %q", got, prep.Method)
			}
			if n := f.usageCalls.Load(); n > 6 {
				t.Errorf("%d max_tokens=1 requests, want few (each is a full prefill)", n)
			}
			// Another input length: /tokenize is not asked again.
			if _, err := p.Prepare(context.Background(), target, "m", calScenario("b", 2048, 8)); err != nil {
				t.Fatal(err)
			}
			if n := f.tokenizeCalls.Load(); n != 1 {
				t.Errorf("/tokenize asked %d times, want once", n)
			}
			seen := map[string]bool{}
			for _, s := range f.salts {
				if seen[s] {
					t.Fatalf("cache_salt %q reused", s)
				}
				seen[s] = true
			}
			if r := p.Run(context.Background(), target, prep); r.Kind != KindSuccess || !r.PromptLengthOK {
				t.Fatalf("probe: %s/%s %v", r.Kind, r.Reason, r.Err)
			}
		})
	}
}

func TestFallbackLearnsMaxModelLen(t *testing.T) {
	_, target := newFakeVLLM(t, &fakeVLLM{noTokenize: true})
	p := New(nil, nil)
	prep, err := p.Prepare(context.Background(), target, "auto-model", calScenario("a", 1024, 8))
	if err != nil || prep.MaxModelLen != 8192 {
		t.Fatalf("err %v, max_model_len %v", err, prep)
	}
	if _, err := p.Prepare(context.Background(), target, "auto-model", calScenario("big", 8000, 1024)); err == nil ||
		!strings.Contains(err.Error(), "max_model_len 8192") {
		t.Fatalf("err = %v", err)
	}
}

func TestCalibrationCache(t *testing.T) {
	f, target := newFakeVLLM(t, &fakeVLLM{})
	p := New(nil, nil)
	ctx := context.Background()
	chatbot := calScenario("chatbot", 1024, 256)
	prep1, err := p.Prepare(ctx, target, "m", chatbot)
	if err != nil {
		t.Fatal(err)
	}
	calls := f.tokenizeCalls.Load()

	prep2, _ := p.Prepare(ctx, target, "m", chatbot)
	if prep2 != prep1 || f.tokenizeCalls.Load() != calls {
		t.Fatal("second Prepare did not reuse the cached calibration and template")
	}
	// Same input length, other output length: the calibration is shared, the body is not.
	code, err := p.Prepare(ctx, target, "m", calScenario("code_completion", 1024, 128))
	if err != nil {
		t.Fatal(err)
	}
	if f.tokenizeCalls.Load() != calls || code.Words != prep1.Words || code == prep1 {
		t.Fatal("same input length should share the calibration but not the Prepared")
	}
	// Another model or API is another calibration.
	if _, err := p.Prepare(ctx, target, "other", chatbot); err != nil {
		t.Fatal(err)
	}
	if f.tokenizeCalls.Load() == calls {
		t.Fatal("another model reused the calibration")
	}
	calls = f.tokenizeCalls.Load()

	p.Invalidate(target, "m")
	if _, err := p.Prepare(ctx, target, "m", chatbot); err != nil {
		t.Fatal(err)
	}
	if f.tokenizeCalls.Load() == calls {
		t.Fatal("Invalidate did not drop the calibration")
	}
	calls = f.tokenizeCalls.Load()
	if _, err := p.Prepare(ctx, target, "other", chatbot); err != nil {
		t.Fatal(err)
	}
	if f.tokenizeCalls.Load() != calls {
		t.Fatal("Invalidate of model m dropped model other")
	}
}

func TestCalibrationSingleflight(t *testing.T) {
	// Calls for one calibration, measured on its own.
	f1, t1 := newFakeVLLM(t, &fakeVLLM{})
	if _, err := New(nil, nil).Prepare(context.Background(), t1, "m", calScenario("a", 4096, 8)); err != nil {
		t.Fatal(err)
	}
	one := f1.tokenizeCalls.Load()

	f, target := newFakeVLLM(t, &fakeVLLM{delay: 5 * time.Millisecond})
	p := New(nil, nil)
	var wg sync.WaitGroup
	preps := make([]*Prepared, 8)
	for i := range preps {
		wg.Go(func() {
			var err error
			if preps[i], err = p.Prepare(context.Background(), target, "m", calScenario("a", 4096, 8)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := f.tokenizeCalls.Load(); got != one {
		t.Fatalf("8 concurrent Prepares made %d /tokenize calls, one calibration makes %d", got, one)
	}
	for _, prep := range preps[1:] {
		if prep != preps[0] {
			t.Fatal("concurrent Prepares returned different templates")
		}
	}
}

func TestRecalibrateOnPromptMismatch(t *testing.T) {
	f, target := newFakeVLLM(t, &fakeVLLM{})
	p := New(nil, nil)
	ctx := context.Background()
	s := calScenario("chatbot", 1024, 4)
	prep, err := p.Prepare(ctx, target, "m", s)
	if err != nil {
		t.Fatal(err)
	}
	calls := f.tokenizeCalls.Load()

	f.promptSkew.Store(5) // within ±10: fine
	if r := p.Run(ctx, target, prep); r.Kind != KindSuccess || !r.PromptLengthOK {
		t.Fatalf("%s/%s ok=%v", r.Kind, r.Reason, r.PromptLengthOK)
	}
	if _, _ = p.Prepare(ctx, target, "m", s); f.tokenizeCalls.Load() != calls {
		t.Fatal("recalibrated although the prompt length was within tolerance")
	}

	f.promptSkew.Store(40) // the server's tokenizer changed
	r := p.Run(ctx, target, prep)
	if r.Kind != KindSuccess || r.PromptLengthOK {
		t.Fatalf("%s/%s ok=%v prompt=%d", r.Kind, r.Reason, r.PromptLengthOK, r.PromptTokens)
	}
	if _, _ = p.Prepare(ctx, target, "m", s); f.tokenizeCalls.Load() == calls {
		t.Fatal("the cache entry was not dropped after a prompt length mismatch")
	}
}

// A server that cuts prompts to its context window and answers 200 (Ollama)
// is found out in calibration: the count stops growing with the prompt. The
// probe fails as prompt_truncated, says the context length to set, and is
// not calibrated again at every probe.
func TestCalibrationFindsPromptCut(t *testing.T) {
	f, target := newFakeVLLM(t, &fakeVLLM{noTokenize: true})
	f.cutAt.Store(8192)
	p := New(nil, nil)
	s := calScenario("big", 12000, 256)
	r := p.Probe(context.Background(), target, "m", s)
	var cut *PromptCutError
	if r.Kind != KindError || r.Reason != ReasonPromptTruncated || !errors.As(r.Err, &cut) {
		t.Fatalf("%s/%s %v", r.Kind, r.Reason, r.Err)
	}
	if cut.Read != 8192 || cut.Want != 12000 || cut.Needed != 12256 || r.PromptTokens != 8192 {
		t.Fatalf("cut = %+v, prompt tokens %d", *cut, r.PromptTokens)
	}
	for _, want := range []string{"8192 tokens", "12000-token prompt", "at least 12256 tokens", "OLLAMA_CONTEXT_LENGTH", "--max-model-len"} {
		if !strings.Contains(r.Err.Error(), want) {
			t.Errorf("error %q does not say %q", r.Err, want)
		}
	}
	if n := f.usageCalls.Load(); n > 4 {
		t.Errorf("%d calibration requests to find the cut, want a few", n)
	}
	calls := f.usageCalls.Load()
	if r := p.Probe(context.Background(), target, "m", s); r.Reason != ReasonPromptTruncated || f.usageCalls.Load() != calls {
		t.Fatalf("second probe: %s, %d more calibration requests; want the remembered cut and none", r.Reason, f.usageCalls.Load()-calls)
	}
	// A scenario that fits is calibrated and probed as usual.
	if r := p.Probe(context.Background(), target, "m", calScenario("small", 4096, 8)); r.Kind != KindSuccess {
		t.Fatalf("fitting scenario: %s/%s %v", r.Kind, r.Reason, r.Err)
	}
	// Invalidate (a restart, a new model) forgets the cut.
	f.cutAt.Store(0)
	p.Invalidate(target, "")
	if r := p.Probe(context.Background(), target, "m", s); r.Kind != KindSuccess {
		t.Fatalf("after a restart with a longer context: %s/%s %v", r.Kind, r.Reason, r.Err)
	}
}

// A prompt calibrated earlier that the server now reads only in part (it
// was restarted with a shorter context) fails the probe: its TTFT is that
// of a shorter prompt.
func TestProbeOfACutPromptFails(t *testing.T) {
	f, target := newFakeVLLM(t, &fakeVLLM{noTokenize: true})
	p := New(nil, nil)
	s := calScenario("rag", 4096, 8)
	prep, err := p.Prepare(context.Background(), target, "m", s)
	if err != nil {
		t.Fatal(err)
	}
	f.cutAt.Store(2048)
	r := p.Run(context.Background(), target, prep)
	var cut *PromptCutError
	if r.Kind != KindError || r.Reason != ReasonPromptTruncated || !errors.As(r.Err, &cut) || !cut.Calibrated || r.PromptTokens != 2048 {
		t.Fatalf("%s/%s %v prompt=%d", r.Kind, r.Reason, r.Err, r.PromptTokens)
	}
	if !strings.Contains(r.Err.Error(), "at least 4104 tokens") {
		t.Errorf("error %q does not name the context length to set", r.Err)
	}
	// The next probe recalibrates and finds the cut.
	if r := p.Probe(context.Background(), target, "m", s); r.Reason != ReasonPromptTruncated || !errors.As(r.Err, &cut) || cut.Calibrated {
		t.Fatalf("next probe: %s/%s %v", r.Kind, r.Reason, r.Err)
	}
}

func TestPrepareDoesNotFit(t *testing.T) {
	_, target := newFakeVLLM(t, &fakeVLLM{maxModelLen: 1200})
	p := New(nil, nil)
	s := calScenario("chatbot", 1024, 256)
	if _, err := p.Prepare(context.Background(), target, "m", s); err == nil || !strings.Contains(err.Error(), "max_model_len 1200") {
		t.Fatalf("err = %v", err)
	}
	if r := p.Probe(context.Background(), target, "m", s); r.Reason != ReasonCalibration || r.Scenario != "chatbot" {
		t.Fatalf("%+v", r)
	}
}

func TestProbeReasonWhenCalibrationFails(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String()
	l.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		_, _ = io.WriteString(w, `{"error":{"message":"tokenizer exploded"}}`)
	}))
	defer broken.Close()
	tests := []struct {
		url    string
		reason Reason
		errHas string
	}{
		{down, ReasonConnectionRefused, "refused"},
		{broken.URL, ReasonHTTP5xx, "tokenizer exploded"},
	}
	for _, tc := range tests {
		r := New(nil, nil).Probe(context.Background(), Target{Name: "x", API: APIChat, BaseURL: tc.url}, "m", calScenario("s", 512, 8))
		if r.Kind != KindError || r.Reason != tc.reason || !strings.Contains(r.Err.Error(), tc.errHas) {
			t.Errorf("%s: %s/%s %v", tc.url, r.Kind, r.Reason, r.Err)
		}
	}
}

func TestTokenizeUnknownModelIsNotAMissingEndpoint(t *testing.T) {
	var completions atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/tokenize" {
			completions.Add(1)
		}
		w.WriteHeader(404)
		_, _ = io.WriteString(w, `{"error":{"message":"The model `+"`nope`"+` does not exist.","type":"NotFoundError","code":404}}`)
	}))
	defer srv.Close()
	p := New(nil, nil)
	_, err := p.Prepare(context.Background(), Target{API: APIChat, BaseURL: srv.URL}, "nope", calScenario("s", 512, 8))
	if err == nil || !strings.Contains(err.Error(), "does not exist") || ClassifyError(err) != ReasonHTTP4xx || completions.Load() != 0 {
		t.Fatalf("err = %v (reason %q), %d fallback requests", err, ClassifyError(err), completions.Load())
	}
	if v, _ := p.noTokenize.get(srv.URL); v {
		t.Fatal("an unknown model marked the target as lacking /tokenize")
	}
}

func TestPrepareDetectsModel(t *testing.T) {
	f, target := newFakeVLLM(t, &fakeVLLM{})
	prep, err := New(nil, nil).Prepare(context.Background(), target, "", calScenario("s", 512, 8))
	if err != nil {
		t.Fatal(err)
	}
	if prep.Model != "auto-model" || f.tokenizeCalls.Load() == 0 {
		t.Fatalf("model %q", prep.Model)
	}
	if prep.MaxModelLen != 0 {
		t.Fatalf("max_model_len %d from a fake that reports none", prep.MaxModelLen)
	}
}

func TestDetectModelIsRemembered(t *testing.T) {
	var lists atomic.Int32
	f := &fakeVLLM{}
	f.t = t
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			lists.Add(1)
		}
		f.ServeHTTP(w, r)
	}))
	defer srv.Close()
	target := Target{Name: "fake", API: APIChat, BaseURL: srv.URL}
	p := New(nil, nil)
	for range 3 {
		if r := p.Probe(context.Background(), target, "", calScenario("s", 256, 4)); r.Kind != KindSuccess || r.Model != "auto-model" {
			t.Fatalf("%s/%s %v model %q", r.Kind, r.Reason, r.Err, r.Model)
		}
	}
	if lists.Load() != 1 {
		t.Fatalf("/v1/models asked %d times", lists.Load())
	}
	p.Invalidate(target, "")
	if _, err := p.Prepare(context.Background(), target, "", calScenario("s", 256, 4)); err != nil || lists.Load() != 2 {
		t.Fatalf("after Invalidate: err %v, %d lists", err, lists.Load())
	}
}

func TestSearchWords(t *testing.T) {
	tests := []struct {
		name   string
		target int
		count  func(n int) int
	}{
		{"linear", 4096, func(n int) int { return 30 + int(1.7*float64(n)) }},
		{"wavy", 32768, func(n int) int { return 20 + int(1.31*float64(n)+4*math.Sin(float64(n))) }},
		{"coarse words", 1024, func(n int) int { return 10 + 3*n }}, // 3 tokens per word: exact hit impossible
		{"small", 20, func(n int) int { return 17 + n }},
		{"huge", 262144, func(n int) int { return 25 + n*4/3 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			words, got, rounds, err := searchWords(tc.target, tc.count(0), func(n int) (int, error) {
				calls++
				return tc.count(n), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.count(words) || !PromptLengthWithin(got, tc.target) || rounds != calls || rounds > 6 {
				t.Fatalf("words=%d got=%d rounds=%d", words, got, rounds)
			}
			t.Logf("%d tokens (want %d) in %d rounds", got, tc.target, rounds)
		})
	}
	if _, _, _, err := searchWords(100, 500, nil); err == nil {
		t.Fatal("an overhead above the target must fail")
	}
	boom := errors.New("boom")
	if _, _, _, err := searchWords(1000, 10, func(int) (int, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if _, _, _, err := searchWords(1000, 10, func(int) (int, error) { return 10, nil }); err == nil {
		t.Fatal("a count that does not grow must fail")
	}
	// A count that stops growing past the server's context window: cut.
	var cut *PromptCutError
	_, _, rounds, err := searchWords(12000, 10, func(n int) (int, error) { return min(10+n*4/3, 8192), nil })
	if !errors.As(err, &cut) || cut.Read != 8192 || cut.Want != 12000 || rounds > 3 {
		t.Fatalf("cut: err=%v rounds=%d", err, rounds)
	}
	// Word-to-word noise near the target is not a cut.
	if _, got, _, err := searchWords(4096, 10, func(n int) (int, error) { return 10 + n*4/3 + n%3, nil }); err != nil || !PromptLengthWithin(got, 4096) {
		t.Fatalf("noisy counts: got=%d err=%v", got, err)
	}
}

func TestPromptTolerance(t *testing.T) {
	for in, want := range map[int]int{100: 8, 799: 8, 1024: 10, 4096: 40, 98304: 983} {
		if got := PromptTolerance(in); got != want {
			t.Errorf("PromptTolerance(%d) = %d, want %d", in, got, want)
		}
	}
}

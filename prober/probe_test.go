package prober

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// probeScenario is a small custom scenario for the HTTP tests.
func probeScenario(outputTokens int, timeout time.Duration) Scenario {
	return Scenario{Name: "unit", Family: FamilyCustom, InputTokens: 100, OutputTokens: outputTokens,
		Interval: time.Minute, Timeout: timeout}
}

// preparedFor builds a Prepared without calibration (40 words of body).
func preparedFor(t *testing.T, api API, s Scenario) *Prepared {
	t.Helper()
	body, err := newBodyTemplate(api, "test-model", 40, s.OutputTokens, false, false)
	if err != nil {
		t.Fatal(err)
	}
	return &Prepared{Target: "unit", Model: "test-model", Scenario: s, API: api, Words: 40, body: body}
}

// sseConn writes canned SSE to a test client, flushing every write.
type sseConn struct {
	w http.ResponseWriter
	f http.Flusher
	r *http.Request
}

func (c *sseConn) send(parts ...string) {
	for _, p := range parts {
		_, _ = io.WriteString(c.w, p)
	}
	c.f.Flush()
}

// sleep waits d or until the client went away; it reports whether the client is still there.
func (c *sseConn) sleep(d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-c.r.Context().Done():
		return false
	}
}

// sseServer serves handle on every path. The request body is read first, and
// the 200 headers are flushed before handle runs, as vLLM does.
func sseServer(t *testing.T, handle func(c *sseConn)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		c := &sseConn{w: w, f: w.(http.Flusher), r: r}
		c.f.Flush()
		handle(c)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func testTarget(srv *httptest.Server) Target {
	return Target{Name: "unit", API: APIChat, BaseURL: srv.URL, Client: srv.Client()}
}

// playSteps sends a scripted stream with real sleeps.
func playSteps(c *sseConn, steps []netStep) {
	for _, s := range steps {
		if s.wait > 0 && !c.sleep(s.wait) {
			return
		}
		c.send(s.data)
	}
}

// between asserts lo <= d <= hi; the lower bound is causal (the server slept),
// the upper bound is generous so that a loaded machine does not fail the test.
func between(t *testing.T, what string, d, lo, hi time.Duration) {
	t.Helper()
	if d < lo || d > hi {
		t.Errorf("%s = %v, want within [%v, %v]", what, d, lo, hi)
	}
}

const slack = 250 * time.Millisecond

func TestRunRoleChunkIgnoredForTTFT(t *testing.T) {
	s := probeScenario(4, 10*time.Second)
	srv := sseServer(t, func(c *sseConn) { playSteps(c, sseTokenStream(100, 4, 1, 80*msec, 20*msec)) })
	p := New(nil, SystemClock{})
	r := p.Run(context.Background(), testTarget(srv), preparedFor(t, APIChat, s))
	if r.Kind != KindSuccess {
		t.Fatalf("%s/%s: %v", r.Kind, r.Reason, r.Err)
	}
	// The role chunk left at once; TTFT must be the first token's delay.
	between(t, "TTFT", r.TTFT(), 80*msec, 80*msec+slack)
	between(t, "ITL", r.ITL(), 20*msec-2*msec, 20*msec+slack/5)
	if r.OutputTokens != 4 || r.PromptTokens != 100 || !r.PromptLengthOK || r.FinishReason != "length" ||
		r.ResponseID != "chatcmpl-42" || !r.ContinuousUsage || r.RequestedTokens != 4 || r.Target != "unit" ||
		r.Model != "test-model" || r.Scenario != "unit" {
		t.Errorf("result fields: %+v", r)
	}
}

func TestRunMultiTokenChunks(t *testing.T) {
	s := probeScenario(12, 10*time.Second)
	srv := sseServer(t, func(c *sseConn) { playSteps(c, sseTokenStream(100, 12, 3, 30*msec, 30*msec)) })
	r := New(nil, nil).Run(context.Background(), testTarget(srv), preparedFor(t, APIChat, s))
	if r.Kind != KindSuccess {
		t.Fatalf("%s/%s: %v", r.Kind, r.Reason, r.Err)
	}
	if r.OutputTokens != 12 || r.FirstChunkTokens != 3 || !slices.Equal(r.ChunkTokens, []int32{3, 3, 3, 3}) {
		t.Fatalf("tokens: out=%d first=%d chunks=%v", r.OutputTokens, r.FirstChunkTokens, r.ChunkTokens)
	}
	// 90 ms of decode (the server slept it; a loaded machine adds to it) over 12-3 token intervals:
	// ITL is a ninth of it, not a third (the chunk gap) nor an eleventh (n-1).
	between(t, "DecodeTime", r.DecodeTime(), 90*msec-3*msec, 90*msec+slack)
	if got, want := r.ITL(), r.DecodeTime()/9; got < want-time.Microsecond || got > want+time.Microsecond {
		t.Errorf("ITL = %v, want DecodeTime/9 = %v", got, want)
	}
}

func TestRunCompletionsEndpoint(t *testing.T) {
	s := probeScenario(3, 10*time.Second)
	var path, prompt string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		path, prompt = r.URL.Path, body["prompt"].(string)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 1; i <= 3; i++ {
			_, _ = io.WriteString(w, sseTextLine(" w", "", sseUsageJSON(100, i)))
		}
		_, _ = io.WriteString(w, sseUsageLine(100, 3)+sseDoneLine)
	}))
	defer srv.Close()
	r := New(nil, nil).Run(context.Background(), testTarget(srv), preparedFor(t, APICompletions, s))
	if r.Kind != KindSuccess || r.ResponseID != "cmpl-7" || r.FirstContent.IsZero() {
		t.Fatalf("%s/%s: %v %+v", r.Kind, r.Reason, r.Err, r)
	}
	if path != "/v1/completions" || !strings.HasPrefix(prompt, "[probe ") {
		t.Fatalf("path %q prompt %.30q", path, prompt)
	}
}

// TestRunFailures covers every failure reason a real HTTP exchange produces.
func TestRunFailures(t *testing.T) {
	tokens := func(c *sseConn, n int) {
		c.send(sseChatLine(sseRoleDelta, "", sseUsageJSON(100, 0)))
		for i := 1; i <= n; i++ {
			c.send(sseChatLine(sseContent("x"), "", sseUsageJSON(100, i)))
		}
	}
	refused := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return "http://" + addr
	}
	// A server that hangs up without answering: a transport error that is not a refusal.
	hangUp := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				_, _ = c.Read(make([]byte, 1024))
				c.Close()
			}
		}()
		return "http://" + l.Addr().String()
	}
	plain := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
		}
	}
	tests := []struct {
		name    string
		url     string           // fixed base URL (refused)
		handler http.HandlerFunc // raw handler
		sse     func(c *sseConn) // or a canned SSE stream
		timeout time.Duration
		stall   time.Duration
		maxLine int
		kind    Kind
		reason  Reason
		errHas  string
	}{
		{name: "connection refused", url: refused(), reason: ReasonConnectionRefused},
		{name: "server hangs up", url: hangUp(), reason: ReasonConnection},
		{
			name: "timeout before first token", timeout: 150 * time.Millisecond, reason: ReasonTimeout,
			sse: func(c *sseConn) { c.send(sseChatLine(sseRoleDelta, "", "")); <-c.r.Context().Done() },
		},
		{
			name: "timeout before headers", timeout: 150 * time.Millisecond, reason: ReasonTimeout,
			handler: func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body) // the server notices a closed client only once the body is read
				<-r.Context().Done()
			},
		},
		{
			name: "stall after first token", stall: 100 * time.Millisecond, reason: ReasonStall,
			sse: func(c *sseConn) { tokens(c, 2); <-c.r.Context().Done() },
		},
		{
			name: "keep-alive comments are bytes, then timeout", stall: 100 * time.Millisecond, timeout: 400 * time.Millisecond, reason: ReasonTimeout,
			sse: func(c *sseConn) {
				tokens(c, 1)
				for c.sleep(30 * time.Millisecond) {
					c.send(": ping\n\n")
				}
			},
		},
		{
			name: "4xx with nested error.message", reason: ReasonHTTP4xx, errHas: "maximum context length is 4096 tokens",
			handler: plain(400, `{"error":{"message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}}`),
		},
		{
			name: "4xx with flat message", reason: ReasonHTTP4xx, errHas: "The model `x` does not exist.",
			handler: plain(404, `{"object":"error","message":"The model `+"`x`"+` does not exist.","type":"NotFoundError","param":null,"code":404}`),
		},
		{name: "5xx", reason: ReasonHTTP5xx, errHas: "503", handler: plain(503, `{"error":{"message":"queue full"}}`)},
		{name: "5xx text body", reason: ReasonHTTP5xx, errHas: "upstream down", handler: plain(502, "upstream down")},
		{name: "JSON error with 200", reason: ReasonStreamError, errHas: "bad", handler: plain(200, `{"error":{"message":"bad"}}`)},
		{name: "non-streaming 200", reason: ReasonMalformedChunk, handler: plain(200, `{"id":"x","choices":[]}`)},
		{
			name: "error event mid-stream", reason: ReasonStreamError, errHas: "CUDA out of memory",
			sse: func(c *sseConn) {
				tokens(c, 2)
				c.send(`data: {"error":{"object":"error","message":"CUDA out of memory","type":"InternalServerError","code":500}}`+"\n\n", sseDoneLine)
			},
		},
		{name: "stream cut (clean end, no [DONE])", reason: ReasonStreamCut, sse: func(c *sseConn) { tokens(c, 2) }},
		{name: "stream cut (aborted handler)", reason: ReasonStreamCut, sse: func(c *sseConn) { tokens(c, 2); panic(http.ErrAbortHandler) }},
		{
			name: "stream cut (connection reset)", reason: ReasonStreamCut,
			sse: func(c *sseConn) {
				tokens(c, 2)
				conn, _, err := c.w.(http.Hijacker).Hijack()
				if err != nil {
					panic(err)
				}
				_ = conn.(*net.TCPConn).SetLinger(0) // RST
				conn.Close()
			},
		},
		{name: "malformed chunk", reason: ReasonMalformedChunk, sse: func(c *sseConn) { tokens(c, 1); c.send("data: {\"choices\": [\n\n") }},
		{
			name: "oversized line", maxLine: 1024, reason: ReasonOversizedLine,
			sse: func(c *sseConn) { tokens(c, 1); c.send("data: " + strings.Repeat("a", 4096) + "\n\n") },
		},
		{
			name: "missing usage", reason: ReasonMissingUsage,
			sse: func(c *sseConn) {
				for range 3 {
					c.send(sseChatLine(sseContent("x"), "", ""))
				}
				c.send(sseDoneLine)
			},
		},
		{
			name: "short output", kind: KindShortOutput, errHas: "2 output tokens, asked for 3",
			sse: func(c *sseConn) { tokens(c, 2); c.send(sseUsageLine(100, 2), sseDoneLine) },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			target := Target{Name: "unit", API: APIChat, BaseURL: tc.url, StallTimeout: tc.stall}
			switch {
			case tc.handler != nil:
				srv := httptest.NewServer(tc.handler)
				defer srv.Close()
				target.BaseURL, target.Client = srv.URL, srv.Client()
			case tc.sse != nil:
				srv := sseServer(t, tc.sse)
				target.BaseURL, target.Client = srv.URL, srv.Client()
			}
			timeout := tc.timeout
			if timeout == 0 {
				timeout = 10 * time.Second
			}
			p := New(nil, nil)
			p.SetMaxLineBytes(tc.maxLine)
			began := time.Now()
			r := p.Run(context.Background(), target, preparedFor(t, APIChat, probeScenario(3, timeout)))
			wantKind := tc.kind
			if wantKind == "" {
				wantKind = KindError
			}
			if r.Kind != wantKind || r.Reason != tc.reason {
				t.Fatalf("outcome %s/%q (%v), want %s/%q", r.Kind, r.Reason, r.Err, wantKind, tc.reason)
			}
			if !validProbeOutcome(&r) {
				t.Fatalf("inconsistent outcome %s/%q/%v", r.Kind, r.Reason, r.Err)
			}
			if tc.errHas != "" && !strings.Contains(r.Err.Error(), tc.errHas) {
				t.Fatalf("Err = %q, want it to contain %q", r.Err, tc.errHas)
			}
			if took := time.Since(began); took > 5*time.Second {
				t.Fatalf("probe took %v", took)
			}
			if r.Start.IsZero() {
				t.Fatal("Start not set")
			}
		})
	}
}

// TestRunTimeoutClosesStream checks that the server sees the client leave
// (so vLLM aborts the request) on timeout and on stall.
func TestRunTimeoutClosesStream(t *testing.T) {
	for _, tc := range []struct {
		name           string
		timeout, stall time.Duration
		reason         Reason
	}{
		{"timeout", 200 * time.Millisecond, 0, ReasonTimeout},
		{"stall", 10 * time.Second, 100 * time.Millisecond, ReasonStall},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gone := make(chan struct{})
			srv := sseServer(t, func(c *sseConn) {
				c.send(sseChatLine(sseContent("x"), "", sseUsageJSON(100, 1)))
				<-c.r.Context().Done()
				close(gone)
			})
			target := testTarget(srv)
			target.StallTimeout = tc.stall
			r := New(nil, nil).Run(context.Background(), target, preparedFor(t, APIChat, probeScenario(3, tc.timeout)))
			if r.Reason != tc.reason {
				t.Fatalf("reason %q (%v), want %q", r.Reason, r.Err, tc.reason)
			}
			select {
			case <-gone:
			case <-time.After(5 * time.Second):
				t.Fatal("the server never saw the request cancelled")
			}
		})
	}
}

func TestRunStallResetByBytes(t *testing.T) {
	// Tokens every 60 ms with a 150 ms stall timeout: no stall although the
	// whole stream takes much longer than the stall timeout.
	s := probeScenario(8, 10*time.Second)
	srv := sseServer(t, func(c *sseConn) { playSteps(c, sseTokenStream(100, 8, 1, 10*msec, 60*msec)) })
	target := testTarget(srv)
	target.StallTimeout = 150 * time.Millisecond
	r := New(nil, nil).Run(context.Background(), target, preparedFor(t, APIChat, s))
	if r.Kind != KindSuccess {
		t.Fatalf("%s/%s: %v", r.Kind, r.Reason, r.Err)
	}
}

// TestRunRequestBody checks the body and headers of two consecutive probes.
func TestRunRequestBody(t *testing.T) {
	var mu sync.Mutex
	var bodies []map[string]any
	var headers []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("body is not JSON: %v", err)
		}
		mu.Lock()
		bodies, headers = append(bodies, body), append(headers, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for _, s := range sseTokenStream(100, 5, 1, 0, 0) {
			_, _ = io.WriteString(w, s.data)
		}
	}))
	defer srv.Close()
	target := testTarget(srv)
	target.Headers = map[string]string{"Authorization": "Bearer sk-test", "X-Team": "infra"}
	p := New(nil, nil)
	prep := preparedFor(t, APIChat, probeScenario(5, 10*time.Second))
	for range 2 {
		if r := p.Run(context.Background(), target, prep); r.Kind != KindSuccess {
			t.Fatalf("%s/%s: %v", r.Kind, r.Reason, r.Err)
		}
	}
	var salts, nonces []string
	for i, b := range bodies {
		for k, want := range map[string]any{"max_tokens": 5.0, "min_tokens": 5.0, "ignore_eos": true, "stream": true, "model": "test-model"} {
			if b[k] != want {
				t.Errorf("body %d: %s = %v, want %v", i, k, b[k], want)
			}
		}
		for _, k := range []string{"stop", "stop_token_ids", "max_completion_tokens"} {
			if _, ok := b[k]; ok {
				t.Errorf("body %d has %s", i, k)
			}
		}
		so, _ := b["stream_options"].(map[string]any)
		if so["include_usage"] != true || so["continuous_usage_stats"] != true {
			t.Errorf("body %d: stream_options = %v", i, b["stream_options"])
		}
		salt, _ := b["cache_salt"].(string)
		if len(salt) != saltLen {
			t.Errorf("body %d: cache_salt = %q", i, salt)
		}
		msgs, _ := b["messages"].([]any)
		if len(msgs) != 1 {
			t.Fatalf("body %d: messages = %v", i, b["messages"])
		}
		m := msgs[0].(map[string]any)
		text, _ := m["content"].(string)
		if m["role"] != "user" || !strings.HasPrefix(text, "[probe ") || !strings.Contains(text, "Continue the following text") {
			t.Errorf("body %d: message %.80q", i, text)
		}
		salts, nonces = append(salts, salt), append(nonces, text[len("[probe "):len("[probe ")+nonceLen])
		h := headers[i]
		if h.Get("Authorization") != "Bearer sk-test" || h.Get("X-Team") != "infra" ||
			h.Get("Accept") != "text/event-stream" || h.Get("Accept-Encoding") != "identity" {
			t.Errorf("headers %d: %v", i, h)
		}
	}
	if salts[0] == salts[1] || nonces[0] == nonces[1] {
		t.Errorf("salts %v and nonces %v must differ per request", salts, nonces)
	}
}

// TestRunStartIsBeforeWrite checks that t0 is taken before the request is on
// the wire and after Run was called.
func TestRunStartIsBeforeWrite(t *testing.T) {
	var arrived time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived = time.Now()
		_, _ = io.Copy(io.Discard, r.Body)
		for _, s := range sseTokenStream(100, 2, 1, 0, 0) {
			_, _ = io.WriteString(w, s.data)
		}
	}))
	defer srv.Close()
	before := time.Now()
	r := New(nil, nil).Run(context.Background(), testTarget(srv), preparedFor(t, APIChat, probeScenario(2, 10*time.Second)))
	if r.Kind != KindSuccess {
		t.Fatalf("%s/%s: %v", r.Kind, r.Reason, r.Err)
	}
	if r.Start.Before(before) || r.Start.After(arrived) {
		t.Fatalf("Start %v not within [Run called %v, request arrived %v]", r.Start, before, arrived)
	}
	if r.FirstToken.Before(r.Start) || r.LastToken.Before(r.FirstToken) {
		t.Fatalf("timestamps out of order: %+v", r)
	}
}

func TestRunNilPrepared(t *testing.T) {
	r := New(nil, nil).Run(context.Background(), Target{Name: "x"}, nil)
	if r.Kind != KindError || r.Reason != ReasonCalibration || r.Err == nil {
		t.Fatalf("%+v", r)
	}
}

func TestRunCallerCancelled(t *testing.T) {
	srv := sseServer(t, func(c *sseConn) { <-c.r.Context().Done() })
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	r := New(nil, nil).Run(ctx, testTarget(srv), preparedFor(t, APIChat, probeScenario(2, 10*time.Second)))
	if r.Kind != KindError || !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("%s/%s: %v", r.Kind, r.Reason, r.Err)
	}
}

func TestClassifyError(t *testing.T) {
	tests := []struct {
		err  error
		want Reason
	}{
		{nil, ReasonNone},
		{ErrStall, ReasonStall},
		{ErrProbeTimeout, ReasonTimeout},
		{context.DeadlineExceeded, ReasonTimeout},
		{&net.OpError{Op: "dial", Err: syscallErr("connect: connection refused")}, ReasonConnection},
		{&net.OpError{Op: "dial", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}, ReasonConnectionRefused},
		{&ReasonError{Reason: ReasonHTTP5xx, Err: errors.New("x")}, ReasonHTTP5xx},
		{&HTTPError{StatusCode: 429}, ReasonHTTP4xx},
		{&HTTPError{StatusCode: 500}, ReasonHTTP5xx},
		{errors.New("tls: bad certificate"), ReasonConnection},
		{context.Canceled, ReasonConnection},
	}
	for _, tc := range tests {
		if got := ClassifyError(tc.err); got != tc.want {
			t.Errorf("ClassifyError(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

type syscallErr string

func (e syscallErr) Error() string { return string(e) }

func TestErrorMessage(t *testing.T) {
	tests := map[string]string{
		`{"error":{"message":"nested","type":"x"}}`:            "nested",
		`{"object":"error","message":"flat","code":400}`:       "flat",
		`{"error":"plain string"}`:                             "plain string",
		`{"detail":"Not Found"}`:                               "Not Found",
		`{"detail":[{"loc":["body"],"msg":"field required"}]}`: `[{"loc":["body"],"msg":"field required"}]`,
		"  Bad Gateway \n":                                     "Bad Gateway",
	}
	for in, want := range tests {
		if got := errorMessage([]byte(in)); got != want {
			t.Errorf("errorMessage(%q) = %q, want %q", in, got, want)
		}
	}
}

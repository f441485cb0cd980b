package prober_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/prober"
)

// The fault table: every way a server or the network can misbehave, each
// checked for its reason, for leaking nothing, and for the next probe
// succeeding once the fault is gone. Servers are a simulated engine behind
// a hostile front that injects the fault, served over plain HTTP and real
// TLS.

// hostile is a front for a simulated engine: while a fault is set, the
// completion requests (only those: calibration stays cached) get it.
type hostile struct {
	engine http.Handler
	fault  atomic.Pointer[string]

	mu    sync.Mutex
	conns map[net.Conn]http.ConnState
}

func newHostile(engine http.Handler) *hostile {
	return &hostile{engine: engine, conns: map[net.Conn]http.ConnState{}}
}

func (h *hostile) set(f string) { h.fault.Store(&f) }

// connState tracks the server's connections, to tell a leak.
func (h *hostile) connState(c net.Conn, s http.ConnState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s == http.StateClosed || s == http.StateHijacked {
		delete(h.conns, c)
		return
	}
	h.conns[c] = s
}

// open counts the connections the server holds that are not idle.
func (h *hostile) open() (active, all int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.conns {
		if s != http.StateIdle {
			active++
		}
	}
	return active, len(h.conns)
}

func (h *hostile) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f := ""
	if p := h.fault.Load(); p != nil {
		f = *p
	}
	if f == "" || !strings.HasSuffix(r.URL.Path, "/completions") {
		h.engine.ServeHTTP(w, r)
		return
	}
	var req struct {
		MaxTokens int `json:"max_tokens"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &req)
	flusher := w.(http.Flusher)
	sse := func(chunks ...string) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range chunks {
			fmt.Fprintf(w, "data: %s\n\n", c)
			flusher.Flush()
		}
	}
	chunk := func(content string) string {
		b, _ := json.Marshal(content)
		return `{"id":"x","choices":[{"index":0,"delta":{"content":` + string(b) + `},"finish_reason":null}]}`
	}
	usage := func(n int) string {
		return fmt.Sprintf(`{"id":"x","choices":[],"usage":{"prompt_tokens":64,"completion_tokens":%d,"total_tokens":%d}}`, n, 64+n)
	}
	switch f {
	case "429":
		w.Header().Set("Retry-After", "2")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"message":"rate limited","type":"RateLimitError","code":429}}`)
	case "503date":
		w.Header().Set("Retry-After", time.Now().Add(5*time.Second).UTC().Format(http.TimeFormat))
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "overloaded")
	case "huge_error":
		w.WriteHeader(http.StatusInternalServerError)
		for range 1 << 10 {
			w.Write(bytes.Repeat([]byte("x"), 10<<10)) // 10 MiB in all
		}
	case "html":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, "<html><body>Please log in</body></html>")
	case "bad_utf8":
		// Raw bytes that are not UTF-8 inside a JSON string.
		sse(`{"id":"x","choices":[{"index":0,"delta":{"content":"ok `+"\xff\xfe\xfd"+`"},"finish_reason":null}]}`,
			usage(1), "[DONE]")
	case "too_many":
		var cs []string
		for range req.MaxTokens + 5 {
			cs = append(cs, chunk(" tok"))
		}
		sse(append(cs, usage(req.MaxTokens+5), "[DONE]")...)
	case "endless":
		// Ignores max_tokens and never stops.
		w.Header().Set("Content-Type", "text/event-stream")
		for r.Context().Err() == nil {
			fmt.Fprintf(w, "data: %s\n\n", chunk(" tok"))
			flusher.Flush()
			time.Sleep(time.Millisecond)
		}
	case "no_headers":
		<-r.Context().Done() // never answers
	case "reset":
		w.Header().Set("Content-Type", "text/event-stream")
		sse(chunk("a"))
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				tc.SetLinger(0) // RST, not FIN
			}
			conn.Close()
		}
	case "huge_line":
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"pad\":\""+strings.Repeat("y", 2<<20)+"\"}\n\n")
	case "stall":
		sse(chunk("a"))
		<-r.Context().Done()
	default:
		panic("unknown fault " + f)
	}
}

// faultRig is one simulated engine, its hostile front over HTTP and TLS,
// and clients that trust the TLS server or not.
type faultRig struct {
	h       *hostile
	plain   *httptest.Server
	tls     *httptest.Server
	mtls    *httptest.Server // demands a client certificate
	model   string
	trusted *http.Transport
	blind   *http.Transport // does not trust the test CA
	plainTr *http.Transport
}

func newFaultRig(t *testing.T) *faultRig {
	t.Helper()
	cfg := vllmsim.DefaultConfig()
	cfg.EOSMeanTokens = 0
	cfg.TimeScale = 0.01
	e, err := vllmsim.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &faultRig{h: newHostile(e.Handler()), model: cfg.ModelName}
	r.plain = httptest.NewUnstartedServer(r.h)
	r.plain.Config.ConnState = r.h.connState
	r.plain.Start()
	r.tls = httptest.NewUnstartedServer(r.h)
	r.tls.Config.ConnState = r.h.connState
	r.tls.StartTLS()
	r.mtls = httptest.NewUnstartedServer(r.h)
	r.mtls.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: x509.NewCertPool()}
	r.mtls.StartTLS()

	pool := x509.NewCertPool()
	pool.AddCert(r.tls.Certificate())
	pool.AddCert(r.mtls.Certificate())
	r.trusted = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	r.blind = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: x509.NewCertPool()}}
	r.plainTr = &http.Transport{}
	t.Cleanup(func() {
		for _, tr := range []*http.Transport{r.trusted, r.blind, r.plainTr} {
			tr.CloseIdleConnections()
		}
		r.plain.Close()
		r.tls.Close()
		r.mtls.Close()
		e.Close()
	})
	return r
}

func (r *faultRig) target(url string, tr *http.Transport) prober.Target {
	return prober.Target{Name: "t", API: prober.APIChat, BaseURL: url, Model: r.model, Client: &http.Client{Transport: tr},
		StallTimeout: 300 * time.Millisecond}
}

var faultScenario = prober.Scenario{Name: "fault", InputTokens: 64, OutputTokens: 8, Interval: time.Minute, Timeout: 3 * time.Second}

// faultCase is one row of the table. good and bad return the target to
// probe with and without the fault; arm and disarm switch the fault.
type faultCase struct {
	name       string
	bad        func(r *faultRig) prober.Target
	good       func(r *faultRig) prober.Target // default: the plain server
	fault      string                          // the hostile server's fault, if any
	want       prober.Reason
	retryAfter bool // the result must carry a Retry-After
	check      func(t *testing.T, res prober.Result)
}

func faultCases(t *testing.T) []faultCase {
	refusedURL := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return "http://" + addr
	}()
	return []faultCase{
		{name: "connection refused", want: prober.ReasonConnectionRefused,
			bad: func(r *faultRig) prober.Target { return r.target(refusedURL, r.plainTr) }},
		{name: "DNS failure", want: prober.ReasonDNS,
			bad: func(r *faultRig) prober.Target {
				return r.target("http://slaprobe-engine.invalid:8000", r.plainTr) // .invalid never resolves (RFC 6761)
			}},
		{name: "TLS certificate from an unknown CA", want: prober.ReasonTLS,
			bad:  func(r *faultRig) prober.Target { return r.target(r.tls.URL, r.blind) },
			good: func(r *faultRig) prober.Target { return r.target(r.tls.URL, r.trusted) }},
		{name: "TLS certificate for another host", want: prober.ReasonTLS,
			bad: func(r *faultRig) prober.Target {
				return r.target(strings.Replace(r.tls.URL, "127.0.0.1", "localhost", 1), r.trusted)
			},
			good: func(r *faultRig) prober.Target { return r.target(r.tls.URL, r.trusted) }},
		{name: "TLS handshake with a plain HTTP server", want: prober.ReasonTLS,
			bad: func(r *faultRig) prober.Target {
				return r.target(strings.Replace(r.plain.URL, "http://", "https://", 1), r.trusted)
			}},
		{name: "TLS handshake refused: client certificate required", want: prober.ReasonTLS,
			bad: func(r *faultRig) prober.Target { return r.target(r.mtls.URL, r.trusted) }},
		{name: "429 with Retry-After seconds", fault: "429", want: prober.ReasonHTTP4xx, retryAfter: true,
			check: func(t *testing.T, res prober.Result) {
				if res.RetryAfter != 2*time.Second {
					t.Errorf("RetryAfter = %v, want 2s", res.RetryAfter)
				}
			}},
		{name: "503 with Retry-After date", fault: "503date", want: prober.ReasonHTTP5xx, retryAfter: true},
		{name: "10 MiB error body", fault: "huge_error", want: prober.ReasonHTTP5xx,
			check: func(t *testing.T, res prober.Result) {
				if n := len(res.Err.Error()); n > 4096 {
					t.Errorf("error message is %d bytes; the body must be cut", n)
				}
			}},
		{name: "wrong content type on a 200", fault: "html", want: prober.ReasonMalformedChunk},
		{name: "invalid UTF-8 in the stream", fault: "bad_utf8", want: prober.ReasonMalformedChunk},
		{name: "more tokens than asked", fault: "too_many", want: prober.ReasonTooManyTokens},
		{name: "max_tokens ignored, endless stream", fault: "endless", want: prober.ReasonTooManyTokens},
		{name: "headers never come", fault: "no_headers", want: prober.ReasonTimeout},
		{name: "connection reset mid-stream", fault: "reset", want: prober.ReasonStreamCut},
		{name: "2 MiB SSE line", fault: "huge_line", want: prober.ReasonOversizedLine},
		{name: "stall after the first token", fault: "stall", want: prober.ReasonStall},
	}
}

// settle waits (up to 10 s) for goroutines to drop to base, so that a
// goroutine still exiting is not taken for a leak.
func settleGoroutines(base int) int {
	n := runtime.NumGoroutine()
	for end := time.Now().Add(10 * time.Second); n > base && time.Now().Before(end); n = runtime.NumGoroutine() {
		time.Sleep(20 * time.Millisecond)
	}
	return n
}

func TestFaultTable(t *testing.T) {
	for _, tc := range faultCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			r := newFaultRig(t)
			p := prober.New(nil, nil)
			ctx := context.Background()
			good := r.target(r.plain.URL, r.plainTr)
			if tc.good != nil {
				good = tc.good(r)
			}
			// Warm up: calibrate and probe once while all is well, so that
			// the goroutine baseline includes the pooled connections.
			if res := p.Probe(ctx, good, "", faultScenario); res.Kind != prober.KindSuccess {
				t.Fatalf("probe before the fault: %s/%s: %v", res.Kind, res.Reason, res.Err)
			}
			base := runtime.NumGoroutine()

			bad := good
			if tc.bad != nil {
				bad = tc.bad(r)
			}
			r.h.set(tc.fault)
			res := p.Probe(ctx, bad, "", faultScenario)
			if res.Kind != prober.KindError || res.Reason != tc.want {
				t.Fatalf("under the fault: %s/%q (%v), want error/%q", res.Kind, res.Reason, res.Err, tc.want)
			}
			if res.Err == nil {
				t.Error("a failed probe carries no error detail")
			}
			if got := res.RetryAfter > 0; got != tc.retryAfter {
				t.Errorf("RetryAfter = %v, want set: %v", res.RetryAfter, tc.retryAfter)
			}
			if tc.check != nil {
				tc.check(t, res)
			}
			t.Logf("%s: %v", res.Reason, res.Err)

			// Fault gone: the next probe succeeds.
			r.h.set("")
			if res := p.Probe(ctx, good, "", faultScenario); res.Kind != prober.KindSuccess {
				t.Fatalf("probe after the fault: %s/%s: %v", res.Kind, res.Reason, res.Err)
			}

			// Nothing leaked: the server holds no busy connection, and once
			// idle connections are closed no goroutine is left over.
			for _, tr := range []*http.Transport{r.trusted, r.blind, r.plainTr} {
				tr.CloseIdleConnections()
			}
			deadline := time.Now().Add(10 * time.Second)
			active, all := r.h.open()
			for (active > 0 || all > 0) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
				active, all = r.h.open()
			}
			if active > 0 || all > 0 {
				t.Errorf("server still holds %d connection(s), %d active, after the client closed its idle ones", all, active)
			}
			if n := settleGoroutines(base); n > base {
				buf := make([]byte, 1<<20)
				t.Errorf("goroutines: %d before the fault, %d after\n%s", base, n, buf[:runtime.Stack(buf, true)])
			}
		})
	}
}

// TestModelsBodyIsBounded: a /v1/models that never ends is read up to its
// limit, not to the end: the client gives up and the server sees it go.
func TestModelsBodyIsBounded(t *testing.T) {
	var written atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"data":[{"id":"`)
		chunk := bytes.Repeat([]byte("m"), 64<<10)
		for r.Context().Err() == nil {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	_, err := prober.ListModels(context.Background(), prober.Target{Name: "t", BaseURL: srv.URL, Client: &http.Client{Transport: tr}})
	if err == nil {
		t.Fatal("an endless /v1/models body was accepted")
	}
	srv.CloseClientConnections()
	// What the server managed to write before the client stopped reading is
	// the limit plus what the socket buffers hold.
	if n := written.Load(); n > 64<<20 {
		t.Errorf("the server wrote %d MiB before the client gave up", n>>20)
	}
	t.Logf("gave up after the server wrote %d MiB: %v", written.Load()>>20, err)
}

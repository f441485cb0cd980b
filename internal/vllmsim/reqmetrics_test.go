package vllmsim

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// msOf is d in milliseconds, as the metrics object writes it.
func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// checkPerRequestMetrics checks a `metrics` object against the request's
// Trace: every field present (null or a number), each one what the Trace
// says, in milliseconds.
func checkPerRequestMetrics(t *testing.T, raw json.RawMessage, tr Trace, completion int) {
	t.Helper()
	var fields map[string]*float64
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatalf("metrics %s: %v", raw, err)
	}
	for _, k := range []string{"queue_time_ms", "time_to_first_token_ms", "generation_time_ms", "mean_itl_ms", "tokens_per_second"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("metrics %s has no %q (a field is null, never left out)", raw, k)
		}
	}
	if tr.Submitted.IsZero() || tr.Admitted.IsZero() || tr.EngineFirstToken.IsZero() || tr.EngineLastToken.IsZero() {
		t.Fatalf("trace lacks engine times: %+v", tr)
	}
	if tr.CompletionTokens != completion {
		t.Errorf("trace has %d completion tokens, the response %d", tr.CompletionTokens, completion)
	}
	const tol = 1e-6 // ms
	want := map[string]float64{
		"queue_time_ms":          msOf(tr.Admitted.Sub(tr.Submitted)),
		"time_to_first_token_ms": msOf(tr.EngineFirstToken.Sub(tr.Admitted)),
		"generation_time_ms":     msOf(tr.EngineLastToken.Sub(tr.EngineFirstToken)),
	}
	for k, w := range want {
		if g := fields[k]; g == nil || !near(*g, w, tol) {
			t.Errorf("%s = %s, want %.9f (from the trace)", k, fmtOpt(g), w)
		}
	}
	gen := want["generation_time_ms"]
	if itl := fields["mean_itl_ms"]; completion < 2 {
		if itl != nil {
			t.Errorf("mean_itl_ms = %v for %d token, want null", *itl, completion)
		}
	} else if w := gen / float64(completion-1); itl == nil || !near(*itl, w, tol) {
		t.Errorf("mean_itl_ms = %s, want generation / (%d - 1) = %.9f", fmtOpt(itl), completion, w)
	}
	// vLLM: generated tokens over last token − scheduled, so prefill is in it.
	sched := want["time_to_first_token_ms"] + gen
	if w := float64(completion) / (sched / 1000); fields["tokens_per_second"] == nil || !near(*fields["tokens_per_second"], w, w*1e-9) {
		t.Errorf("tokens_per_second = %s, want %d / %.6f s = %.6f", fmtOpt(fields["tokens_per_second"]), completion, sched/1000, w)
	}
}

func fmtOpt(f *float64) string {
	if f == nil {
		return "null"
	}
	return fmt.Sprint(*f)
}

// TestPerRequestMetrics: with EnablePerRequestMetrics the final usage chunk
// of a stream (only with include_usage) and a non-streaming body carry
// vLLM's `metrics` object, its values the request's Trace; without it no
// response has one.
func TestPerRequestMetrics(t *testing.T) {
	on := fastConfig()
	on.EnablePerRequestMetrics = true
	servers := map[bool]*testServer{true: start(t, on), false: start(t, fastConfig())}

	noStream := map[string]any{"stream": false, "stream_options": nil}
	completions := func(n int, stream, usage bool) map[string]any {
		b := map[string]any{"model": DefaultConfig().ModelName, "prompt": "hello there", "max_tokens": n,
			"min_tokens": n, "ignore_eos": true, "stream": stream}
		if usage {
			b["stream_options"] = map[string]any{"include_usage": true}
		}
		return b
	}
	const chat, cmpl = "/v1/chat/completions", "/v1/completions"
	tests := []struct {
		name    string
		enabled bool
		path    string
		body    map[string]any
		tokens  int
		metrics bool // the response carries the object
	}{
		{"stream with include_usage", true, chat, chatBody("hello there", 8, nil), 8, true},
		{"stream with continuous usage: only the final chunk", true, chat,
			chatBody("hello there", 8, map[string]any{"stream_options": map[string]any{"include_usage": true, "continuous_usage_stats": true}}), 8, true},
		{"stream of one token", true, chat, chatBody("hello there", 1, nil), 1, true},
		{"completions stream", true, cmpl, completions(5, true, true), 5, true},
		{"stream without include_usage", true, chat, chatBody("hello there", 8, map[string]any{"stream_options": nil}), 8, false},
		{"completions stream without include_usage", true, cmpl, completions(5, true, false), 5, false},
		{"non-streaming", true, chat, chatBody("hello there", 6, noStream), 6, true},
		{"non-streaming one token", true, chat, chatBody("hello there", 1, noStream), 1, true},
		{"non-streaming completions one token", true, cmpl, completions(1, false, false), 1, true},
		{"disabled: stream", false, chat, chatBody("hello there", 8, nil), 8, false},
		{"disabled: non-streaming", false, chat, chatBody("hello there", 6, noStream), 6, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := servers[tc.enabled]
			res := ts.post(t, tc.path, tc.body, nil)
			if res.status != http.StatusOK {
				t.Fatalf("status %d: %s", res.status, res.body)
			}
			stream, _ := tc.body["stream"].(bool)
			var (
				id      string
				metrics []json.RawMessage // every metrics member found
				final   json.RawMessage   // on the final usage chunk / beside usage
				n       int
			)
			if stream {
				if !res.done {
					t.Fatalf("stream did not end with [DONE]: %v", res.readErr)
				}
				id = res.id()
				for i, ev := range res.events {
					if ev.chunk == nil {
						continue
					}
					var top map[string]json.RawMessage
					if err := json.Unmarshal([]byte(ev.data), &top); err != nil {
						t.Fatalf("chunk %d: %v", i, err)
					}
					m, ok := top["metrics"]
					if !ok {
						continue
					}
					metrics = append(metrics, m)
					if len(ev.chunk.Choices) != 0 || ev.chunk.Usage == nil {
						t.Errorf("chunk %d carries metrics but is not the final usage chunk: %s", i, ev.data)
					} else {
						final, n = m, ev.chunk.Usage.CompletionTokens
					}
				}
			} else {
				var top map[string]json.RawMessage
				if err := json.Unmarshal([]byte(res.body), &top); err != nil {
					t.Fatalf("body %s: %v", res.body, err)
				}
				var u usage
				_ = json.Unmarshal(top["usage"], &u)
				_ = json.Unmarshal(top["id"], &id)
				n = u.CompletionTokens
				if m, ok := top["metrics"]; ok {
					metrics = append(metrics, m)
					final = m
				}
			}
			if !tc.metrics {
				if len(metrics) != 0 {
					t.Fatalf("response carries metrics %s, want none", metrics[0])
				}
				return
			}
			if len(metrics) != 1 || final == nil {
				t.Fatalf("response carries %d metrics objects, want exactly one on the final usage", len(metrics))
			}
			if n != tc.tokens {
				t.Fatalf("usage says %d completion tokens, want %d", n, tc.tokens)
			}
			tr, ok := ts.e.Trace(id)
			if !ok {
				t.Fatalf("no trace for %q", id)
			}
			checkPerRequestMetrics(t, final, tr, n)
		})
	}
}

// TestPerRequestMetricsOf checks the object's arithmetic on a hand-made
// trace, including the parts a request never reached.
func TestPerRequestMetricsOf(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		name       string
		tr         Trace
		completion int
		want       PerRequestMetrics
	}{
		{"complete", Trace{Submitted: at(0), Admitted: at(1.5), EngineFirstToken: at(11.5), EngineLastToken: at(41.5)}, 4,
			PerRequestMetrics{QueueTimeMs: f(1.5), TimeToFirstTokenMs: f(10), GenerationTimeMs: f(30), MeanITLMs: f(10), TokensPerSecond: f(4 / 0.04)}},
		{"one token", Trace{Submitted: at(0), Admitted: at(0), EngineFirstToken: at(5), EngineLastToken: at(5)}, 1,
			PerRequestMetrics{QueueTimeMs: f(0), TimeToFirstTokenMs: f(5), GenerationTimeMs: f(0), TokensPerSecond: f(1 / 0.005)}},
		{"never admitted", Trace{Submitted: at(0)}, 0, PerRequestMetrics{}},
		{"aborted before its last token", Trace{Submitted: at(0), Admitted: at(2), EngineFirstToken: at(7)}, 3,
			PerRequestMetrics{QueueTimeMs: f(2), TimeToFirstTokenMs: f(5)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := perRequestMetrics(tc.tr, tc.completion)
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(tc.want)
			var g, w map[string]*float64
			_ = json.Unmarshal(gb, &g)
			_ = json.Unmarshal(wb, &w)
			for k := range w {
				switch {
				case (g[k] == nil) != (w[k] == nil):
					t.Errorf("%s = %s, want %s", k, fmtOpt(g[k]), fmtOpt(w[k]))
				case g[k] != nil && !near(*g[k], *w[k], 1e-9*math.Max(1, math.Abs(*w[k]))):
					t.Errorf("%s = %v, want %v", k, *g[k], *w[k])
				}
			}
		})
	}
}

// spanSink is a tiny OTLP trace receiver that keeps every span it gets.
type spanSink struct {
	coltracepb.UnimplementedTraceServiceServer
	mu        sync.Mutex
	spans     []*tracepb.Span
	resources []map[string]string // service attributes of each span's resource
}

func (s *spanSink) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.add(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (s *spanSink) add(req *coltracepb.ExportTraceServiceRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		res := map[string]string{}
		for _, kv := range rs.GetResource().GetAttributes() {
			res[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s.spans = append(s.spans, sp)
				s.resources = append(s.resources, res)
			}
		}
	}
}

func (s *spanSink) got() ([]*tracepb.Span, []map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*tracepb.Span(nil), s.spans...), append([]map[string]string(nil), s.resources...)
}

// ServeHTTP takes OTLP/HTTP protobuf exports.
func (s *spanSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	b, err := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &req)
	}
	if err != nil || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, fmt.Sprintf("%s %s %q: %v", r.Method, r.URL.Path, r.Header.Get("Content-Type"), err), http.StatusBadRequest)
		return
	}
	s.add(&req)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// startSink starts a sink for protocol and returns the endpoint the
// simulator is given. It stops after the test's later cleanups (the engine's).
func startSink(t *testing.T, protocol string) (*spanSink, string) {
	t.Helper()
	sink := &spanSink{}
	if protocol == "http/protobuf" {
		srv := httptest.NewServer(sink)
		t.Cleanup(srv.Close)
		return sink, srv.URL + "/v1/traces"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, sink)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return sink, "http://" + ln.Addr().String()
}

func spanAttrs(sp *tracepb.Span) map[string]*commonpb.AnyValue {
	m := map[string]*commonpb.AnyValue{}
	for _, kv := range sp.GetAttributes() {
		m[kv.GetKey()] = kv.GetValue()
	}
	return m
}

// checkRequestSpan checks an llm_request span against the request's Trace.
func checkRequestSpan(t *testing.T, sp *tracepb.Span, res map[string]string, tr Trace, model string) {
	t.Helper()
	if sp.GetName() != SpanLLMRequest || sp.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("span %q kind %v, want %q kind SERVER", sp.GetName(), sp.GetKind(), SpanLLMRequest)
	}
	if res["service.name"] != "vllm" {
		t.Errorf("resource service.name = %q, want vllm", res["service.name"])
	}
	if got, want := sp.GetStartTimeUnixNano(), uint64(tr.Arrived.UnixNano()); got != want {
		t.Errorf("span starts at %d, want the request's arrival %d", got, want)
	}
	if got, want := sp.GetEndTimeUnixNano(), uint64(tr.Done.UnixNano()); tr.Done.IsZero() || got != want {
		t.Errorf("span ends at %d, want the request's end %d", got, want)
	}
	a := spanAttrs(sp)
	sec := func(from, to time.Time) float64 { return to.Sub(from).Seconds() }
	for k, want := range map[string]float64{
		AttrLatencyTimeInQueue: sec(tr.Submitted, tr.Admitted),
		AttrLatencyPrefill:     sec(tr.Admitted, tr.EngineFirstToken),
		AttrLatencyDecode:      sec(tr.EngineFirstToken, tr.EngineLastToken),
		AttrLatencyInference:   sec(tr.Admitted, tr.EngineLastToken),
		AttrLatencyTTFT:        sec(tr.Arrived, tr.EngineFirstToken),
		AttrLatencyE2E:         sec(tr.Arrived, tr.Done),
	} {
		v, ok := a[k]
		if !ok {
			t.Errorf("span has no %s", k)
			continue
		}
		if _, isDouble := v.GetValue().(*commonpb.AnyValue_DoubleValue); !isDouble || !near(v.GetDoubleValue(), want, 1e-9) {
			t.Errorf("%s = %v, want %.9f s (from the trace)", k, v, want)
		}
	}
	for k, want := range map[string]int64{
		AttrUsagePromptTokens:   int64(tr.PromptTokens),
		AttrUsageCompletionToks: int64(tr.CompletionTokens),
		AttrRequestN:            1,
		AttrRequestMaxTokens:    int64(tr.MaxTokens),
	} {
		if v, ok := a[k]; !ok || v.GetIntValue() != want {
			t.Errorf("%s = %v, want %d", k, v, want)
		}
	}
	if tr.PromptTokens == 0 || tr.CompletionTokens == 0 {
		t.Errorf("trace tokens: %d prompt, %d completion; want both counted", tr.PromptTokens, tr.CompletionTokens)
	}
	if v := a[AttrRequestID].GetStringValue(); v != tr.ID {
		t.Errorf("%s = %q, want the response id %q", AttrRequestID, v, tr.ID)
	}
	if v := a[AttrResponseModel].GetStringValue(); v != model {
		t.Errorf("%s = %q, want %q", AttrResponseModel, v, model)
	}
}

// TestRequestSpans: with OTLPTracesEndpoint every request sends one
// llm_request SERVER span, in the trace of its traceparent, its latencies
// the request's Trace; Close sends the spans still waiting.
func TestRequestSpans(t *testing.T) {
	const (
		traceID      = "4bf92f3577b34da6a3ce929d0e0e4736"
		parentSpanID = "00f067aa0ba902b7"
		traceparent  = "00-" + traceID + "-" + parentSpanID + "-01"
	)
	for _, protocol := range []string{"grpc", "http/protobuf"} {
		t.Run(protocol, func(t *testing.T) {
			sink, endpoint := startSink(t, protocol)
			cfg := fastConfig()
			cfg.OTLPTracesEndpoint = endpoint
			cfg.OTLPTracesProtocol = protocol
			ts := start(t, cfg)

			res := ts.post(t, "/v1/chat/completions", chatBody("hello there", 8, nil),
				map[string]string{"traceparent": traceparent, "X-Request-Id": "slaprobe-" + traceID})
			if res.status != http.StatusOK || !res.done {
				t.Fatalf("status %d, done %v: %s", res.status, res.done, res.body)
			}
			var spans []*tracepb.Span
			var resources []map[string]string
			deadline := time.Now().Add(10 * time.Second)
			for {
				if spans, resources = sink.got(); len(spans) > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("no span reached the receiver within 10 s")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if len(spans) != 1 {
				t.Fatalf("%d spans for one request, want 1: %v", len(spans), spans)
			}
			sp := spans[0]
			tr, ok := ts.e.Trace(res.id())
			if !ok {
				t.Fatalf("no trace for %q", res.id())
			}
			if tr.TraceParent != traceparent || tr.RequestID != "slaprobe-"+traceID {
				t.Errorf("trace kept traceparent %q, request id %q; want what was sent", tr.TraceParent, tr.RequestID)
			}
			if got := fmt.Sprintf("%x", sp.GetTraceId()); got != traceID {
				t.Errorf("span trace id %s, want the traceparent's %s", got, traceID)
			}
			if got := fmt.Sprintf("%x", sp.GetParentSpanId()); got != parentSpanID {
				t.Errorf("span parent %s, want the traceparent's span %s", got, parentSpanID)
			}
			if got := fmt.Sprintf("%x", sp.GetSpanId()); len(sp.GetSpanId()) != 8 || got == parentSpanID || got == strings.Repeat("0", 16) {
				t.Errorf("span id %s, want a new span id", got)
			}
			checkRequestSpan(t, sp, resources[0], tr, cfg.ModelName)

			// A request without traceparent: a root span of a trace of its own.
			// It is still in the batch (1 s) when the engine closes: Close must
			// send it. The HTTP server's Close waits for the handler, which
			// starts the span when the request ends.
			res = ts.post(t, "/v1/chat/completions", chatBody("hello again", 1, map[string]any{"stream": false, "stream_options": nil}), nil)
			if res.status != http.StatusOK {
				t.Fatalf("status %d: %s", res.status, res.body)
			}
			var body struct{ ID string }
			if err := json.Unmarshal([]byte(res.body), &body); err != nil {
				t.Fatal(err)
			}
			ts.srv.Close()
			ts.e.Close()
			spans, resources = sink.got()
			if len(spans) != 2 {
				t.Fatalf("%d spans after Close, want 2: Close must flush the spans waiting in the batch", len(spans))
			}
			sp = spans[1]
			if len(sp.GetParentSpanId()) != 0 {
				t.Errorf("span of a request without traceparent has parent %x, want a root span", sp.GetParentSpanId())
			}
			if fmt.Sprintf("%x", sp.GetTraceId()) == traceID || len(sp.GetTraceId()) != 16 {
				t.Errorf("span trace id %x, want a new one", sp.GetTraceId())
			}
			tr, ok = ts.e.Trace(body.ID)
			if !ok {
				t.Fatalf("no trace for %q", body.ID)
			}
			checkRequestSpan(t, sp, resources[1], tr, cfg.ModelName)
		})
	}
}

// TestRequestSpansOff: without OTLPTracesEndpoint the engine has no tracer.
func TestRequestSpansOff(t *testing.T) {
	ts := start(t, fastConfig())
	if ts.e.tracer != nil {
		t.Fatal("engine has a tracer without OTLPTracesEndpoint")
	}
	res := ts.post(t, "/v1/chat/completions", chatBody("hello", 2, nil), map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	if res.status != http.StatusOK || !res.done {
		t.Fatalf("status %d: %s", res.status, res.body)
	}
}

// TestRequestSpansUnsampledParent: as vLLM (its TracerProvider samples by
// the parent, the OpenTelemetry default), a request whose traceparent is
// not sampled sends no span: slaprobe's unsampled sweep requests put no
// load on the trace pipeline.
func TestRequestSpansUnsampledParent(t *testing.T) {
	sink, endpoint := startSink(t, "http/protobuf")
	cfg := fastConfig()
	cfg.OTLPTracesEndpoint = endpoint
	cfg.OTLPTracesProtocol = "http/protobuf"
	ts := start(t, cfg)
	for _, flags := range []string{"00", "01"} {
		res := ts.post(t, "/v1/chat/completions", chatBody("hello there", 2, nil),
			map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e47" + flags + "-00f067aa0ba902b7-" + flags})
		if res.status != http.StatusOK || !res.done {
			t.Fatalf("status %d, done %v: %s", res.status, res.done, res.body)
		}
	}
	ts.srv.Close()
	ts.e.Close()
	spans, _ := sink.got()
	if len(spans) != 1 || fmt.Sprintf("%x", spans[0].GetTraceId()) != "4bf92f3577b34da6a3ce929d0e0e4701" {
		t.Fatalf("%d spans, want only the sampled request's: %v", len(spans), spans)
	}
}

// TestSpecDecodeMetricsUpstreamFields: with multi-token steps, the metrics
// object's speculative_decoding has exactly the fields of vLLM's summary
// level, as the fixture written to vLLM's documented format has them
// (prober/testdata/responses, whose README names the source), and values
// that agree with the request's trace and with vLLM's definitions.
func TestSpecDecodeMetricsUpstreamFields(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "prober", "testdata", "responses", "vllm_chat_spec_summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fixture struct {
		Metrics struct {
			SpeculativeDecoding map[string]json.RawMessage `json:"speculative_decoding"`
		} `json:"metrics"`
	}
	if err := json.Unmarshal(b, &fixture); err != nil || len(fixture.Metrics.SpeculativeDecoding) == 0 {
		t.Fatalf("fixture: %v (%d fields)", err, len(fixture.Metrics.SpeculativeDecoding))
	}

	cfg := fastConfig()
	cfg.EnablePerRequestMetrics = true
	cfg.TokensPerStep = 4
	ts := start(t, cfg)
	res := ts.post(t, "/v1/chat/completions", chatBody("hello there", 30, map[string]any{"stream": false, "stream_options": nil}), nil)
	if res.status != http.StatusOK {
		t.Fatalf("status %d: %s", res.status, res.body)
	}
	var top struct {
		ID      string `json:"id"`
		Metrics struct {
			SpeculativeDecoding map[string]json.RawMessage `json:"speculative_decoding"`
		} `json:"metrics"`
	}
	if err := json.Unmarshal([]byte(res.body), &top); err != nil {
		t.Fatal(err)
	}
	got := top.Metrics.SpeculativeDecoding
	for k := range fixture.Metrics.SpeculativeDecoding {
		if _, ok := got[k]; !ok {
			t.Errorf("speculative_decoding lacks vLLM's %q: %s", k, res.body)
		}
	}
	for k := range got {
		if _, ok := fixture.Metrics.SpeculativeDecoding[k]; !ok {
			t.Errorf("speculative_decoding has %q, which vLLM's summary level does not", k)
		}
	}
	var sd SpecDecodeMetrics
	raw, _ := json.Marshal(got)
	if err := json.Unmarshal(raw, &sd); err != nil {
		t.Fatal(err)
	}
	tr, ok := ts.e.Trace(top.ID)
	if !ok {
		t.Fatalf("no trace for %q", top.ID)
	}
	// 30 tokens at 4 a step: the first from prefill, then 8 steps drafting 3 each;
	// 7 accept all 3, the last needs 1 token and accepts none.
	want := SpecDecodeMetrics{MeanAcceptanceLength: 1 + 21.0/8, DraftAcceptanceRate: 21.0 / 24,
		AcceptanceHistogram: []int{1, 0, 0, 7}, NumSpecSteps: 8, NumAcceptedDraftTokens: 21, NumDraftTokens: 24, NumSpecTokens: 3}
	if fmt.Sprint(sd) != fmt.Sprint(want) {
		t.Errorf("speculative_decoding = %+v, want %+v", sd, want)
	}
	if sd.NumDraftTokens != tr.SpecDraftTokens || sd.NumAcceptedDraftTokens != tr.SpecAcceptedTokens || sd.NumSpecSteps != tr.SpecSteps {
		t.Errorf("speculative_decoding %+v disagrees with the trace's %d drafted, %d accepted, %d steps",
			sd, tr.SpecDraftTokens, tr.SpecAcceptedTokens, tr.SpecSteps)
	}
	sum, acc := 0, 0
	for j, c := range sd.AcceptanceHistogram {
		sum += c
		acc += j * c
	}
	if sum != sd.NumSpecSteps || acc != sd.NumAcceptedDraftTokens {
		t.Errorf("histogram %v: %d steps, %d accepted; want %d and %d", sd.AcceptanceHistogram, sum, acc, sd.NumSpecSteps, sd.NumAcceptedDraftTokens)
	}
}

// TestSpecDecodeMetricsOff: a request that drafted nothing carries no
// speculative_decoding member (vLLM leaves it out).
func TestSpecDecodeMetricsOff(t *testing.T) {
	m := perRequestMetrics(Trace{}, 5)
	b, _ := json.Marshal(m)
	if strings.Contains(string(b), "speculative_decoding") {
		t.Errorf("metrics %s carries speculative_decoding without drafts", b)
	}
}

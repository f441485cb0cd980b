package prober

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// etUsageLine is the end-of-stream usage chunk with extra top-level members
// (`,"metrics":{…}`) after usage.
func etUsageLine(prompt, completion int, extra string) string {
	return `data: {"id":"chatcmpl-42","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[],"usage":` +
		sseUsageJSON(prompt, completion) + extra + "}\n\n"
}

// etChatLine is sseChatLine with extra top-level members after usage, as
// llama.cpp server puts `timings` on its last chunk.
func etChatLine(delta, finish, usage, extra string) string {
	l := sseChatLine(delta, finish, usage)
	return strings.TrimSuffix(l, "}\n\n") + extra + "}\n\n"
}

// etVLLMStream is a 4-token continuous-usage chat stream whose final usage
// chunk carries extra (vLLM puts its per-request metrics there).
func etVLLMStream(extra string) []netStep {
	steps := sseTokenStream(100, 4, 1, 20*msec, 5*msec)
	steps[len(steps)-2] = netStep{0, etUsageLine(100, 4, extra)}
	return steps
}

// etLlamaStream is a 4-token stream whose last content chunk carries extra
// (llama.cpp's timings), with the usage chunk and [DONE] after it.
func etLlamaStream(extra string) []netStep {
	return []netStep{
		{0, sseChatLine(sseRoleDelta, "", "")},
		{20 * msec, sseChatLine(sseContent("a"), "", "")},
		{5 * msec, sseChatLine(sseContent(" b"), "", "")},
		{5 * msec, sseChatLine(sseContent(" c"), "", "")},
		{5 * msec, etChatLine(sseContent(" d"), "length", "", extra)},
		{0, sseUsageLine(100, 4)},
		{0, sseDoneLine},
	}
}

// TestDecoderEngineTiming feeds the engine's own timing (vLLM's per-request
// metrics, llama.cpp's timings) through the stream decoder: parsed exactly
// when well formed, a part absent (not zero) when null or malformed, and
// never a reason to fail the probe.
func TestDecoderEngineTiming(t *testing.T) {
	const us = time.Microsecond
	tests := []struct {
		name  string
		steps []netStep
		want  EngineTiming
	}{
		{
			name: "vLLM metrics on the final usage chunk",
			steps: etVLLMStream(`,"metrics":{"queue_time_ms":1.5,"time_to_first_token_ms":12.25,` +
				`"generation_time_ms":30.003,"mean_itl_ms":10.001,"tokens_per_second":133.3}`),
			want: EngineTiming{Source: TimingResponse,
				Queue: 1500 * us, HasQueue: true,
				Prefill: 12250 * us, HasPrefill: true,
				Decode: 30003 * us, HasDecode: true,
				ITL: 10001 * us, HasITL: true},
		},
		{
			name:  "vLLM metrics in integer milliseconds",
			steps: etVLLMStream(`,"metrics":{"queue_time_ms":0,"time_to_first_token_ms":7,"generation_time_ms":15,"mean_itl_ms":5}`),
			want: EngineTiming{Source: TimingResponse, Queue: 0, HasQueue: true, Prefill: 7 * msec, HasPrefill: true,
				Decode: 15 * msec, HasDecode: true, ITL: 5 * msec, HasITL: true},
		},
		{
			name:  "sub-nanosecond parts round to the nearest nanosecond",
			steps: etVLLMStream(`,"metrics":{"queue_time_ms":0.0000004,"time_to_first_token_ms":1.0000006}`),
			want:  EngineTiming{Source: TimingResponse, Queue: 0, HasQueue: true, Prefill: msec + 1, HasPrefill: true},
		},
		{
			name:  "metrics null (n > 1) reports nothing",
			steps: etVLLMStream(`,"metrics":null`),
			want:  EngineTiming{Source: TimingNone},
		},
		{
			name: "null fields are absent, not zero",
			steps: etVLLMStream(`,"metrics":{"queue_time_ms":null,"time_to_first_token_ms":12.5,` +
				`"generation_time_ms":30,"mean_itl_ms":null,"tokens_per_second":null}`),
			want: EngineTiming{Source: TimingResponse, Prefill: 12500 * us, HasPrefill: true, Decode: 30 * msec, HasDecode: true},
		},
		{
			name:  "missing fields are absent",
			steps: etVLLMStream(`,"metrics":{"queue_time_ms":2}`),
			want:  EngineTiming{Source: TimingResponse, Queue: 2 * msec, HasQueue: true},
		},
		{
			name:  "every field null reports nothing",
			steps: etVLLMStream(`,"metrics":{"queue_time_ms":null,"time_to_first_token_ms":null,"generation_time_ms":null,"mean_itl_ms":null}`),
			want:  EngineTiming{Source: TimingNone},
		},
		{
			name:  "metrics a string is ignored",
			steps: etVLLMStream(`,"metrics":"fast"`),
			want:  EngineTiming{Source: TimingNone},
		},
		{
			name:  "metrics an array is ignored",
			steps: etVLLMStream(`,"metrics":[1.5,12.25]`),
			want:  EngineTiming{Source: TimingNone},
		},
		{
			// Numbers that are no duration mark the timing Invalid: the probe
			// drops all of it (CheckEngine, TestCheckEngine).
			name:  "negative numbers make it invalid",
			steps: etVLLMStream(`,"metrics":{"queue_time_ms":-1,"time_to_first_token_ms":-0.5,"generation_time_ms":-30,"mean_itl_ms":-10}`),
			want:  EngineTiming{Source: TimingResponse, Invalid: true},
		},
		{
			name:  "1e10 s, which would wrap a Duration, is invalid",
			steps: etVLLMStream(`,"metrics":{"queue_time_ms":1e13,"time_to_first_token_ms":2}`),
			want:  EngineTiming{Source: TimingResponse, Prefill: 2 * msec, HasPrefill: true, Invalid: true},
		},
		{
			name: "malformed fields are dropped, good ones kept; a negative one makes it invalid",
			steps: etVLLMStream(`,"metrics":{"queue_time_ms":-1,"time_to_first_token_ms":"12",` +
				`"generation_time_ms":true,"mean_itl_ms":4.5}`),
			want: EngineTiming{Source: TimingResponse, ITL: 4500 * us, HasITL: true, Invalid: true},
		},
		{
			name:  "nested objects are not numbers",
			steps: etVLLMStream(`,"metrics":{"queue_time_ms":{"ms":1},"time_to_first_token_ms":[2]}`),
			want:  EngineTiming{Source: TimingNone},
		},
		{
			name: "a later report replaces an earlier one",
			steps: func() []netStep {
				s := etVLLMStream(`,"metrics":{"queue_time_ms":3,"time_to_first_token_ms":4}`)
				s[0] = netStep{0, etChatLine(sseRoleDelta, "", sseUsageJSON(100, 0), `,"metrics":{"queue_time_ms":99}`)}
				return s
			}(),
			want: EngineTiming{Source: TimingResponse, Queue: 3 * msec, HasQueue: true, Prefill: 4 * msec, HasPrefill: true},
		},
		{
			name: "llama.cpp timings",
			steps: etLlamaStream(`,"timings":{"prompt_n":100,"prompt_ms":25.5,"prompt_per_token_ms":0.255,` +
				`"prompt_per_second":3921.6,"predicted_n":4,"predicted_ms":30,"predicted_per_token_ms":7.5,"predicted_per_second":133.3}`),
			// ITL is predicted_ms / (predicted_n − 1): the clock starts at the first token. No queue.
			want: EngineTiming{Source: TimingResponse, Prefill: 25500 * us, HasPrefill: true,
				Decode: 30 * msec, HasDecode: true, ITL: 10 * msec, HasITL: true},
		},
		{
			name:  "llama.cpp timings of one token have no ITL",
			steps: etLlamaStream(`,"timings":{"prompt_ms":25.5,"predicted_n":1,"predicted_ms":0.2}`),
			want:  EngineTiming{Source: TimingResponse, Prefill: 25500 * us, HasPrefill: true, Decode: 200 * us, HasDecode: true},
		},
		{
			name:  "llama.cpp timings without predicted_n have no ITL",
			steps: etLlamaStream(`,"timings":{"prompt_ms":25.5,"predicted_ms":30}`),
			want:  EngineTiming{Source: TimingResponse, Prefill: 25500 * us, HasPrefill: true, Decode: 30 * msec, HasDecode: true},
		},
		{
			name:  "llama.cpp timings with a negative predicted_n have no ITL",
			steps: etLlamaStream(`,"timings":{"prompt_ms":25.5,"predicted_n":-4,"predicted_ms":30}`),
			want:  EngineTiming{Source: TimingResponse, Prefill: 25500 * us, HasPrefill: true, Decode: 30 * msec, HasDecode: true},
		},
		{
			name:  "llama.cpp timings a string is ignored",
			steps: etLlamaStream(`,"timings":"slow"`),
			want:  EngineTiming{Source: TimingNone},
		},
		{
			name:  "llama.cpp timings with negative numbers are invalid",
			steps: etLlamaStream(`,"timings":{"prompt_ms":-25,"predicted_n":4,"predicted_ms":-30}`),
			want:  EngineTiming{Source: TimingResponse, Invalid: true},
		},
		{
			name:  "no timing at all",
			steps: sseTokenStream(100, 4, 1, 20*msec, 5*msec),
			want:  EngineTiming{Source: TimingNone},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := decodeScripted(4, 0, nil, tc.steps...)
			if r.Kind != KindSuccess {
				t.Fatalf("outcome = %s/%q (%v), want success: engine timing must never fail a probe", r.Kind, r.Reason, r.Err)
			}
			if r.OutputTokens != 4 || r.TTFT() != 20*msec {
				t.Errorf("the stream itself: %d output tokens, TTFT %v; want 4 and 20ms", r.OutputTokens, r.TTFT())
			}
			if r.Engine != tc.want {
				t.Errorf("Engine =\n\t%+v\nwant\n\t%+v", r.Engine, tc.want)
			}
			if got, want := r.Engine.Reported(), tc.want.Source == TimingResponse && (!tc.want.Invalid || tc.want.Reported()); got != want {
				t.Errorf("Reported() = %v, want %v", got, want)
			}
		})
	}
}

// TestDecoderEngineTimingOnFailedStream: the timing read before a failure
// is kept, and settle still marks a failed stream with no timing as none.
func TestDecoderEngineTimingOnFailedStream(t *testing.T) {
	r := decodeScripted(4, 0, nil, sseTokenStream(100, 4, 1, 20*msec, 5*msec)[:3]...)
	if r.Kind != KindError || r.Engine != (EngineTiming{Source: TimingNone}) {
		t.Errorf("cut stream without timing: %s, Engine %+v; want error with Source none", r.Kind, r.Engine)
	}
	r = decodeScripted(4, 0, nil, netStep{0, `data: {"error":{"message":"boom"}}` + "\n\n"})
	if r.Kind != KindError || r.Engine.Source != TimingNone {
		t.Errorf("error event: %s, Engine %+v; want error with Source none", r.Kind, r.Engine)
	}
}

// TestResultSplit checks the split of TTFT: defined only for a timed probe
// whose engine reported both its queue and its prefill, adding up to TTFT.
func TestResultSplit(t *testing.T) {
	start := clockEpoch
	timed := func(kind Kind, ttft time.Duration, e EngineTiming) Result {
		return Result{Kind: kind, Start: start, FirstToken: start.Add(ttft), LastToken: start.Add(ttft + 50*msec), Engine: e}
	}
	both := EngineTiming{Source: TimingResponse, Queue: 3 * msec, HasQueue: true, Prefill: 40 * msec, HasPrefill: true}
	tests := []struct {
		name   string
		r      Result
		ok     bool
		want   Split
		reason string
	}{
		{name: "queue and prefill", r: timed(KindSuccess, 50*msec, both), ok: true,
			want: Split{Outside: 7 * msec, Queue: 3 * msec, Prefill: 40 * msec}},
		{name: "from a trace", r: timed(KindSuccess, 50*msec, func() EngineTiming { e := both; e.Source = TimingTrace; return e }()), ok: true,
			want: Split{Outside: 7 * msec, Queue: 3 * msec, Prefill: 40 * msec}},
		{name: "zero queue is a queue", r: timed(KindSuccess, 50*msec, EngineTiming{Source: TimingResponse, HasQueue: true, Prefill: 40 * msec, HasPrefill: true}), ok: true,
			want: Split{Outside: 10 * msec, Queue: 0, Prefill: 40 * msec}},
		{name: "short output is timed", r: timed(KindShortOutput, 50*msec, both), ok: true,
			want: Split{Outside: 7 * msec, Queue: 3 * msec, Prefill: 40 * msec}},
		{name: "clocks disagree: outside negative, not clamped", r: timed(KindSuccess, 42*msec, both), ok: true,
			want: Split{Outside: -1 * msec, Queue: 3 * msec, Prefill: 40 * msec}},
		{name: "no queue", r: timed(KindSuccess, 50*msec, EngineTiming{Source: TimingResponse, Prefill: 40 * msec, HasPrefill: true}), reason: "without a queue"},
		{name: "no prefill", r: timed(KindSuccess, 50*msec, EngineTiming{Source: TimingResponse, Queue: 3 * msec, HasQueue: true}), reason: "without a prefill"},
		{name: "none", r: timed(KindSuccess, 50*msec, EngineTiming{Source: TimingNone}), reason: "without engine timing"},
		{name: "failed probe", r: timed(KindError, 50*msec, both), reason: "of a failed probe"},
		{name: "no first token", r: Result{Kind: KindSuccess, Start: start, Engine: both}, reason: "without a first token"},
		{name: "last token before first", r: Result{Kind: KindSuccess, Start: start, FirstToken: start.Add(50 * msec), LastToken: start.Add(10 * msec), Engine: both},
			reason: "of an untimed probe"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.r.Split()
			if !tc.ok {
				if ok || got != (Split{}) {
					t.Fatalf("Split() = %+v, %v; want no split %s", got, ok, tc.reason)
				}
				return
			}
			if !ok {
				t.Fatalf("Split() not ok for a timed probe with queue and prefill: %+v", tc.r.Engine)
			}
			if got != tc.want {
				t.Errorf("Split() = %+v, want %+v", got, tc.want)
			}
			if sum := got.Outside + got.Queue + got.Prefill; sum != tc.r.TTFT() {
				t.Errorf("Outside + Queue + Prefill = %v, want TTFT %v", sum, tc.r.TTFT())
			}
		})
	}
}

var traceparentRE = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-01$`)

// etHeaders keeps the trace headers of every request a test server got.
type etHeaders struct {
	mu          sync.Mutex
	traceparent []string
	requestID   []string
}

func (h *etHeaders) keep(r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.traceparent = append(h.traceparent, r.Header.Get("Traceparent"))
	h.requestID = append(h.requestID, r.Header.Get(RequestIDHeader))
}

func (h *etHeaders) only(t *testing.T) (traceparent, requestID string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.traceparent) != 1 {
		t.Fatalf("the server got %d requests, want 1", len(h.traceparent))
	}
	return h.traceparent[0], h.requestID[0]
}

// checkTraceHeaders checks that the probe's headers carry its trace: a W3C
// traceparent, sampled, of Result.TraceID, and X-Request-Id = RequestID.
func checkTraceHeaders(t *testing.T, r *Result, tp, rid string) trace.SpanContext {
	t.Helper()
	m := traceparentRE.FindStringSubmatch(tp)
	if m == nil {
		t.Fatalf("traceparent = %q, want 00-<32 hex>-<16 hex>-01 (sampled)", tp)
	}
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(),
		propagation.HeaderCarrier(http.Header{"Traceparent": {tp}})))
	if !sc.IsValid() || !sc.IsSampled() {
		t.Fatalf("traceparent %q: span context valid=%v sampled=%v, want both", tp, sc.IsValid(), sc.IsSampled())
	}
	if r.TraceID == "" || m[1] != r.TraceID || sc.TraceID().String() != r.TraceID {
		t.Errorf("traceparent trace id %s, Result.TraceID %q; want equal", m[1], r.TraceID)
	}
	if rid == "" || rid != r.RequestID || rid != "slaprobe-"+r.TraceID {
		t.Errorf("X-Request-Id %q, Result.RequestID %q; want both slaprobe-%s", rid, r.RequestID, r.TraceID)
	}
	return sc
}

func etProbeSpan(t *testing.T, rec *tracetest.SpanRecorder) sdktrace.ReadOnlySpan {
	t.Helper()
	if n := len(rec.Started()); n != 1 {
		t.Fatalf("%d spans started, want 1", n)
	}
	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended when Run returned, want 1 (the probe span must end)", len(ended))
	}
	s := ended[0]
	if s.Name() != ProbeSpanName || s.SpanKind() != trace.SpanKindClient {
		t.Errorf("span %q kind %v, want %q kind client", s.Name(), s.SpanKind(), ProbeSpanName)
	}
	if s.InstrumentationScope().Name != TracerName {
		t.Errorf("span scope %q, want %q", s.InstrumentationScope().Name, TracerName)
	}
	return s
}

func etEventNames(s sdktrace.ReadOnlySpan) []string {
	var names []string
	for _, e := range s.Events() {
		names = append(names, e.Name)
	}
	return names
}

func etAttr(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// tracedProber is a prober whose probe spans go to the returned recorder.
func tracedProber(t *testing.T) (*Prober, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	p := New(nil, nil)
	p.SetTracerProvider(tp)
	return p, rec
}

// TestRunTraceContext: a probe sends its span's context (a sampled W3C
// traceparent and X-Request-Id) and records it in the Result; its span
// carries the arrival events and ends with the probe.
func TestRunTraceContext(t *testing.T) {
	s := probeScenario(4, 10*time.Second)
	var hdr etHeaders
	srv := sseServer(t, func(c *sseConn) {
		hdr.keep(c.r)
		playSteps(c, etVLLMStream(`,"metrics":{"queue_time_ms":1,"time_to_first_token_ms":2,"generation_time_ms":3,"mean_itl_ms":1}`))
	})
	p, rec := tracedProber(t)

	r := p.Run(context.Background(), testTarget(srv), preparedFor(t, APIChat, s))
	if r.Kind != KindSuccess {
		t.Fatalf("%s/%s: %v", r.Kind, r.Reason, r.Err)
	}
	tp0, rid := hdr.only(t)
	sc := checkTraceHeaders(t, &r, tp0, rid)

	span := etProbeSpan(t, rec)
	if span.SpanContext().TraceID() != sc.TraceID() || span.SpanContext().SpanID() != sc.SpanID() {
		t.Errorf("traceparent names span %s/%s, the probe span is %s/%s",
			sc.TraceID(), sc.SpanID(), span.SpanContext().TraceID(), span.SpanContext().SpanID())
	}
	if span.Parent().IsValid() {
		t.Errorf("probe span has parent %v, want a root span", span.Parent())
	}
	events := etEventNames(span)
	for _, want := range []string{EventFirstByte, EventFirstToken, EventLastToken} {
		if !slices.Contains(events, want) {
			t.Errorf("span events %v, want %q among them", events, want)
		}
	}
	for _, e := range span.Events() {
		var want time.Time
		switch e.Name {
		case EventFirstByte:
			want = r.FirstByte
		case EventFirstToken:
			want = r.FirstToken
		case EventLastToken:
			want = r.LastToken
		}
		if want.IsZero() || !e.Time.Equal(want) {
			t.Errorf("event %s at %v, want the Result's %v", e.Name, e.Time, want)
		}
	}
	if r.FirstByte.IsZero() || r.FirstByte.Before(r.Start) || r.FirstByte.After(r.FirstToken) {
		t.Errorf("FirstByte %v, want within [Start %v, FirstToken %v]", r.FirstByte, r.Start, r.FirstToken)
	}
	if span.StartTime().After(r.Start) { // the span starts before the request; Start is when the connection was ready
		t.Errorf("span starts %v, after the probe's Start %v", span.StartTime(), r.Start)
	}
	if span.EndTime().Before(r.LastToken) {
		t.Errorf("span ends %v, before the last token %v", span.EndTime(), r.LastToken)
	}
	if st := span.Status(); st.Code == codes.Error {
		t.Errorf("span status %v %q on a successful probe", st.Code, st.Description)
	}
	if v, ok := etAttr(span, "slaprobe.result"); !ok || v.AsString() != string(KindSuccess) {
		t.Errorf("slaprobe.result = %v, want %q", v.Emit(), KindSuccess)
	}
	if v, ok := etAttr(span, "gen_ai.response.id"); !ok || v.AsString() != "chatcmpl-42" {
		t.Errorf("gen_ai.response.id = %v, want chatcmpl-42", v.Emit())
	}
	if v, ok := etAttr(span, "gen_ai.usage.output_tokens"); !ok || v.AsInt64() != 4 {
		t.Errorf("gen_ai.usage.output_tokens = %v, want 4", v.Emit())
	}
	if _, ok := etAttr(span, "slaprobe.ttft_seconds"); !ok {
		t.Error("a timed probe's span has no slaprobe.ttft_seconds")
	}
	// The engine's metrics came with the response.
	if r.Engine.Source != TimingResponse || r.Engine.Queue != msec || r.Engine.Prefill != 2*msec {
		t.Errorf("Engine = %+v, want the response's metrics", r.Engine)
	}

	// Every probe is a trace of its own.
	r2 := p.Run(context.Background(), testTarget(srv), preparedFor(t, APIChat, s))
	if r2.Kind != KindSuccess || r2.TraceID == "" || r2.TraceID == r.TraceID {
		t.Errorf("second probe: %s, trace id %q; want success with a new trace id (first %s)", r2.Kind, r2.TraceID, r.TraceID)
	}
}

// TestRunTraceContextFailure: a probe answered with HTTP 500 still sent its
// trace context, and its span ends with status Error.
func TestRunTraceContextFailure(t *testing.T) {
	s := probeScenario(4, 10*time.Second)
	var hdr etHeaders
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hdr.keep(r)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"object":"error","message":"engine dead","type":"InternalServerError","code":500}`)
	}))
	t.Cleanup(srv.Close)
	p, rec := tracedProber(t)

	r := p.Run(context.Background(), testTarget(srv), preparedFor(t, APIChat, s))
	if r.Kind != KindError {
		t.Fatalf("%s/%s: %v; want an error", r.Kind, r.Reason, r.Err)
	}
	tp0, rid := hdr.only(t)
	checkTraceHeaders(t, &r, tp0, rid)
	span := etProbeSpan(t, rec)
	if span.SpanContext().TraceID().String() != r.TraceID {
		t.Errorf("probe span trace %s, Result.TraceID %s", span.SpanContext().TraceID(), r.TraceID)
	}
	if st := span.Status(); st.Code != codes.Error || !strings.Contains(st.Description, string(r.Reason)) {
		t.Errorf("span status %v %q, want Error mentioning %q", st.Code, st.Description, r.Reason)
	}
	if v, ok := etAttr(span, "error.type"); !ok || v.AsString() != string(r.Reason) {
		t.Errorf("error.type = %v, want %q", v.Emit(), r.Reason)
	}
	if v, ok := etAttr(span, "slaprobe.result"); !ok || v.AsString() != string(KindError) {
		t.Errorf("slaprobe.result = %v, want %q", v.Emit(), KindError)
	}
	events := etEventNames(span)
	if !slices.Contains(events, EventFirstByte) || slices.Contains(events, EventFirstToken) {
		t.Errorf("span events %v, want first_byte (headers came) and no first_token", events)
	}
	if r.Engine.Reported() {
		t.Errorf("Engine = %+v on an HTTP 500, want nothing reported", r.Engine)
	}
}

// TestRunTraceContextDefaultProvider: without SetTracerProvider a probe
// still sends a real, sampled traceparent, so an engine traces it.
func TestRunTraceContextDefaultProvider(t *testing.T) {
	s := probeScenario(4, 10*time.Second)
	var hdr etHeaders
	srv := sseServer(t, func(c *sseConn) {
		hdr.keep(c.r)
		playSteps(c, sseTokenStream(100, 4, 1, 0, 0))
	})
	r := New(nil, nil).Run(context.Background(), testTarget(srv), preparedFor(t, APIChat, s))
	if r.Kind != KindSuccess {
		t.Fatalf("%s/%s: %v", r.Kind, r.Reason, r.Err)
	}
	tp0, rid := hdr.only(t)
	checkTraceHeaders(t, &r, tp0, rid)
	if r.Engine.Source != TimingNone {
		t.Errorf("Engine.Source = %q for a server that reports no timing, want %q", r.Engine.Source, TimingNone)
	}
}

// TestRunSpanRecordsACutPrompt: the probe's span ends after the probe's
// outcome is final, so a stream that succeeded on a prompt the server cut
// (it read 50 of the 100 tokens sent) is recorded as prompt_truncated.
func TestRunSpanRecordsACutPrompt(t *testing.T) {
	s := probeScenario(4, 10*time.Second)
	srv := sseServer(t, func(c *sseConn) { playSteps(c, sseTokenStream(50, 4, 1, msec, msec)) })
	p, rec := tracedProber(t)
	r := p.Run(context.Background(), testTarget(srv), preparedFor(t, APIChat, s))
	if r.Kind != KindError || r.Reason != ReasonPromptTruncated {
		t.Fatalf("%s/%s: %v; want prompt_truncated", r.Kind, r.Reason, r.Err)
	}
	span := etProbeSpan(t, rec)
	if v, ok := etAttr(span, "error.type"); !ok || v.AsString() != string(ReasonPromptTruncated) {
		t.Errorf("error.type = %v, want %q", v.Emit(), ReasonPromptTruncated)
	}
	if st := span.Status(); st.Code != codes.Error {
		t.Errorf("span status %v, want Error", st.Code)
	}
}

// TestCheckEngine: an engine timing is used only when every part is a
// usable duration and queue + prefill fits in the client's own TTFT plus
// EngineTimingTolerance; anything else leaves Source none and says why.
func TestCheckEngine(t *testing.T) {
	start := time.Unix(1000, 0)
	timed := func(ttft time.Duration, e EngineTiming) Result {
		return Result{Kind: KindSuccess, Start: start, FirstToken: start.Add(ttft), LastToken: start.Add(ttft + 10*msec), OutputTokens: 4, Engine: e}
	}
	qp := func(src TimingSource, q, p time.Duration) EngineTiming {
		return EngineTiming{Source: src, Queue: q, HasQueue: true, Prefill: p, HasPrefill: true}
	}
	tol := EngineTimingTolerance
	tests := []struct {
		name   string
		r      Result
		reason string
	}{
		{"inside the TTFT", timed(100*msec, qp(TimingResponse, 10*msec, 60*msec)), ""},
		{"equal to the TTFT", timed(100*msec, qp(TimingTrace, 40*msec, 60*msec)), ""},
		{"at the TTFT plus the tolerance", timed(100*msec, qp(TimingTrace, 40*msec, 60*msec+tol)), ""},
		{"1 ms beyond it", timed(100*msec, qp(TimingTrace, 40*msec, 61*msec+tol)), ImplausibleExceedsTTFT},
		{"10 s of queue on a 100 ms TTFT", timed(100*msec, qp(TimingTrace, 10*time.Second, 60*msec)), ImplausibleExceedsTTFT},
		{"queue alone beyond it", timed(100*msec, EngineTiming{Source: TimingResponse, Queue: time.Second, HasQueue: true}), ImplausibleExceedsTTFT},
		{"prefill alone beyond it (llama.cpp)", timed(100*msec, EngineTiming{Source: TimingResponse, Prefill: 200 * msec, HasPrefill: true}), ImplausibleExceedsTTFT},
		{"decode is not bounded by TTFT", timed(100*msec, EngineTiming{Source: TimingResponse, Decode: time.Minute, HasDecode: true}), ""},
		{"invalid from the parser", timed(100*msec, EngineTiming{Source: TimingResponse, Invalid: true}), ImplausibleInvalid},
		{"invalid beside good parts", timed(100*msec, EngineTiming{Source: TimingTrace, Queue: msec, HasQueue: true, Invalid: true}), ImplausibleInvalid},
		{"a negative part set by hand", timed(100*msec, qp(TimingTrace, -msec, 10*msec)), ImplausibleInvalid},
		{"nothing reported", timed(100*msec, EngineTiming{Source: TimingNone}), ""},
		{"no TTFT to judge by", Result{Kind: KindError, Engine: qp(TimingResponse, 10*time.Second, 0)}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			before := r.Engine
			got := r.CheckEngine()
			if got != tc.reason {
				t.Fatalf("CheckEngine = %q, want %q (engine %+v, TTFT %v)", got, tc.reason, before, r.TTFT())
			}
			if tc.reason == "" {
				if r.Engine != before {
					t.Errorf("a plausible timing changed: %+v, was %+v", r.Engine, before)
				}
				return
			}
			want := EngineTiming{Source: TimingNone, Dropped: TimingDrop{From: before.Source, Reason: tc.reason}}
			if r.Engine != want {
				t.Errorf("Engine = %+v, want %+v", r.Engine, want)
			}
			if _, ok := r.Split(); ok {
				t.Error("a dropped timing still splits the TTFT")
			}
		})
	}
}

// TestDurationOf: no conversion overflows; the limits are inclusive.
func TestDurationOf(t *testing.T) {
	day := MaxEngineDuration
	for _, tc := range []struct {
		v    float64
		unit time.Duration
		want time.Duration
		ok   bool
	}{
		{1.5, time.Millisecond, 1500 * time.Microsecond, true},
		{0, time.Second, 0, true},
		{day.Seconds(), time.Second, day, true},
		{day.Seconds() * 1000, time.Millisecond, day, true},
		{day.Seconds() + 1, time.Second, 0, false},
		{1e10, time.Second, 0, false}, // wraps to a negative Duration unguarded
		{1e13, time.Millisecond, 0, false},
		{math.MaxFloat64, time.Second, 0, false},
		{-1e-9, time.Second, 0, false},
		{math.NaN(), time.Second, 0, false},
		{math.Inf(1), time.Millisecond, 0, false},
	} {
		got, ok := DurationOf(tc.v, tc.unit)
		if got != tc.want || ok != tc.ok {
			t.Errorf("DurationOf(%v, %v) = %v, %v; want %v, %v", tc.v, tc.unit, got, ok, tc.want, tc.ok)
		}
	}
}

// TestRunDropsImplausibleEngineTiming: a probe whose response claims more
// queue than its whole TTFT, or a latency that is no duration, has no
// engine timing (source none) and says why; the span still records the
// probe.
func TestRunDropsImplausibleEngineTiming(t *testing.T) {
	s := probeScenario(4, 10*time.Second)
	for _, tc := range []struct{ name, metrics, reason string }{
		{"10 s of queue", `{"queue_time_ms":10000,"time_to_first_token_ms":2}`, ImplausibleExceedsTTFT},
		{"1e10 s of prefill", `{"queue_time_ms":1,"time_to_first_token_ms":1e13}`, ImplausibleInvalid},
		{"negative queue", `{"queue_time_ms":-5,"time_to_first_token_ms":2}`, ImplausibleInvalid},
		{"plausible", `{"queue_time_ms":1,"time_to_first_token_ms":2}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := sseServer(t, func(c *sseConn) { playSteps(c, etVLLMStream(`,"metrics":`+tc.metrics)) })
			r := New(nil, nil).Run(context.Background(), testTarget(srv), preparedFor(t, APIChat, s))
			if r.Kind != KindSuccess {
				t.Fatalf("%s/%s: %v", r.Kind, r.Reason, r.Err)
			}
			if tc.reason == "" {
				if r.Engine.Source != TimingResponse || r.Engine.Dropped != (TimingDrop{}) {
					t.Errorf("Engine = %+v, want the response's timing", r.Engine)
				}
				return
			}
			want := EngineTiming{Source: TimingNone, Dropped: TimingDrop{From: TimingResponse, Reason: tc.reason}}
			if r.Engine != want {
				t.Errorf("Engine = %+v, want %+v", r.Engine, want)
			}
		})
	}
}

// TestRunRequestKind: the probe span names what sent it: a scheduled probe
// by default (warm from turn 1), else the context's kind.
func TestRunRequestKind(t *testing.T) {
	s := probeScenario(4, 10*time.Second)
	srv := sseServer(t, func(c *sseConn) { playSteps(c, etVLLMStream("")) })
	for _, tc := range []struct {
		ctx  context.Context
		want RequestKind
	}{
		{context.Background(), RequestScheduled},
		{WithRequestKind(context.Background(), RequestSweep), RequestSweep},
		{WithRequestKind(context.Background(), RequestProbe), RequestProbe},
	} {
		p, rec := tracedProber(t)
		if r := p.Run(tc.ctx, testTarget(srv), preparedFor(t, APIChat, s)); r.Kind != KindSuccess {
			t.Fatalf("%s/%s: %v", r.Kind, r.Reason, r.Err)
		}
		span := etProbeSpan(t, rec)
		if v, ok := etAttr(span, AttrRequestKind); !ok || v.AsString() != string(tc.want) {
			t.Errorf("%s = %q, want %q", AttrRequestKind, v.Emit(), tc.want)
		}
	}
	if requestKindOf(context.Background(), 1) != RequestWarm || requestKindOf(context.Background(), 3) != RequestWarm {
		t.Error("a warm scenario's turns are not of kind warm")
	}
	for k, want := range map[RequestKind]bool{RequestScheduled: true, RequestWarm: true, RequestSweep: false, RequestProbe: false} {
		if k.Recorded() != want {
			t.Errorf("%s.Recorded() = %v, want %v", k, k.Recorded(), want)
		}
	}
}

// TestDecoderLlamaCacheN: llama.cpp's timings.cache_n is the cached tokens
// where usage reports none; usage's cached_tokens wins where both come; a
// cache_n that is no count is ignored.
func TestDecoderLlamaCacheN(t *testing.T) {
	withUsage := func(cached int) []netStep {
		s := etLlamaStream(`,"timings":{"prompt_n":36,"cache_n":64,"prompt_ms":2.5}`)
		s[5] = netStep{0, `data: {"id":"chatcmpl-42","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[],"usage":` +
			fmt.Sprintf(`{"prompt_tokens":100,"total_tokens":104,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":%d}}`, cached) + "}\n\n"}
		return s
	}
	for _, tc := range []struct {
		name     string
		steps    []netStep
		cached   int
		reported bool
	}{
		{"cache_n alone", etLlamaStream(`,"timings":{"prompt_n":36,"cache_n":64,"prompt_ms":2.5}`), 64, true},
		{"cache_n zero", etLlamaStream(`,"timings":{"prompt_n":100,"cache_n":0,"prompt_ms":2.5}`), 0, true},
		{"usage wins", withUsage(48), 48, true},
		{"no cache_n", etLlamaStream(`,"timings":{"prompt_n":100,"prompt_ms":2.5}`), 0, false},
		{"cache_n negative", etLlamaStream(`,"timings":{"cache_n":-3,"prompt_ms":2.5}`), 0, false},
		{"cache_n a string", etLlamaStream(`,"timings":{"cache_n":"64","prompt_ms":2.5}`), 0, false},
		{"timings not an object", etLlamaStream(`,"timings":[64]`), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := decodeScripted(4, 0, nil, tc.steps...)
			if r.Kind != KindSuccess || r.CachedTokens != tc.cached || r.CachedReported != tc.reported {
				t.Errorf("%s/%s: cached %d (reported %v), want %d (%v)", r.Kind, r.Reason, r.CachedTokens, r.CachedReported, tc.cached, tc.reported)
			}
		})
	}
}

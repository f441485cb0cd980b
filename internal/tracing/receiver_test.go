package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
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

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/slaprobe/slaprobe/prober"
)

// The vLLM attributes every test span carries, and the timing they mean.
const (
	testQueueSec   = 0.0015
	testPrefillSec = 0.0125
	testDecodeSec  = 0.03
	testCompletion = 4
)

var wantTraceTiming = prober.EngineTiming{
	Source: prober.TimingTrace,
	Queue:  1500 * time.Microsecond, HasQueue: true,
	Prefill: 12500 * time.Microsecond, HasPrefill: true,
	Decode: 30 * time.Millisecond, HasDecode: true,
	ITL: 10 * time.Millisecond, HasITL: true, // decode / (4 − 1)
}

func vllmAttrs() []*commonpb.KeyValue {
	dbl := func(k string, v float64) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v}}}
	}
	return []*commonpb.KeyValue{
		{Key: "gen_ai.response.model", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "m"}}},
		dbl(attrTimeInQueue, testQueueSec),
		dbl(attrPrefill, testPrefillSec),
		dbl(attrDecode, testDecodeSec),
		{Key: attrCompletionToken, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: testCompletion}}},
	}
}

// vllmKeyValues are vllmAttrs for an SDK span.
func vllmKeyValues() []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("gen_ai.response.model", "m"),
		attribute.Float64(attrTimeInQueue, testQueueSec),
		attribute.Float64(attrPrefill, testPrefillSec),
		attribute.Float64(attrDecode, testDecodeSec),
		attribute.Int(attrCompletionToken, testCompletion),
	}
}

// probeSpans maps the trace id of each probe startProbe started to its
// span's id, so that export sends the engine's span as the probe span's
// child, as vLLM does.
var probeSpans sync.Map

// export is an OTLP export of one span: the child of the probe span of
// trace id, when startProbe started one.
func export(id trace.TraceID, name string, attrs []*commonpb.KeyValue) *coltracepb.ExportTraceServiceRequest {
	var parent []byte
	if p, ok := probeSpans.Load(id); ok {
		sid := p.(trace.SpanID)
		parent = sid[:]
	}
	return exportChild(id, trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, parent, name, attrs)
}

// exportChild is an OTLP export of one span with the given ids.
func exportChild(id trace.TraceID, spanID trace.SpanID, parent []byte, name string, attrs []*commonpb.KeyValue) *coltracepb.ExportTraceServiceRequest {
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{
			TraceId: id[:], SpanId: spanID[:], ParentSpanId: parent, Name: name, Kind: tracepb.Span_SPAN_KIND_SERVER,
			StartTimeUnixNano: 1, EndTimeUnixNano: 2, Attributes: attrs,
		}}}},
	}}}
}

// feed hands one span to j as a receiver does.
func feed(j *Joiner, id trace.TraceID, name string, attrs []*commonpb.KeyValue) {
	j.addResourceSpans(export(id, name, attrs).GetResourceSpans())
}

// probeProvider is a probe's TracerProvider: every span sampled, the
// joiner told of each probe span.
func probeProvider(t *testing.T, j *Joiner) *sdktrace.TracerProvider {
	t.Helper()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(j.SpanProcessor()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

// startProbe starts (and ends) a probe span, so j expects its trace; it
// returns the probe's context and its Result as Run leaves it.
func startProbe(t *testing.T, tp trace.TracerProvider) (context.Context, prober.Result) {
	t.Helper()
	ctx, span := tp.Tracer(prober.TracerName).Start(context.Background(), prober.ProbeSpanName)
	span.End()
	probeSpans.Store(span.SpanContext().TraceID(), span.SpanContext().SpanID())
	id := span.SpanContext().TraceID().String()
	return ctx, prober.Result{Kind: prober.KindSuccess, TraceID: id, RequestID: "slaprobe-" + id,
		Engine: prober.EngineTiming{Source: prober.TimingNone}}
}

// probeSpanID is the span id of r's probe span, as its traceparent sent it.
func probeSpanID(t *testing.T, r prober.Result) string {
	t.Helper()
	p, ok := probeSpans.Load(traceIDOfResult(t, r))
	if !ok {
		t.Fatalf("no probe span started for trace %s", r.TraceID)
	}
	return p.(trace.SpanID).String()
}

func traceIDOfResult(t *testing.T, r prober.Result) trace.TraceID {
	t.Helper()
	id, err := trace.TraceIDFromHex(r.TraceID)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// spanCounts reads slaprobe_engine_spans_received_total by result.
func spanCounts(t *testing.T, j *Joiner) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, r := range SpanResults {
		var m dto.Metric
		if err := j.spans.WithLabelValues(r).Write(&m); err != nil {
			t.Fatal(err)
		}
		if v := m.GetCounter().GetValue(); v != 0 {
			out[r] = v
		}
	}
	return out
}

func checkCounts(t *testing.T, j *Joiner, want map[string]float64) {
	t.Helper()
	got := spanCounts(t, j)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("slaprobe_engine_spans_received_total = %v, want %v", got, want)
	}
}

// joinWait is a done callback that hands its Result to a channel and
// counts its calls.
type joinWait struct {
	ch    chan prober.Result
	calls atomic.Int32
}

func newJoinWait() *joinWait { return &joinWait{ch: make(chan prober.Result, 4)} }

func (w *joinWait) done(r prober.Result) {
	w.calls.Add(1)
	w.ch <- r
}

// wait returns the joined Result, failing after 10 s.
func (w *joinWait) wait(t *testing.T) prober.Result {
	t.Helper()
	select {
	case r := <-w.ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("done was not called within 10 s")
		return prober.Result{}
	}
}

func (w *joinWait) pending(t *testing.T) {
	t.Helper()
	select {
	case r := <-w.ch:
		t.Fatalf("done called early with Engine %+v", r.Engine)
	default:
	}
}

func TestJoinSpanBeforeJoin(t *testing.T) {
	j := NewJoiner(time.Minute)
	_, res := startProbe(t, probeProvider(t, j))
	feed(j, traceIDOfResult(t, res), SpanLLMRequest, vllmAttrs())
	// Counted when the probe shows it waits for it (Join), not before.
	checkCounts(t, j, map[string]float64{})

	w := newJoinWait()
	if !j.Join(res, w.done) {
		t.Fatal("Join = false for a probe whose span is here")
	}
	// done ran on this goroutine, before Join returned.
	if n := w.calls.Load(); n != 1 {
		t.Fatalf("done called %d times when Join returned, want once, synchronously", n)
	}
	got := <-w.ch
	checkCounts(t, j, map[string]float64{SpanJoined: 1})
	if got.Engine != wantTraceTiming {
		t.Errorf("Engine =\n\t%+v\nwant\n\t%+v", got.Engine, wantTraceTiming)
	}
	if got.TraceID != res.TraceID || got.RequestID != res.RequestID || got.Kind != res.Kind {
		t.Errorf("joined Result lost its fields: %+v", got)
	}
	if n := j.Pending(); n != 0 {
		t.Errorf("Pending = %d, want 0", n)
	}
	// Settled: a second Join, and a second span, do nothing more.
	if j.Join(res, w.done) {
		t.Error("a second Join of a settled probe = true")
	}
	feed(j, traceIDOfResult(t, res), SpanLLMRequest, vllmAttrs())
	checkCounts(t, j, map[string]float64{SpanJoined: 1, SpanLate: 1})
	if n := w.calls.Load(); n != 1 {
		t.Errorf("done called %d times, want once", n)
	}
}

func TestJoinSpanAfterJoin(t *testing.T) {
	j := NewJoiner(time.Minute)
	_, res := startProbe(t, probeProvider(t, j))
	w := newJoinWait()
	if !j.Join(res, w.done) {
		t.Fatal("Join = false for a registered probe")
	}
	w.pending(t)
	if n := j.Pending(); n != 1 {
		t.Errorf("Pending = %d while waiting for the span, want 1", n)
	}
	if j.Join(res, w.done) {
		t.Error("a second Join while the first waits = true")
	}
	// Another span of the probe's trace, and an llm_request without timing, do not settle it.
	feed(j, traceIDOfResult(t, res), "http.request", vllmAttrs())
	feed(j, traceIDOfResult(t, res), SpanLLMRequest, vllmAttrs()[:1])
	w.pending(t)
	checkCounts(t, j, map[string]float64{SpanIgnored: 2})

	feed(j, traceIDOfResult(t, res), SpanLLMRequest, vllmAttrs())
	got := w.wait(t)
	if got.Engine != wantTraceTiming {
		t.Errorf("Engine =\n\t%+v\nwant\n\t%+v", got.Engine, wantTraceTiming)
	}
	if n := j.Pending(); n != 0 {
		t.Errorf("Pending = %d after the join, want 0", n)
	}
	checkCounts(t, j, map[string]float64{SpanJoined: 1, SpanIgnored: 2})
	if n := w.calls.Load(); n != 1 {
		t.Errorf("done called %d times, want once", n)
	}
}

func TestJoinTimeout(t *testing.T) {
	j := NewJoiner(20 * time.Millisecond)
	if j.Timeout() != 20*time.Millisecond {
		t.Fatalf("Timeout = %v", j.Timeout())
	}
	_, res := startProbe(t, probeProvider(t, j))
	res.Engine = prober.EngineTiming{} // whatever it held, the timeout says none
	w := newJoinWait()
	if !j.Join(res, w.done) {
		t.Fatal("Join = false for a registered probe")
	}
	got := w.wait(t)
	if got.Engine != (prober.EngineTiming{Source: prober.TimingNone}) {
		t.Errorf("Engine after the join timeout = %+v, want only Source none", got.Engine)
	}
	if got.TraceID != res.TraceID {
		t.Errorf("TraceID = %q, want %q", got.TraceID, res.TraceID)
	}
	if n := j.Pending(); n != 0 {
		t.Errorf("Pending = %d after the timeout, want 0", n)
	}
	// The span, late.
	feed(j, traceIDOfResult(t, res), SpanLLMRequest, vllmAttrs())
	checkCounts(t, j, map[string]float64{SpanLate: 1})
	if j.Join(res, w.done) {
		t.Error("Join after the timeout = true")
	}
	if n := w.calls.Load(); n != 1 {
		t.Errorf("done called %d times, want once", n)
	}
}

func TestJoinDefaultTimeout(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		if got := NewJoiner(d).Timeout(); got != DefaultJoinTimeout {
			t.Errorf("NewJoiner(%v).Timeout() = %v, want %v", d, got, DefaultJoinTimeout)
		}
	}
}

func TestJoinUnknownSpans(t *testing.T) {
	j := NewJoiner(time.Minute)
	tp := probeProvider(t, j)
	_, res := startProbe(t, tp)

	// A span of a trace no probe started: another client's request.
	other := trace.TraceID{0xde, 0xad, 0xbe, 0xef, 1}
	feed(j, other, SpanLLMRequest, vllmAttrs())
	checkCounts(t, j, map[string]float64{SpanOther: 1})
	// Trace ids that are not ids at all.
	for _, bad := range [][]byte{nil, {1, 2, 3}, make([]byte, 16), make([]byte, 24)} {
		req := export(trace.TraceID{}, SpanLLMRequest, vllmAttrs())
		req.ResourceSpans[0].ScopeSpans[0].Spans[0].TraceId = bad
		j.addResourceSpans(req.GetResourceSpans())
	}
	checkCounts(t, j, map[string]float64{SpanOther: 5})
	// A span of a probe's trace that is not an llm_request: the probe span
	// itself, say, when slaprobe exports to the same receiver.
	feed(j, traceIDOfResult(t, res), prober.ProbeSpanName, vllmAttrs())
	checkCounts(t, j, map[string]float64{SpanOther: 5, SpanIgnored: 1})

	// None of them settled the probe.
	w := newJoinWait()
	if !j.Join(res, w.done) {
		t.Fatal("Join = false for a registered probe")
	}
	w.pending(t)
	if j.Pending() != 1 {
		t.Errorf("Pending = %d, want 1", j.Pending())
	}

	// A span started by the same provider but not a probe span is not a probe.
	_, span := tp.Tracer("x").Start(context.Background(), "not-a-probe")
	span.End()
	notProbe := prober.Result{TraceID: span.SpanContext().TraceID().String()}
	feed(j, span.SpanContext().TraceID(), SpanLLMRequest, vllmAttrs())
	checkCounts(t, j, map[string]float64{SpanOther: 6, SpanIgnored: 1})

	for _, tc := range []struct {
		name string
		r    prober.Result
	}{
		{"empty trace id", prober.Result{}},
		{"not hex", prober.Result{TraceID: "slaprobe"}},
		{"all zero", prober.Result{TraceID: strings.Repeat("0", 32)}},
		{"unknown trace id", prober.Result{TraceID: other.String()}},
		{"a span that is not a probe's", notProbe},
	} {
		if j.Join(tc.r, w.done) {
			t.Errorf("%s: Join(%q) = true, want false", tc.name, tc.r.TraceID)
		}
	}
	if n := w.calls.Load(); n != 0 {
		t.Errorf("done called %d times, want never", n)
	}
}

// TestSpanTiming reads vLLM's llm_request attributes.
func TestSpanTiming(t *testing.T) {
	kv := func(k string, v any) *commonpb.KeyValue {
		switch x := v.(type) {
		case float64:
			return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: x}}}
		case int:
			return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: int64(x)}}}
		case string:
			return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: x}}}
		}
		panic(v)
	}
	ms := time.Millisecond
	tests := []struct {
		name  string
		attrs []*commonpb.KeyValue
		want  prober.EngineTiming
		ok    bool
	}{
		{"all of vLLM's", vllmAttrs(), wantTraceTiming, true},
		{"integer seconds", []*commonpb.KeyValue{kv(attrTimeInQueue, 0), kv(attrPrefill, 1)},
			prober.EngineTiming{Source: prober.TimingTrace, HasQueue: true, Prefill: time.Second, HasPrefill: true}, true},
		{"one token: no ITL", []*commonpb.KeyValue{kv(attrDecode, 0.0), kv(attrCompletionToken, 1)},
			prober.EngineTiming{Source: prober.TimingTrace, HasDecode: true}, true},
		{"no completion tokens: no ITL", []*commonpb.KeyValue{kv(attrDecode, 0.01)},
			prober.EngineTiming{Source: prober.TimingTrace, Decode: 10 * ms, HasDecode: true}, true},
		{"string latencies are absent", []*commonpb.KeyValue{kv(attrPrefill, "0.01"), kv(attrDecode, 0.02), kv(attrCompletionToken, 3)},
			prober.EngineTiming{Source: prober.TimingTrace, Decode: 20 * ms, HasDecode: true, ITL: 10 * ms, HasITL: true}, true},
		// Numbers that are no duration make the timing invalid: the join drops it as implausible.
		{"negative latency: invalid", []*commonpb.KeyValue{kv(attrTimeInQueue, -0.001), kv(attrDecode, 0.02), kv(attrCompletionToken, 3)},
			prober.EngineTiming{Source: prober.TimingTrace, Decode: 20 * ms, HasDecode: true, ITL: 10 * ms, HasITL: true, Invalid: true}, true},
		{"1e10 s, which would wrap a Duration: invalid", []*commonpb.KeyValue{kv(attrTimeInQueue, 1e10)},
			prober.EngineTiming{Source: prober.TimingTrace, Invalid: true}, true},
		{"NaN: invalid", []*commonpb.KeyValue{kv(attrPrefill, math.NaN())},
			prober.EngineTiming{Source: prober.TimingTrace, Invalid: true}, true},
		{"-Inf: invalid", []*commonpb.KeyValue{kv(attrDecode, math.Inf(-1))},
			prober.EngineTiming{Source: prober.TimingTrace, Invalid: true}, true},
		{"a day is the most", []*commonpb.KeyValue{kv(attrTimeInQueue, 86400.0)},
			prober.EngineTiming{Source: prober.TimingTrace, Queue: 24 * time.Hour, HasQueue: true}, true},
		{"huge completion count: no ITL", []*commonpb.KeyValue{kv(attrDecode, 0.02), kv(attrCompletionToken, 1e300)},
			prober.EngineTiming{Source: prober.TimingTrace, Decode: 20 * ms, HasDecode: true}, true},
		{"no latency at all", []*commonpb.KeyValue{kv(attrCompletionToken, 3), kv("gen_ai.usage.prompt_tokens", 100)}, prober.EngineTiming{}, false},
		{"nothing", nil, prober.EngineTiming{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := spanTiming(tc.attrs)
			if ok != tc.ok || got != tc.want {
				t.Errorf("spanTiming = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// gzipped compresses b.
func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func post(t *testing.T, url, method, contentType, encoding string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestReceiverHTTP posts OTLP/HTTP exports, in every accepted form and in
// some refused ones, to the receiver's handler.
func TestReceiverHTTP(t *testing.T) {
	j := NewJoiner(time.Minute)
	tp := probeProvider(t, j)
	recv := NewReceiver(j, nil, nil)
	srv := httptest.NewServer(recv.HTTPHandler())
	t.Cleanup(srv.Close)
	url := srv.URL + "/v1/traces"

	protoBody := func(id trace.TraceID) []byte {
		b, err := proto.Marshal(export(id, SpanLLMRequest, vllmAttrs()))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	jsonBody := func(id trace.TraceID) []byte {
		b, err := protojson.Marshal(export(id, SpanLLMRequest, vllmAttrs()))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	accepted := []struct {
		name, contentType, encoding string
		body                        func(trace.TraceID) []byte
	}{
		{"protobuf", "application/x-protobuf", "", protoBody},
		{"protobuf, application/protobuf", "application/protobuf", "", protoBody},
		{"protobuf, identity encoding", "application/x-protobuf", "identity", protoBody},
		{"protobuf, gzip", "application/x-protobuf", "gzip", func(id trace.TraceID) []byte { return gzipped(t, protoBody(id)) }},
		{"JSON", "application/json", "", jsonBody},
		{"JSON with charset", "application/json; charset=utf-8", "", jsonBody},
		{"JSON, gzip", "application/json", "gzip", func(id trace.TraceID) []byte { return gzipped(t, jsonBody(id)) }},
	}
	for _, tc := range accepted {
		t.Run(tc.name, func(t *testing.T) {
			_, res := startProbe(t, tp)
			resp, body := post(t, url, http.MethodPost, tc.contentType, tc.encoding, tc.body(traceIDOfResult(t, res)))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d %q, want 200", resp.StatusCode, body)
			}
			var out coltracepb.ExportTraceServiceResponse
			ct := resp.Header.Get("Content-Type")
			var err error
			if strings.HasPrefix(tc.contentType, "application/json") {
				if !strings.HasPrefix(ct, "application/json") {
					t.Errorf("response Content-Type %q, want application/json as the request", ct)
				}
				err = protojson.Unmarshal(body, &out)
			} else {
				if ct != tc.contentType {
					t.Errorf("response Content-Type %q, want %q as the request", ct, tc.contentType)
				}
				err = proto.Unmarshal(body, &out)
			}
			if err != nil {
				t.Errorf("response %q is not an ExportTraceServiceResponse in the request's encoding: %v", body, err)
			}
			w := newJoinWait()
			if !j.Join(res, w.done) || w.calls.Load() != 1 {
				t.Fatalf("the posted span was not joined: counts %v", spanCounts(t, j))
			}
			if got := (<-w.ch).Engine; got != wantTraceTiming {
				t.Errorf("Engine =\n\t%+v\nwant\n\t%+v", got, wantTraceTiming)
			}
		})
	}
	checkCounts(t, j, map[string]float64{SpanJoined: float64(len(accepted))})

	// 16 MiB + 1 of zeros, gzipped to a few KiB.
	bomb := gzipped(t, make([]byte, maxExportBytes+1))
	refused := []struct {
		name, method, contentType, encoding string
		body                                []byte
		status                              int
	}{
		{"GET", http.MethodGet, "", "", nil, http.StatusMethodNotAllowed},
		{"PUT", http.MethodPut, "application/x-protobuf", "", protoBody(trace.TraceID{1}), http.StatusMethodNotAllowed},
		{"no content type", http.MethodPost, "", "", protoBody(trace.TraceID{1}), http.StatusUnsupportedMediaType},
		{"text/plain", http.MethodPost, "text/plain", "", []byte("hello"), http.StatusUnsupportedMediaType},
		{"brotli", http.MethodPost, "application/x-protobuf", "br", protoBody(trace.TraceID{1}), http.StatusUnsupportedMediaType},
		{"garbage protobuf", http.MethodPost, "application/x-protobuf", "", []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01}, http.StatusBadRequest},
		{"garbage JSON", http.MethodPost, "application/json", "", []byte(`{"resourceSpans": [nope`), http.StatusBadRequest},
		{"JSON of another message", http.MethodPost, "application/json", "", []byte(`{"resourceSpans": 7}`), http.StatusBadRequest},
		{"not gzip", http.MethodPost, "application/x-protobuf", "gzip", protoBody(trace.TraceID{1}), http.StatusBadRequest},
		{"cut gzip", http.MethodPost, "application/x-protobuf", "gzip", gzipped(t, protoBody(trace.TraceID{1}))[:20], http.StatusBadRequest},
		{"larger than the limit once inflated", http.MethodPost, "application/x-protobuf", "gzip", bomb, http.StatusRequestEntityTooLarge},
		{"larger than the limit", http.MethodPost, "application/x-protobuf", "", make([]byte, maxExportBytes+1), http.StatusRequestEntityTooLarge},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, url, tc.method, tc.contentType, tc.encoding, tc.body)
			if resp.StatusCode != tc.status {
				t.Errorf("status %d %q, want %d", resp.StatusCode, body, tc.status)
			}
			if tc.status == http.StatusMethodNotAllowed && resp.Header.Get("Allow") != http.MethodPost {
				t.Errorf("Allow = %q, want POST", resp.Header.Get("Allow"))
			}
		})
	}
	// Refused exports reach the joiner with nothing.
	checkCounts(t, j, map[string]float64{SpanJoined: float64(len(accepted))})
	// And are counted: two too large, the others not an export.
	for reason, want := range map[string]float64{RefusedTooLarge: 2, RefusedBadRequest: float64(len(refused) - 2), RefusedTooMany: 0} {
		if got := testutil.ToFloat64(recv.refused.WithLabelValues(receiverHTTP, reason)); got != want {
			t.Errorf("slaprobe_otlp_exports_refused_total{protocol=\"http\",reason=%q} = %v, want %v", reason, got, want)
		}
	}
}

// TestReceiverHTTPSpecJSON posts an export in OTLP/JSON as the
// specification writes it (and as the OpenTelemetry SDKs and Collector send
// it): trace and span ids as hex strings, not protojson's base64.
func TestReceiverHTTPSpecJSON(t *testing.T) {
	j := NewJoiner(time.Minute)
	srv := httptest.NewServer(NewReceiver(j, nil, nil).HTTPHandler())
	t.Cleanup(srv.Close)
	_, res := startProbe(t, probeProvider(t, j))
	body := fmt.Sprintf(`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"vllm"}}]},
"scopeSpans":[{"scope":{"name":"vllm.llm_engine"},"spans":[{"traceId":%q,"spanId":"0102030405060708","parentSpanId":%q,
"name":"llm_request","kind":2,"startTimeUnixNano":"1","endTimeUnixNano":"2","attributes":[
{"key":"gen_ai.latency.time_in_queue","value":{"doubleValue":0.0015}},
{"key":"gen_ai.latency.time_in_model_prefill","value":{"doubleValue":0.0125}},
{"key":"gen_ai.latency.time_in_model_decode","value":{"doubleValue":0.03}},
{"key":"gen_ai.usage.completion_tokens","value":{"intValue":"4"}}]}]}]}]}`, res.TraceID, probeSpanID(t, res))
	resp, out := post(t, srv.URL+"/v1/traces", http.MethodPost, "application/json", "", []byte(body))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d %q, want 200", resp.StatusCode, out)
	}
	w := newJoinWait()
	if !j.Join(res, w.done) || w.calls.Load() != 1 {
		t.Fatalf("an OTLP/JSON span (hex ids, as the specification has them) was not joined; counts %v", spanCounts(t, j))
	}
	if got := (<-w.ch).Engine; got != wantTraceTiming {
		t.Errorf("Engine =\n\t%+v\nwant\n\t%+v", got, wantTraceTiming)
	}
}

// exporterCase builds a real OTLP exporter for a receiver at addr.
type exporterCase struct {
	name string
	http bool // the receiver's HTTP side, else gRPC
	new  func(ctx context.Context, addr string) (sdktrace.SpanExporter, error)
}

var exporterCases = []exporterCase{
	{name: "gRPC", new: func(ctx context.Context, addr string) (sdktrace.SpanExporter, error) {
		return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL("http://"+addr))
	}},
	{name: "gRPC gzip", new: func(ctx context.Context, addr string) (sdktrace.SpanExporter, error) {
		return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL("http://"+addr), otlptracegrpc.WithCompressor("gzip"))
	}},
	{name: "HTTP protobuf", http: true, new: func(ctx context.Context, addr string) (sdktrace.SpanExporter, error) {
		return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL("http://"+addr+"/v1/traces"))
	}},
	{name: "HTTP protobuf gzip", http: true, new: func(ctx context.Context, addr string) (sdktrace.SpanExporter, error) {
		return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL("http://"+addr+"/v1/traces"),
			otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	}},
	{name: "HTTP JSON", http: true, new: func(ctx context.Context, addr string) (sdktrace.SpanExporter, error) {
		return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL("http://"+addr+"/v1/traces"),
			otlptracehttp.WithEncoding(otlptracehttp.EncodingJSON))
	}},
}

// TestReceiverExporters sends an engine's llm_request span, in the trace
// of a probe, with the OpenTelemetry SDK's own OTLP exporters to the
// receiver's gRPC and HTTP servers: the probe's join gets its timing.
func TestReceiverExporters(t *testing.T) {
	for _, tc := range exporterCases {
		t.Run(tc.name, func(t *testing.T) {
			j := NewJoiner(time.Minute)
			recv := NewReceiver(j, nil, nil)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			served := make(chan error, 1)
			go func() {
				if tc.http {
					served <- recv.ServeHTTP(ln)
				} else {
					served <- recv.ServeGRPC(ln)
				}
			}()
			t.Cleanup(func() {
				recv.Close()
				select {
				case err := <-served:
					if err != nil {
						t.Errorf("serve returned %v after Close, want nil", err)
					}
				case <-time.After(10 * time.Second):
					t.Error("serve did not return within 10 s of Close")
				}
			})

			// The probe: its span registers its trace, its traceparent goes out.
			probeCtx, res := startProbe(t, probeProvider(t, j))
			hdr := http.Header{}
			propagation.TraceContext{}.Inject(probeCtx, propagation.HeaderCarrier(hdr))

			// The engine: a SERVER span under the traceparent it received.
			engineCtx := propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(hdr))
			rec := tracetest.NewSpanRecorder()
			engineTP := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			t.Cleanup(func() { _ = engineTP.Shutdown(context.Background()) })
			_, span := engineTP.Tracer("vllm.llm_engine").Start(engineCtx, SpanLLMRequest,
				trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(vllmKeyValues()...))
			span.End()
			if span.SpanContext().TraceID().String() != res.TraceID {
				t.Fatalf("engine span in trace %s, probe trace %s", span.SpanContext().TraceID(), res.TraceID)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			exp, err := tc.new(ctx, ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			if err := exp.ExportSpans(ctx, rec.Ended()); err != nil {
				t.Fatalf("export: %v", err)
			}
			if err := exp.Shutdown(ctx); err != nil {
				t.Errorf("exporter shutdown: %v", err)
			}

			w := newJoinWait()
			joined := j.Join(res, w.done) && w.calls.Load() == 1
			if !joined {
				t.Fatalf("the exported span was not joined when the export returned: counts %v", spanCounts(t, j))
			}
			if got := (<-w.ch).Engine; got != wantTraceTiming {
				t.Errorf("Engine =\n\t%+v\nwant\n\t%+v", got, wantTraceTiming)
			}
			checkCounts(t, j, map[string]float64{SpanJoined: 1})
		})
	}
}

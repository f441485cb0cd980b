package tracing

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"

	"github.com/slaprobe/slaprobe/prober"
)

// attackAttrs claim 10 s of queue, as an attacker who knows a trace id would.
func attackAttrs() []*commonpb.KeyValue {
	return []*commonpb.KeyValue{
		{Key: attrTimeInQueue, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 10}}},
		{Key: attrPrefill, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 0.001}}},
	}
}

func attrKind(k prober.RequestKind) attribute.KeyValue {
	return attribute.String(prober.AttrRequestKind, string(k))
}

// feedChild hands j one span of trace id with the given span and parent ids.
func feedChild(j *Joiner, id trace.TraceID, spanID, parent trace.SpanID, name string, attrs []*commonpb.KeyValue) {
	var p []byte
	if parent.IsValid() {
		p = parent[:]
	}
	j.addResourceSpans(exportChild(id, spanID, p, name, attrs).GetResourceSpans())
}

func probeSpanOf(t *testing.T, r prober.Result) trace.SpanID {
	t.Helper()
	sid, err := trace.SpanIDFromHex(probeSpanID(t, r))
	if err != nil {
		t.Fatal(err)
	}
	return sid
}

// timedResult gives r a 100 ms TTFT, so CheckEngine can judge its timing.
func timedResult(r prober.Result) prober.Result {
	start := time.Now()
	r.Start, r.FirstToken, r.LastToken, r.OutputTokens = start, start.Add(100*time.Millisecond), start.Add(130*time.Millisecond), 4
	return r
}

// TestJoinRejectsWrongParent: a span in a probe's trace that is not the
// child of the probe's span (whoever knows the trace id can send one)
// changes nothing and is counted rejected, before and after the real span.
func TestJoinRejectsWrongParent(t *testing.T) {
	j := NewJoiner(time.Minute)
	_, res := startProbe(t, probeProvider(t, j))
	res = timedResult(res)
	id, probe := traceIDOfResult(t, res), probeSpanOf(t, res)
	w := newJoinWait()
	if !j.Join(res, w.done) {
		t.Fatal("Join = false for a registered probe")
	}
	// Guessed parents: none, a random one, the trace id's halves.
	for _, parent := range []trace.SpanID{{}, {9, 9, 9, 9, 9, 9, 9, 9}, trace.SpanID(id[:8]), trace.SpanID(id[8:])} {
		feedChild(j, id, trace.SpanID{7, 7, 7, 7, 7, 7, 7, 7}, parent, SpanLLMRequest, attackAttrs())
	}
	w.pending(t)
	// The engine's span, the child of the probe's span.
	feedChild(j, id, trace.SpanID{1}, probe, SpanLLMRequest, vllmAttrs())
	got := w.wait(t)
	if got.Engine != wantTraceTiming {
		t.Errorf("Engine =\n\t%+v\nwant the engine's span\n\t%+v", got.Engine, wantTraceTiming)
	}
	checkCounts(t, j, map[string]float64{SpanJoined: 1, SpanRejected: 4})
	// After the join: a wrong parent is rejected, the right one late.
	feedChild(j, id, trace.SpanID{2}, trace.SpanID{3}, SpanLLMRequest, attackAttrs())
	feedChild(j, id, trace.SpanID{4}, probe, SpanLLMRequest, attackAttrs())
	checkCounts(t, j, map[string]float64{SpanJoined: 1, SpanRejected: 5, SpanLate: 1})
}

// TestJoinWrongParentOnly: with only wrong-parent spans the probe times out
// as source none; they are counted rejected when it does.
func TestJoinWrongParentOnly(t *testing.T) {
	j := NewJoiner(50 * time.Millisecond)
	_, res := startProbe(t, probeProvider(t, j))
	id := traceIDOfResult(t, res)
	// More than the joiner keeps: those beyond are rejected at once.
	for i := range maxOrphans + 3 {
		feedChild(j, id, trace.SpanID{byte(i + 1)}, trace.SpanID{0xee, byte(i)}, SpanLLMRequest, attackAttrs())
	}
	checkCounts(t, j, map[string]float64{SpanRejected: 3})
	w := newJoinWait()
	if !j.Join(timedResult(res), w.done) {
		t.Fatal("Join = false")
	}
	got := w.wait(t)
	if got.Engine != (prober.EngineTiming{Source: prober.TimingNone}) {
		t.Errorf("Engine = %+v, want source none", got.Engine)
	}
	checkCounts(t, j, map[string]float64{SpanRejected: maxOrphans + 3})
}

// TestJoinGatewayChain: behind a gateway that traces, the engine's span is
// the child of the gateway's span, itself the child of the probe's; the
// join follows that chain when the gateway's spans reach the receiver too,
// in whichever order they come.
func TestJoinGatewayChain(t *testing.T) {
	gw1, gw2, eng := trace.SpanID{0x91}, trace.SpanID{0x92}, trace.SpanID{0x93}
	type span struct {
		id, parent trace.SpanID // parent zero: the probe's span
		name       string
		attrs      []*commonpb.KeyValue
	}
	gateway := span{gw1, trace.SpanID{}, "envoy.proxy", nil}
	gateway2 := span{gw2, gw1, "gateway.route", nil}
	engine := span{eng, gw1, SpanLLMRequest, vllmAttrs()}
	engine2 := span{eng, gw2, SpanLLMRequest, vllmAttrs()}
	forged := span{trace.SpanID{0x66}, trace.SpanID{0x65}, "envoy.proxy", nil}
	forgedEngine := span{trace.SpanID{0x67}, trace.SpanID{0x66}, SpanLLMRequest, attackAttrs()}
	for _, tc := range []struct {
		name   string
		spans  []span
		want   prober.EngineTiming
		counts map[string]float64
	}{
		{"gateway first", []span{gateway, engine}, wantTraceTiming, map[string]float64{SpanJoined: 1, SpanIgnored: 1}},
		{"engine first (the gateway's span ends later)", []span{engine, gateway}, wantTraceTiming, map[string]float64{SpanJoined: 1, SpanIgnored: 1}},
		{"two gateway spans, last first", []span{engine2, gateway2, gateway}, wantTraceTiming, map[string]float64{SpanJoined: 1, SpanIgnored: 2}},
		{"a forged chain beside the real one", []span{forgedEngine, forged, engine, gateway}, wantTraceTiming,
			map[string]float64{SpanJoined: 1, SpanIgnored: 2, SpanRejected: 1}},
		{"a forged chain alone", []span{forgedEngine, forged}, prober.EngineTiming{Source: prober.TimingNone},
			map[string]float64{SpanIgnored: 1, SpanRejected: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := NewJoiner(200 * time.Millisecond)
			_, res := startProbe(t, probeProvider(t, j))
			res = timedResult(res)
			id, probe := traceIDOfResult(t, res), probeSpanOf(t, res)
			w := newJoinWait()
			if !j.Join(res, w.done) {
				t.Fatal("Join = false")
			}
			for _, s := range tc.spans {
				parent := s.parent
				if !parent.IsValid() {
					parent = probe
				}
				feedChild(j, id, s.id, parent, s.name, s.attrs)
			}
			if got := w.wait(t); got.Engine != tc.want {
				t.Errorf("Engine =\n\t%+v\nwant\n\t%+v", got.Engine, tc.want)
			}
			checkCounts(t, j, tc.counts)
		})
	}
}

// TestJoinTrustAnyParent: on an authenticated receiver (TrustAnyParent)
// the probe's trace is enough, whatever the parent.
func TestJoinTrustAnyParent(t *testing.T) {
	j := NewJoinerWith(JoinerOptions{Timeout: time.Minute, TrustAnyParent: true})
	_, res := startProbe(t, probeProvider(t, j))
	w := newJoinWait()
	if !j.Join(timedResult(res), w.done) {
		t.Fatal("Join = false")
	}
	feedChild(j, traceIDOfResult(t, res), trace.SpanID{1}, trace.SpanID{0xab}, SpanLLMRequest, vllmAttrs())
	if got := w.wait(t); got.Engine != wantTraceTiming {
		t.Errorf("Engine = %+v, want %+v", got.Engine, wantTraceTiming)
	}
	checkCounts(t, j, map[string]float64{SpanJoined: 1})
}

// TestJoinImplausible: the probe's own engine span, its timing absurd,
// leaves the probe at source none and is counted implausible, whether it
// came before Join or after.
func TestJoinImplausible(t *testing.T) {
	huge := func(v float64) []*commonpb.KeyValue {
		return []*commonpb.KeyValue{{Key: attrTimeInQueue, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v}}}}
	}
	for _, tc := range []struct {
		name   string
		attrs  []*commonpb.KeyValue
		before bool
		reason string
	}{
		{"10 s of queue on a 100 ms TTFT, after Join", attackAttrs(), false, prober.ImplausibleExceedsTTFT},
		{"10 s of queue on a 100 ms TTFT, before Join", attackAttrs(), true, prober.ImplausibleExceedsTTFT},
		{"1e10 s", huge(1e10), false, prober.ImplausibleInvalid},
		{"negative", huge(-1), true, prober.ImplausibleInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := NewJoiner(time.Minute)
			_, res := startProbe(t, probeProvider(t, j))
			res = timedResult(res)
			w := newJoinWait()
			if tc.before {
				feed(j, traceIDOfResult(t, res), SpanLLMRequest, tc.attrs)
			}
			if !j.Join(res, w.done) {
				t.Fatal("Join = false")
			}
			if !tc.before {
				feed(j, traceIDOfResult(t, res), SpanLLMRequest, tc.attrs)
			}
			got := w.wait(t)
			want := prober.EngineTiming{Source: prober.TimingNone, Dropped: prober.TimingDrop{From: prober.TimingTrace, Reason: tc.reason}}
			if got.Engine != want {
				t.Errorf("Engine = %+v, want %+v", got.Engine, want)
			}
			if _, ok := got.Split(); ok {
				t.Error("an implausible span split the TTFT")
			}
			checkCounts(t, j, map[string]float64{SpanImplausible: 1})
		})
	}
}

// TestJoinSkip: a probe that does not wait (its response carried the
// timing, or its TTFT is not recorded) has its span counted ignored, not
// joined, whichever comes first.
func TestJoinSkip(t *testing.T) {
	j := NewJoiner(time.Minute)
	tp := probeProvider(t, j)
	_, early := startProbe(t, tp)
	feed(j, traceIDOfResult(t, early), SpanLLMRequest, vllmAttrs())
	j.Skip(early)
	_, late := startProbe(t, tp)
	j.Skip(late)
	feed(j, traceIDOfResult(t, late), SpanLLMRequest, vllmAttrs())
	checkCounts(t, j, map[string]float64{SpanIgnored: 2})
	w := newJoinWait()
	if j.Join(early, w.done) || j.Join(late, w.done) {
		t.Error("Join after Skip = true")
	}
}

// TestJoinOnlyScheduledProbes: sweep and /probe requests are not
// registered, so their spans count as other and never as joined.
func TestJoinOnlyScheduledProbes(t *testing.T) {
	j := NewJoiner(time.Minute)
	tp, err := NewTracerProvider(ExportOptions{SweepRatio: 1}, j)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	for _, k := range []prober.RequestKind{prober.RequestScheduled, prober.RequestWarm, prober.RequestSweep, prober.RequestProbe} {
		_, span := tp.Tracer(prober.TracerName).Start(context.Background(), prober.ProbeSpanName,
			trace.WithAttributes(attrKind(k)))
		span.End()
		id := span.SpanContext().TraceID()
		feedChild(j, id, trace.SpanID{1}, span.SpanContext().SpanID(), SpanLLMRequest, vllmAttrs())
		w := newJoinWait()
		joined := j.Join(prober.Result{TraceID: id.String()}, w.done)
		if joined != k.Recorded() {
			t.Errorf("%s: Join = %v, want %v", k, joined, k.Recorded())
		}
	}
	checkCounts(t, j, map[string]float64{SpanJoined: 2, SpanOther: 2})
}

// TestJoinMaxProbes: the joiner holds at most MaxProbes probes; at the
// limit it first forgets settled ones, then refuses and counts.
func TestJoinMaxProbes(t *testing.T) {
	now := time.Unix(1e9, 0)
	j := NewJoinerWith(JoinerOptions{Timeout: time.Minute, MaxProbes: 3})
	j.now = func() time.Time { return now }
	tp := probeProvider(t, j)
	var rs []prober.Result
	for range 4 {
		_, r := startProbe(t, tp)
		rs = append(rs, r)
	}
	w := newJoinWait()
	if j.Join(rs[3], w.done) {
		t.Error("the probe beyond MaxProbes was registered")
	}
	if n := j.Held(); n != 3 {
		t.Errorf("Held = %d, want 3", n)
	}
	if v := counterOf(t, j.overflow); v != 1 {
		t.Errorf("slaprobe_engine_join_overflow_total = %v, want 1", v)
	}
	// One settles; a second later the next probe takes its place.
	j.Skip(rs[0])
	now = now.Add(2 * time.Second)
	_, r := startProbe(t, tp)
	if !j.Join(r, w.done) {
		t.Error("a probe was refused although a settled one could make room")
	}
	if n := j.Held(); n != 3 {
		t.Errorf("Held = %d, want 3", n)
	}
	if v := counterOf(t, j.overflow); v != 1 {
		t.Errorf("slaprobe_engine_join_overflow_total = %v, want still 1", v)
	}
}

func counterOf(t *testing.T, c interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestHoldExport: a probe's span reaches the exporter only once its join
// is settled, so its span id is not published while a span could still
// set its split; a sweep's span goes at once.
func TestHoldExport(t *testing.T) {
	j := NewJoiner(time.Minute)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithSpanProcessor(j.SpanProcessor()), sdktrace.WithSpanProcessor(j.HoldExport(rec)))
	start := func(k prober.RequestKind) prober.Result {
		_, span := tp.Tracer(prober.TracerName).Start(context.Background(), prober.ProbeSpanName, trace.WithAttributes(attrKind(k)))
		span.End()
		probeSpans.Store(span.SpanContext().TraceID(), span.SpanContext().SpanID())
		return timedResult(prober.Result{Kind: prober.KindSuccess, TraceID: span.SpanContext().TraceID().String()})
	}
	sweep := start(prober.RequestSweep)
	if n := len(rec.Ended()); n != 1 {
		t.Fatalf("%d spans exported after a sweep request's span ended, want 1", n)
	}
	joined, skipped := start(prober.RequestScheduled), start(prober.RequestScheduled)
	if n := len(rec.Ended()); n != 1 {
		t.Fatalf("%d spans exported before the probes' joins settled, want only the sweep's", n)
	}
	w := newJoinWait()
	if !j.Join(joined, w.done) {
		t.Fatal("Join = false")
	}
	if n := len(rec.Ended()); n != 1 {
		t.Fatalf("%d spans exported while the probe waits, want 1", n)
	}
	feed(j, traceIDOfResult(t, joined), SpanLLMRequest, vllmAttrs())
	w.wait(t)
	j.Skip(skipped)
	var got []string
	for _, s := range rec.Ended() {
		got = append(got, s.SpanContext().TraceID().String())
	}
	if len(got) != 3 || got[0] != sweep.TraceID || got[1] != joined.TraceID || got[2] != skipped.TraceID {
		t.Errorf("exported %v, want the sweep's, then the joined probe's, then the skipped one's", got)
	}
	// Shutdown passes on what is still held.
	held := start(prober.RequestWarm)
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Ended()); n != 4 || rec.Ended()[3].SpanContext().TraceID().String() != held.TraceID {
		t.Errorf("%d spans exported after Shutdown, want 4, the held one last", n)
	}
}

// TestSweepSampling: scheduled probes are always sampled (their
// traceparent asks the engine to trace them); sweep and /probe requests at
// the ratio.
func TestSweepSampling(t *testing.T) {
	for _, ratio := range []float64{0, 0.25, 1} {
		tp, err := NewTracerProvider(ExportOptions{SweepRatio: ratio}, nil)
		if err != nil {
			t.Fatal(err)
		}
		counts := map[prober.RequestKind]int{}
		const n = 2000
		for _, k := range []prober.RequestKind{prober.RequestScheduled, prober.RequestWarm, prober.RequestSweep, prober.RequestProbe} {
			for range n {
				_, span := tp.Tracer(prober.TracerName).Start(context.Background(), prober.ProbeSpanName, trace.WithAttributes(attrKind(k)))
				if span.SpanContext().IsSampled() {
					counts[k]++
				}
				if !span.SpanContext().IsValid() {
					t.Fatalf("%s: an unsampled span has no trace id to send", k)
				}
				span.End()
			}
		}
		_ = tp.Shutdown(context.Background())
		if counts[prober.RequestScheduled] != n || counts[prober.RequestWarm] != n {
			t.Errorf("ratio %v: %d scheduled and %d warm spans of %d sampled, want all", ratio, counts[prober.RequestScheduled], counts[prober.RequestWarm], n)
		}
		for _, k := range []prober.RequestKind{prober.RequestSweep, prober.RequestProbe} {
			got, want := float64(counts[k])/n, ratio
			if got < want-0.05 || got > want+0.05 {
				t.Errorf("ratio %v: %s spans sampled %.3f of the time, want %v ± 0.05", ratio, k, got, want)
			}
		}
	}
	for _, bad := range []float64{-0.1, 1.5} {
		if _, err := NewTracerProvider(ExportOptions{SweepRatio: bad}, nil); err == nil {
			t.Errorf("SweepRatio %v accepted", bad)
		}
	}
}

// Package tracing is slaprobe's side of distributed tracing. Every probe is
// a span (prober/trace.go) whose traceparent goes out with the request; this
// package exports those spans over OTLP (export.go), receives the engine's
// own spans over OTLP gRPC and HTTP (receiver.go), and joins each engine
// span to the probe that caused it by trace id (this file), so a probe whose
// response carried no per-request timing gets its queue and prefill from
// the engine's trace instead.
package tracing

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/slaprobe/slaprobe/prober"
)

// DefaultJoinTimeout is how long a probe waits for its engine span. vLLM
// sends spans in batches every 5 s; a collector in between adds its own.
const DefaultJoinTimeout = 30 * time.Second

// keepProbe is how long a probe's trace id is remembered after its span
// started, to recognise its engine span: longer than any probe plus the
// join timeout.
const keepProbe = 30 * time.Minute

// Span outcomes, the `result` label of slaprobe_engine_spans_received_total.
const (
	SpanJoined  = "joined"  // an llm_request span of a probe, in time
	SpanLate    = "late"    // a probe's llm_request span after its join timeout
	SpanOther   = "other"   // a span of a request slaprobe did not send
	SpanIgnored = "ignored" // a span of a probe that is not an llm_request
)

// Joiner joins engine spans to probes by trace id. Probe trace ids are
// registered when the probe span starts (SpanProcessor), so spans of other
// requests, which an engine with tracing on sends for all its traffic, are
// counted and dropped without being kept. Safe for concurrent use.
type Joiner struct {
	timeout time.Duration
	now     func() time.Time
	spans   *prometheus.CounterVec

	mu        sync.Mutex
	probes    map[trace.TraceID]*entry
	lastSweep time.Time
}

type entry struct {
	started time.Time
	timing  *prober.EngineTiming // from the engine's span, once it came
	settled bool                 // the probe's timing was handed on (joined or timed out)

	waiting *prober.Result // a probe waiting for its span
	done    func(prober.Result)
	timer   *time.Timer
}

// NewJoiner returns a Joiner that waits timeout (DefaultJoinTimeout when
// <= 0) for a probe's engine span.
func NewJoiner(timeout time.Duration) *Joiner {
	if timeout <= 0 {
		timeout = DefaultJoinTimeout
	}
	return &Joiner{
		timeout: timeout,
		now:     time.Now,
		probes:  map[trace.TraceID]*entry{},
		spans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "slaprobe", Name: "engine_spans_received_total",
			Help: "Spans received on the OTLP receiver, by result: joined (an engine's llm_request span of a probe, in time; also when the probe's response already carried the engine's timing), late (after the probe's join timeout), other (a request slaprobe did not send), ignored (another span of a probe's trace).",
		}, []string{"result"}),
	}
}

// Collector exports slaprobe_engine_spans_received_total.
func (j *Joiner) Collector() prometheus.Collector {
	for _, r := range []string{SpanJoined, SpanLate, SpanOther, SpanIgnored} {
		j.spans.WithLabelValues(r)
	}
	return j.spans
}

// Timeout is how long Join waits for a span.
func (j *Joiner) Timeout() time.Duration { return j.timeout }

// expect registers a probe's trace id.
func (j *Joiner) expect(id trace.TraceID) {
	now := j.now()
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.probes[id]; !ok {
		j.probes[id] = &entry{started: now}
	}
	if now.Sub(j.lastSweep) > time.Minute {
		j.lastSweep = now
		for k, e := range j.probes {
			if now.Sub(e.started) > keepProbe && e.waiting == nil {
				delete(j.probes, k)
			}
		}
	}
}

// Join settles r's engine timing from its trace: done gets r with Engine
// from the probe's llm_request span (Source prober.TimingTrace) once it
// arrives, or with Source prober.TimingNone after the join timeout. done
// runs at most once, on the caller's goroutine when the span is already
// here, else on another. Join reports false, and never calls done, when r
// has no trace id that a probe span registered.
func (j *Joiner) Join(r prober.Result, done func(prober.Result)) bool {
	id, err := trace.TraceIDFromHex(r.TraceID)
	if err != nil {
		return false
	}
	j.mu.Lock()
	e, ok := j.probes[id]
	if !ok || e.settled || e.waiting != nil {
		j.mu.Unlock()
		return false
	}
	if e.timing != nil {
		e.settled = true
		r.Engine = *e.timing
		j.mu.Unlock()
		done(r)
		return true
	}
	e.waiting, e.done = &r, done
	e.timer = time.AfterFunc(j.timeout, func() { j.expire(id) })
	j.mu.Unlock()
	return true
}

// expire hands on a probe whose span did not come in time.
func (j *Joiner) expire(id trace.TraceID) {
	j.mu.Lock()
	e, ok := j.probes[id]
	if !ok || e.waiting == nil {
		j.mu.Unlock()
		return
	}
	r, done := *e.waiting, e.done
	e.waiting, e.done, e.settled = nil, nil, true
	j.mu.Unlock()
	r.Engine = prober.EngineTiming{Source: prober.TimingNone}
	done(r)
}

// addSpan takes one received span.
func (j *Joiner) addSpan(id trace.TraceID, name string, timing func() (prober.EngineTiming, bool)) {
	j.mu.Lock()
	e, ok := j.probes[id]
	switch {
	case !ok:
		j.mu.Unlock()
		j.spans.WithLabelValues(SpanOther).Inc()
		return
	case name != SpanLLMRequest:
		j.mu.Unlock()
		j.spans.WithLabelValues(SpanIgnored).Inc()
		return
	case e.settled:
		j.mu.Unlock()
		j.spans.WithLabelValues(SpanLate).Inc()
		return
	}
	t, ok := timing()
	if !ok {
		j.mu.Unlock()
		j.spans.WithLabelValues(SpanIgnored).Inc()
		return
	}
	j.spans.WithLabelValues(SpanJoined).Inc()
	if e.waiting == nil {
		e.timing = &t // the span came before the probe was observed
		j.mu.Unlock()
		return
	}
	r, done := *e.waiting, e.done
	e.timer.Stop()
	e.waiting, e.done, e.settled = nil, nil, true
	j.mu.Unlock()
	r.Engine = t
	done(r)
}

// Pending is the number of probes waiting for their span.
func (j *Joiner) Pending() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, e := range j.probes {
		if e.waiting != nil {
			n++
		}
	}
	return n
}

// SpanProcessor registers the trace id of every probe span as it starts;
// add it to the probe's TracerProvider (NewTracerProvider does).
func (j *Joiner) SpanProcessor() sdktrace.SpanProcessor { return startHook{j} }

type startHook struct{ j *Joiner }

func (h startHook) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	if s.Name() == prober.ProbeSpanName {
		h.j.expect(s.SpanContext().TraceID())
	}
}
func (startHook) OnEnd(sdktrace.ReadOnlySpan)      {}
func (startHook) Shutdown(context.Context) error   { return nil }
func (startHook) ForceFlush(context.Context) error { return nil }

package prober

// This file holds the probe's side of distributed tracing: every probe is a
// span of its own, whose W3C traceparent (sampled) goes out with the request,
// so an engine that traces (vLLM --otlp-traces-endpoint, SGLang, TGI) puts
// its span for the request in the probe's trace.

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// TracerName names the probe spans' instrumentation scope.
const TracerName = "github.com/slaprobe/slaprobe/prober"

// ProbeSpanName is the name of the span each probe request makes.
const ProbeSpanName = "slaprobe.probe"

// Probe span event names, stamped when the bytes arrived.
const (
	EventFirstByte  = "first_byte"  // the response's headers arrived
	EventFirstToken = "first_token" // the first chunk carrying output arrived
	EventLastToken  = "last_token"
)

// AttrRequestKind is the probe span attribute naming what sent the request
// (a RequestKind): a trace back end, and slaprobe's own joiner and sampler,
// tell scheduled probes from sweep and /probe traffic by it.
const AttrRequestKind = "slaprobe.probe.kind"

// RequestKind is what sent a request through the prober.
type RequestKind string

const (
	// RequestScheduled: a scheduled probe of a cold scenario.
	RequestScheduled RequestKind = "scheduled"
	// RequestWarm: a turn of a scheduled warm scenario's conversation.
	RequestWarm RequestKind = "warm"
	// RequestSweep: a request of a sweep (or a bench run).
	RequestSweep RequestKind = "sweep"
	// RequestProbe: a probe asked for on /probe.
	RequestProbe RequestKind = "probe"
)

// Recorded reports whether requests of kind k are scheduled probes, whose
// metrics (the TTFT split among them) slaprobe records: only they wait
// for the engine's span.
func (k RequestKind) Recorded() bool { return k == RequestScheduled || k == RequestWarm }

type requestKindKey struct{}

// WithRequestKind marks the requests sent with ctx as k's. The scheduler
// sends none: a request without a kind is a scheduled probe.
func WithRequestKind(ctx context.Context, k RequestKind) context.Context {
	return context.WithValue(ctx, requestKindKey{}, k)
}

// requestKindOf is ctx's kind, else a scheduled probe's (warm from turn 1).
func requestKindOf(ctx context.Context, turn int) RequestKind {
	if k, ok := ctx.Value(requestKindKey{}).(RequestKind); ok && k != "" {
		return k
	}
	if turn >= 1 {
		return RequestWarm
	}
	return RequestScheduled
}

// RequestIDHeader is the request id header every probe sends, so an engine
// that logs or tags request ids (vLLM's X-Request-Id) names the probe.
const RequestIDHeader = "X-Request-Id"

var traceContext = propagation.TraceContext{}

// defaultTracerProvider samples every span and exports none: the probe still
// sends a real, sampled traceparent, so an engine's spans carry the probe's
// trace id even when slaprobe exports no spans of its own.
func defaultTracerProvider() trace.TracerProvider {
	return sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
}

// SetTracerProvider sets where probe spans go (an SDK provider with an OTLP
// exporter, say). A nil tp restores the default, which exports nothing.
// A provider must sample the probe spans for the engine to trace them.
func (p *Prober) SetTracerProvider(tp trace.TracerProvider) {
	if tp == nil {
		tp = defaultTracerProvider()
	}
	p.tracer.Store(tracerBox{tp.Tracer(TracerName)})
}

type tracerBox struct{ t trace.Tracer }

func (p *Prober) getTracer() trace.Tracer {
	if b, ok := p.tracer.Load().(tracerBox); ok {
		return b.t
	}
	return noop.NewTracerProvider().Tracer(TracerName)
}

// startProbeSpan starts the probe's span at start and puts its context in
// req's headers (traceparent and X-Request-Id). It records the ids in res.
func (p *Prober) startProbeSpan(ctx context.Context, req *http.Request, prep *Prepared, turn int, start time.Time, res *Result) trace.Span {
	_, span := p.getTracer().Start(ctx, ProbeSpanName,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(start),
		trace.WithAttributes(
			attribute.String(AttrRequestKind, string(requestKindOf(ctx, turn))),
			attribute.String("slaprobe.target", prep.Target),
			attribute.String("slaprobe.scenario", prep.Scenario.Name),
			attribute.String("slaprobe.api", string(prep.API)),
			attribute.Int("slaprobe.turn", turn),
			attribute.String("gen_ai.request.model", prep.Model),
			attribute.Int("gen_ai.request.max_tokens", prep.Scenario.OutputTokens),
		))
	sc := span.SpanContext()
	if sc.IsValid() {
		traceContext.Inject(trace.ContextWithSpanContext(ctx, sc), propagation.HeaderCarrier(req.Header))
		res.TraceID = sc.TraceID().String()
		res.RequestID = "slaprobe-" + res.TraceID
		req.Header.Set(RequestIDHeader, res.RequestID)
	}
	return span
}

// endProbeSpan adds what the probe measured to its span and ends it at end.
func endProbeSpan(span trace.Span, res *Result, end time.Time) {
	if !span.IsRecording() {
		span.End(trace.WithTimestamp(end))
		return
	}
	if !res.FirstByte.IsZero() {
		span.AddEvent(EventFirstByte, trace.WithTimestamp(res.FirstByte))
	}
	if !res.FirstToken.IsZero() {
		span.AddEvent(EventFirstToken, trace.WithTimestamp(res.FirstToken))
		span.AddEvent(EventLastToken, trace.WithTimestamp(res.LastToken))
	}
	attrs := []attribute.KeyValue{
		attribute.String("slaprobe.result", string(res.Kind)),
		attribute.Int("gen_ai.usage.input_tokens", res.PromptTokens),
		attribute.Int("gen_ai.usage.output_tokens", res.OutputTokens),
	}
	if res.ResponseID != "" {
		attrs = append(attrs, attribute.String("gen_ai.response.id", res.ResponseID))
	}
	if res.Timed() {
		attrs = append(attrs, attribute.Float64("slaprobe.ttft_seconds", res.TTFT().Seconds()))
	}
	span.SetAttributes(attrs...)
	if res.Kind == KindError {
		msg := string(res.Reason)
		if res.Err != nil {
			msg += ": " + res.Err.Error()
		}
		span.SetStatus(codes.Error, msg)
		span.SetAttributes(attribute.String("error.type", string(res.Reason)))
	}
	span.End(trace.WithTimestamp(end))
}

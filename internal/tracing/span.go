package tracing

import (
	"time"

	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/slaprobe/slaprobe/prober"
)

// vLLM's request span (vllm/tracing.py): one SERVER span per request, sent
// when it ends, its latencies in seconds. SGLang and TGI name theirs
// differently; their spans are counted as ignored until we read them.
const (
	SpanLLMRequest = "llm_request"

	attrTimeInQueue     = "gen_ai.latency.time_in_queue"
	attrPrefill         = "gen_ai.latency.time_in_model_prefill"
	attrDecode          = "gen_ai.latency.time_in_model_decode"
	attrCompletionToken = "gen_ai.usage.completion_tokens"
)

// spanTiming reads the engine timing of a vLLM llm_request span: queue from
// time_in_queue, prefill from time_in_model_prefill (scheduled to first
// token), decode from time_in_model_decode and the mean ITL from decode
// over completion tokens − 1. ok is false when the span has none of them;
// a latency that is no usable duration (negative, not finite, over
// prober.MaxEngineDuration) sets Invalid, and the join drops the timing.
func spanTiming(attrs []*commonpb.KeyValue) (prober.EngineTiming, bool) {
	var e prober.EngineTiming
	completion := -1
	for _, kv := range attrs {
		switch kv.GetKey() {
		case attrTimeInQueue:
			e.Queue, e.HasQueue = seconds(&e, kv.GetValue())
		case attrPrefill:
			e.Prefill, e.HasPrefill = seconds(&e, kv.GetValue())
		case attrDecode:
			e.Decode, e.HasDecode = seconds(&e, kv.GetValue())
		case attrCompletionToken:
			if v, ok := number(kv.GetValue()); ok && v >= 0 && v <= maxCompletionTokens {
				completion = int(v)
			}
		}
	}
	if e.HasDecode && completion >= 2 {
		e.ITL, e.HasITL = e.Decode/time.Duration(completion-1), true
	}
	if !e.Reported() && !e.Invalid {
		return prober.EngineTiming{}, false
	}
	e.Source = prober.TimingTrace
	return e, true
}

// maxCompletionTokens bounds the token count read from a span, so its
// conversion to int is exact.
const maxCompletionTokens = 1 << 40

func number(v *commonpb.AnyValue) (float64, bool) {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue, true
	case *commonpb.AnyValue_IntValue:
		return float64(x.IntValue), true
	}
	return 0, false
}

// seconds reads a latency in seconds; a number that is no usable duration
// sets e.Invalid.
func seconds(e *prober.EngineTiming, v *commonpb.AnyValue) (time.Duration, bool) {
	f, ok := number(v)
	if !ok {
		return 0, false
	}
	d, ok := prober.DurationOf(f, time.Second)
	if !ok {
		e.Invalid = true
	}
	return d, ok
}

// addResourceSpans hands every span of an OTLP export to the joiner.
func (j *Joiner) addResourceSpans(rss []*tracepb.ResourceSpans) (spans int) {
	for _, rs := range rss {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				spans++
				id, ok := traceIDOf(s.GetTraceId())
				if !ok {
					j.spans.WithLabelValues(SpanOther).Inc()
					continue
				}
				attrs := s.GetAttributes()
				j.addSpan(id, spanIDOf(s.GetSpanId()), spanIDOf(s.GetParentSpanId()), s.GetName(),
					func() (prober.EngineTiming, bool) { return spanTiming(attrs) })
			}
		}
	}
	return spans
}

// spanIDOf reads an 8-byte OTLP span id; anything else is the zero
// (invalid) id, which is no probe's.
func spanIDOf(b []byte) trace.SpanID {
	var id trace.SpanID
	if len(b) == len(id) {
		copy(id[:], b)
	}
	return id
}

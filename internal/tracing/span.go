package tracing

import (
	"math"
	"time"

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
// over completion tokens − 1. ok is false when the span has none of them.
func spanTiming(attrs []*commonpb.KeyValue) (prober.EngineTiming, bool) {
	var e prober.EngineTiming
	completion := -1
	for _, kv := range attrs {
		switch kv.GetKey() {
		case attrTimeInQueue:
			e.Queue, e.HasQueue = seconds(kv.GetValue())
		case attrPrefill:
			e.Prefill, e.HasPrefill = seconds(kv.GetValue())
		case attrDecode:
			e.Decode, e.HasDecode = seconds(kv.GetValue())
		case attrCompletionToken:
			if v, ok := number(kv.GetValue()); ok && v >= 0 {
				completion = int(v)
			}
		}
	}
	if e.HasDecode && completion >= 2 {
		e.ITL, e.HasITL = e.Decode/time.Duration(completion-1), true
	}
	if !e.Reported() {
		return prober.EngineTiming{}, false
	}
	e.Source = prober.TimingTrace
	return e, true
}

func number(v *commonpb.AnyValue) (float64, bool) {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue, true
	case *commonpb.AnyValue_IntValue:
		return float64(x.IntValue), true
	}
	return 0, false
}

func seconds(v *commonpb.AnyValue) (time.Duration, bool) {
	f, ok := number(v)
	if !ok || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return time.Duration(math.Round(f * float64(time.Second))), true
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
				j.addSpan(id, s.GetName(), func() (prober.EngineTiming, bool) { return spanTiming(attrs) })
			}
		}
	}
	return spans
}

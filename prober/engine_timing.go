package prober

// This file holds what the engine itself says about one request's time:
// its queue, its prefill and its decode pace, read from the response
// (vLLM's per-request `metrics`, llama.cpp's `timings`) or from the engine's
// trace span, and the split of the client's TTFT that follows from them.

import (
	"math"
	"time"

	"github.com/valyala/fastjson"
)

// TimingSource says where a probe's engine timing came from; it is the
// `source` label of slaprobe_probe_engine_timing_total.
type TimingSource string

const (
	// TimingNone: the engine reported nothing for this probe (an engine
	// without per-request timing, or its trace never came). Not a zero.
	TimingNone TimingSource = "none"
	// TimingResponse: read from the response itself.
	TimingResponse TimingSource = "response"
	// TimingTrace: read from the engine's trace span, joined by trace id.
	TimingTrace TimingSource = "trace"
)

// TimingSources lists every source, so counters can be initialised.
var TimingSources = []TimingSource{TimingResponse, TimingTrace, TimingNone}

// EngineTiming is the engine's own account of one request. A part the
// engine did not report is absent (its Has flag false), never zero.
type EngineTiming struct {
	Source TimingSource // "" until the probe's timing is settled

	// Queue is the time the request waited in the engine's scheduler.
	Queue    time.Duration
	HasQueue bool
	// Prefill is the time from being scheduled to the first token.
	Prefill    time.Duration
	HasPrefill bool
	// ITL is the engine's own mean inter-token latency.
	ITL    time.Duration
	HasITL bool
	// Decode is the time from the first to the last token, as the engine saw it.
	Decode    time.Duration
	HasDecode bool
}

// Reported reports whether the engine said anything about the request.
func (e EngineTiming) Reported() bool {
	return e.HasQueue || e.HasPrefill || e.HasITL || e.HasDecode
}

// Split is a client TTFT cut where the time went: outside the engine
// (network, gateway, proxy, the API server's parsing and tokenization),
// in the engine's queue, and in prefill. Outside + Queue + Prefill = TTFT.
type Split struct {
	Outside, Queue, Prefill time.Duration
}

// Split divides r's TTFT by its engine timing; ok is false when r has no
// TTFT or the engine did not report both its queue and its prefill. Outside
// may come out slightly negative when the two clocks disagree by less than
// the client's own overhead; it is not clamped, so a mean stays honest.
func (r *Result) Split() (Split, bool) {
	e := r.Engine
	if !r.Timed() || !e.HasQueue || !e.HasPrefill {
		return Split{}, false
	}
	ttft := r.TTFT()
	return Split{Outside: ttft - e.Queue - e.Prefill, Queue: e.Queue, Prefill: e.Prefill}, true
}

// msDuration converts a count of milliseconds to a Duration.
func msDuration(ms float64) time.Duration {
	return time.Duration(math.Round(ms * float64(time.Millisecond)))
}

// secDuration converts seconds to a Duration.
func secDuration(s float64) time.Duration {
	return time.Duration(math.Round(s * float64(time.Second)))
}

// optMillis reads an optional, non-negative number of milliseconds: absent,
// null or not a number is not reported.
func optMillis(v *fastjson.Value) (time.Duration, bool) {
	if v == nil || v.Type() != fastjson.TypeNumber {
		return 0, false
	}
	f, err := v.Float64()
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return msDuration(f), true
}

// vllmMetrics reads vLLM's per-request `metrics` object
// (--enable-per-request-metrics): queue_time_ms, time_to_first_token_ms
// (from being scheduled, so the queue is not in it), generation_time_ms and
// mean_itl_ms, each nullable. A null object (n > 1) reports nothing.
func vllmMetrics(v *fastjson.Value) (EngineTiming, bool) {
	if v == nil || v.Type() != fastjson.TypeObject {
		return EngineTiming{}, false
	}
	var e EngineTiming
	e.Queue, e.HasQueue = optMillis(v.Get("queue_time_ms"))
	e.Prefill, e.HasPrefill = optMillis(v.Get("time_to_first_token_ms"))
	e.Decode, e.HasDecode = optMillis(v.Get("generation_time_ms"))
	e.ITL, e.HasITL = optMillis(v.Get("mean_itl_ms"))
	if !e.Reported() {
		return EngineTiming{}, false
	}
	e.Source = TimingResponse
	return e, true
}

// llamaTimings reads llama.cpp server's `timings` object: prompt_ms is the
// prompt's processing (prefill), predicted_ms the decode. llama.cpp starts
// predicted_ms when it samples the first token, so it spans predicted_n − 1
// token gaps: the mean ITL is predicted_ms / (predicted_n − 1), as vLLM
// defines it (llama.cpp's own predicted_per_token_ms divides by
// predicted_n). llama.cpp does not report a queue time.
func llamaTimings(v *fastjson.Value) (EngineTiming, bool) {
	if v == nil || v.Type() != fastjson.TypeObject {
		return EngineTiming{}, false
	}
	var e EngineTiming
	e.Prefill, e.HasPrefill = optMillis(v.Get("prompt_ms"))
	if d, ok := optMillis(v.Get("predicted_ms")); ok {
		e.Decode, e.HasDecode = d, true
		if n, ok := jsonCount(v.Get("predicted_n")); ok && n > 1 {
			e.ITL, e.HasITL = d/time.Duration(n-1), true
		}
	}
	if !e.Reported() {
		return EngineTiming{}, false
	}
	e.Source = TimingResponse
	return e, true
}

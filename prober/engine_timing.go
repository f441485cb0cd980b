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
	// TimingTrace: read from the engine's trace span, the child of the
	// probe's span in its trace (internal/tracing).
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

	// Invalid is set when a part the engine sent is no usable duration:
	// not finite, negative, or over MaxEngineDuration (CheckEngine drops
	// such a timing).
	Invalid bool
	// Dropped says, on a timing CheckEngine dropped (Source TimingNone),
	// where it came from and why; zero otherwise.
	Dropped TimingDrop
}

// TimingDrop is an engine timing that was dropped as implausible.
type TimingDrop struct {
	From   TimingSource // response or trace
	Reason string       // ImplausibleInvalid or ImplausibleExceedsTTFT
}

// Why an engine timing was dropped: the `reason` label of
// slaprobe_probe_engine_timing_implausible_total.
const (
	// ImplausibleInvalid: a part is not finite, negative, or longer than
	// MaxEngineDuration.
	ImplausibleInvalid = "invalid"
	// ImplausibleExceedsTTFT: queue + prefill is longer than the client's
	// own TTFT plus EngineTimingTolerance. The engine's interval lies inside
	// the client's (the request reaches the engine after it left the client,
	// the first token leaves the engine before the client reads it), so
	// such a timing is not the engine's account of this request.
	ImplausibleExceedsTTFT = "exceeds_ttft"
)

// ImplausibleReasons lists every reason, so counters can be initialised.
var ImplausibleReasons = []string{ImplausibleInvalid, ImplausibleExceedsTTFT}

// EngineTimingTolerance is how much longer than the client's TTFT the
// engine's queue + prefill may be: rounding of the engine's figures (vLLM's
// milliseconds, a span's float seconds) and timer granularity, never a
// real part of the request.
const EngineTimingTolerance = 10 * time.Millisecond

// MaxEngineDuration is the longest part of an engine timing taken as a
// duration: a day, far beyond any probe and far below where a
// time.Duration overflows (about 292 years, 9.2e9 s).
const MaxEngineDuration = 24 * time.Hour

// DurationOf converts v units (time.Second, time.Millisecond) to a
// Duration; ok is false when v is not finite, is negative or is longer
// than MaxEngineDuration, so the conversion can never overflow.
func DurationOf(v float64, unit time.Duration) (time.Duration, bool) {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > MaxEngineDuration.Seconds()*float64(time.Second/unit) {
		return 0, false
	}
	return time.Duration(math.Round(v * float64(unit))), true
}

// CheckEngine drops r's engine timing when it is implausible: a part not
// usable (Invalid), or queue + prefill longer than r's own TTFT plus
// EngineTimingTolerance. A dropped timing leaves Engine with Source
// TimingNone and Dropped set; CheckEngine returns its reason ("" when the
// timing stands, or there is none, or r has no TTFT to judge it by:
// nothing of an untimed probe is recorded).
func (r *Result) CheckEngine() string {
	e := r.Engine
	if !e.Reported() && !e.Invalid {
		return ""
	}
	reason := ""
	switch {
	case e.Invalid || e.Queue < 0 || e.Prefill < 0 || e.Decode < 0 || e.ITL < 0:
		reason = ImplausibleInvalid
	case r.Timed() && (e.HasQueue || e.HasPrefill):
		var inside time.Duration
		if e.HasQueue {
			inside += e.Queue
		}
		if e.HasPrefill {
			inside += e.Prefill
		}
		if inside > r.TTFT()+EngineTimingTolerance {
			reason = ImplausibleExceedsTTFT
		}
	}
	if reason == "" {
		return ""
	}
	from := e.Source
	if from == "" || from == TimingNone {
		from = TimingResponse
	}
	r.Engine = EngineTiming{Source: TimingNone, Dropped: TimingDrop{From: from, Reason: reason}}
	return reason
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

// optMillis reads an optional number of milliseconds: absent, null or not
// a number is not reported; a number that is no usable duration (negative,
// not finite, over MaxEngineDuration) sets e.Invalid.
func optMillis(e *EngineTiming, v *fastjson.Value) (time.Duration, bool) {
	if v == nil || v.Type() != fastjson.TypeNumber {
		return 0, false
	}
	f, err := v.Float64()
	if err != nil {
		e.Invalid = true
		return 0, false
	}
	d, ok := DurationOf(f, time.Millisecond)
	if !ok {
		e.Invalid = true
	}
	return d, ok
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
	e.Queue, e.HasQueue = optMillis(&e, v.Get("queue_time_ms"))
	e.Prefill, e.HasPrefill = optMillis(&e, v.Get("time_to_first_token_ms"))
	e.Decode, e.HasDecode = optMillis(&e, v.Get("generation_time_ms"))
	e.ITL, e.HasITL = optMillis(&e, v.Get("mean_itl_ms"))
	if !e.Reported() && !e.Invalid {
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
	e.Prefill, e.HasPrefill = optMillis(&e, v.Get("prompt_ms"))
	if d, ok := optMillis(&e, v.Get("predicted_ms")); ok {
		e.Decode, e.HasDecode = d, true
		if n, ok := jsonCount(v.Get("predicted_n")); ok && n > 1 {
			e.ITL, e.HasITL = d/time.Duration(n-1), true
		}
	}
	if !e.Reported() && !e.Invalid {
		return EngineTiming{}, false
	}
	e.Source = TimingResponse
	return e, true
}

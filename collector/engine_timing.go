package collector

// This file holds the metrics of the engine's own timing of each probe
// (prober.EngineTiming): where the client's TTFT went, outside the engine,
// in its queue and in prefill, and the engine's own ITL beside the client's.

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slaprobe/slaprobe/internal/slo"
	"github.com/slaprobe/slaprobe/prober"
)

var (
	// 1 ms .. 60 s: a queue is often empty (sub-millisecond) and can be long.
	engineSpanBuckets        = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60}
	engineSpanBucketsReduced = []float64{0.005, 0.025, 0.1, 0.5, 1, 3, 10, 60}
)

type engineTimingMetrics struct {
	queue, prefill, itl, outside *snapHist
	timing                       *prometheus.CounterVec
	implausible                  *prometheus.CounterVec
}

func newEngineTimingMetrics(o ProbeMetricsOptions) engineTimingMetrics {
	spans := o.buckets(engineSpanBuckets, engineSpanBucketsReduced)
	return engineTimingMetrics{
		queue: newHistogram("engine_queue_seconds",
			"Time a probe waited in the engine's scheduler queue, as the engine reported it (vLLM's per-request metrics or its llm_request span). Probes whose TTFT is recorded.", spans),
		prefill: newHistogram("engine_prefill_seconds",
			"Time from the engine scheduling a probe to its first token, as the engine reported it. Probes whose TTFT is recorded.", spans),
		itl: newHistogram("engine_itl_seconds",
			"The engine's own mean inter-token latency of a probe. Beside slaprobe_itl_seconds, a gap shows a proxy or gateway that buffers the stream.", o.buckets(slo.ITLBuckets, slo.ITLBucketsReduced)),
		outside: newHistogram("ttft_outside_engine_seconds",
			"Client TTFT minus the engine's queue and prefill: the network, gateway, proxy, API server and tokenizer. Probes whose engine reported both its queue and its prefill.", spans),
		timing: newCounter("probe_engine_timing_total",
			"Probes whose TTFT is recorded, by where the engine's timing came from: response (the response carried it), trace (the engine's span, the child of the probe's span) or none (not reported, or dropped as implausible; nothing is recorded as zero).", "source"),
		implausible: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "probe_engine_timing_implausible_total",
			Help: "Probes whose TTFT is recorded and whose engine timing was dropped (they count as source=\"none\"), by where it came from (response or trace) and why: invalid (a part not finite, negative or over a day) or exceeds_ttft (queue + prefill longer than the client's own TTFT plus 10 ms)."},
			[]string{"target", "source", "reason"}),
	}
}

func (e *engineTimingMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{e.queue, e.prefill, e.itl, e.outside, sorted(e.timing), sorted(e.implausible)}
}

func (e *engineTimingMetrics) vecs() []*prometheus.MetricVec {
	return []*prometheus.MetricVec{e.queue.MetricVec, e.prefill.MetricVec, e.itl.MetricVec, e.outside.MetricVec, e.timing.MetricVec, e.implausible.MetricVec}
}

func (e *engineTimingMetrics) init(target, model, scenario, api string) {
	for _, s := range prober.TimingSources {
		e.timing.WithLabelValues(target, model, scenario, api, string(s))
	}
	for _, s := range []prober.TimingSource{prober.TimingResponse, prober.TimingTrace} {
		for _, r := range prober.ImplausibleReasons {
			e.implausible.WithLabelValues(target, string(s), r)
		}
	}
}

// TTFTRecorded reports whether r's timings (TTFT, E2E, prefill) go into
// their histograms: a timed answer with a cold prompt, or a warm follow-up;
// not a warm scenario's successful priming turn (conversation.go keeps it apart),
// nor a cold probe that hit the prefix cache. observe records the client's
// timings and ObserveEngineTurn the engine's for exactly these probes, so
// that the split adds up to the TTFT histogram.
func TTFTRecorded(r *prober.Result) bool {
	if r.Turn == 1 && r.Kind == prober.KindSuccess {
		return false
	}
	return r.TTFTValid()
}

// EnginePlan is what becomes of one probe turn's engine timing.
type EnginePlan int

const (
	// EngineSkip: the turn's TTFT is not recorded (TTFTRecorded), so
	// neither is its engine timing; a trace span of it counts for nothing.
	EngineSkip EnginePlan = iota
	// EngineRecordNow: the response carried the engine's timing, or one
	// dropped as implausible: ObserveEngineTurn records it at once.
	EngineRecordNow
	// EngineAwaitSpan: the response carried none: a caller with a trace
	// join waits for the engine's span and then calls ObserveEngineTurn
	// with the settled turn; one without (or whose join cannot start)
	// calls it at once, which records source="none".
	EngineAwaitSpan
)

// PlanEngineTiming decides, in one place, whether a probe turn's engine
// timing waits for a trace join, is recorded now, or is not recorded at
// all. ObserveEngineTurn and the daemon's trace join both act on it.
func PlanEngineTiming(r *prober.Result) EnginePlan {
	switch {
	case !TTFTRecorded(r):
		return EngineSkip
	case r.Engine.Source == prober.TimingResponse || r.Engine.Dropped.Reason != "":
		return EngineRecordNow
	default:
		return EngineAwaitSpan
	}
}

// ObserveEngine records the engine timing of r and of its earlier turns,
// for the turns whose TTFT is recorded. Observe calls it; a caller that
// settles engine timing later (a trace join) calls ObserveClient then this.
func (m *ProbeMetrics) ObserveEngine(r *prober.Result) {
	for i := range r.Earlier {
		m.ObserveEngineTurn(&r.Earlier[i])
	}
	m.ObserveEngineTurn(r)
}

// ObserveEngineTurn records the engine timing of r alone (not its earlier
// turns), as it stands: a turn PlanEngineTiming skips records nothing, any
// other turn counts once under its source (none when it has no timing).
func (m *ProbeMetrics) ObserveEngineTurn(r *prober.Result) {
	if PlanEngineTiming(r) == EngineSkip {
		return
	}
	lv := []string{r.Target, r.Model, r.Scenario, apiOf(r)}
	e := r.Engine
	src := e.Source
	if src == "" || !e.Reported() {
		src = prober.TimingNone
	}
	m.engine.timing.WithLabelValues(r.Target, r.Model, r.Scenario, apiOf(r), string(src)).Inc()
	if d := e.Dropped; d.Reason != "" {
		m.engine.implausible.WithLabelValues(r.Target, string(d.From), d.Reason).Inc()
	}
	if src == prober.TimingNone {
		return
	}
	if e.HasQueue {
		m.engine.queue.WithLabelValues(lv...).Observe(e.Queue.Seconds())
	}
	if e.HasPrefill {
		m.engine.prefill.WithLabelValues(lv...).Observe(e.Prefill.Seconds())
	}
	if e.HasITL && r.DecodeMeasured() {
		m.engine.itl.WithLabelValues(lv...).Observe(e.ITL.Seconds())
	}
	if sp, ok := r.Split(); ok {
		// Recorded as it is, even slightly negative (an engine whose
		// timing ends after the client had the chunk), so its mean stays
		// the mean TTFT minus the mean queue and prefill.
		m.engine.outside.WithLabelValues(lv...).Observe(sp.Outside.Seconds())
	}
}

// observeWithTrace observes v, with the probe's trace id as an exemplar
// when it has one (shown in OpenMetrics, so Grafana can jump to the trace).
func observeWithTrace(o prometheus.Observer, v float64, traceID string) {
	if eo, ok := o.(prometheus.ExemplarObserver); ok && traceID != "" {
		eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": traceID})
		return
	}
	o.Observe(v)
}

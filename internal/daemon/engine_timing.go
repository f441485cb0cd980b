package daemon

import (
	"github.com/slaprobe/slaprobe/collector"
	"github.com/slaprobe/slaprobe/prober"
)

// EngineJoiner settles the engine timing of a probe whose response carried
// none, from the engine's trace (tracing.Joiner): done gets the probe with
// its Engine set, later. Join reports false when it cannot (no trace id).
// Skip tells it that a probe will not wait (its response carried the
// timing, or its TTFT is not recorded), so its span counts for nothing.
type EngineJoiner interface {
	Join(r prober.Result, done func(prober.Result)) bool
	Skip(r prober.Result)
}

// EngineTimingHook is a ProbeHook that also wants a probe's engine timing
// when a trace join settles it after AfterProbe (the status page).
type EngineTimingHook interface {
	EngineTimed(r *prober.Result)
}

// SetEngineJoiner makes probes without in-band engine timing wait for
// their engine span; call it before Run.
func (d *Daemon) SetEngineJoiner(j EngineJoiner) { d.joiner = j }

// probeObserver records the scheduler's results in the probe metrics.
// With a joiner, a probe turn whose response carried no engine timing has
// its client metrics recorded at once and its engine timing when its span
// comes (or its join times out, as source="none").
type probeObserver struct {
	*collector.ProbeMetrics
	d *Daemon
}

func (o probeObserver) Observe(r *prober.Result) {
	for i := range r.Earlier {
		o.d.logImplausible(&r.Earlier[i])
	}
	o.d.logImplausible(r)
	j := o.d.joiner
	if j == nil {
		o.ProbeMetrics.Observe(r)
		return
	}
	o.ProbeMetrics.ObserveClient(r)
	for i := range r.Earlier {
		o.observeEngine(j, &r.Earlier[i])
	}
	o.observeEngine(j, r)
}

// observeEngine acts on collector.PlanEngineTiming, which decides: a turn
// whose response carried no engine timing waits for the engine's span
// (recorded at once, as source none, when the join cannot start); one that
// carried it is recorded now; the joiner is told of every turn that will
// not wait, so their spans count for nothing.
func (o probeObserver) observeEngine(j EngineJoiner, r *prober.Result) {
	turn := *r
	turn.Earlier = nil
	switch collector.PlanEngineTiming(r) {
	case collector.EngineAwaitSpan:
		if !j.Join(turn, o.settled) {
			o.ObserveEngineTurn(r)
		}
	case collector.EngineRecordNow:
		j.Skip(turn)
		o.ObserveEngineTurn(r)
	default: // collector.EngineSkip: nothing to record
		j.Skip(turn)
	}
}

// settled records a probe turn whose engine timing the joiner settled.
func (o probeObserver) settled(r prober.Result) {
	o.d.logImplausible(&r)
	o.ObserveEngineTurn(&r)
	for _, h := range (hookSet{o.d}).list() {
		if eh, ok := h.(EngineTimingHook); ok {
			eh.EngineTimed(&r)
		}
	}
}

// logImplausible logs, once per target, an engine timing dropped as
// implausible (prober.Result.CheckEngine); the metrics count every one.
func (d *Daemon) logImplausible(r *prober.Result) {
	drop := r.Engine.Dropped
	if drop.Reason == "" || !collector.TTFTRecorded(r) {
		return
	}
	if _, seen := d.implausibleLogged.LoadOrStore(r.Target, true); seen {
		return
	}
	d.logger.Warn("engine timing dropped as implausible; the probe's engine timing is source none (logged once per target, slaprobe_probe_engine_timing_implausible_total counts every one)",
		"target", r.Target, "scenario", r.Scenario, "from", drop.From, "reason", drop.Reason,
		"ttft", r.TTFT(), "tolerance", prober.EngineTimingTolerance)
}

package daemon

import (
	"github.com/slaprobe/slaprobe/collector"
	"github.com/slaprobe/slaprobe/prober"
)

// EngineJoiner settles the engine timing of a probe whose response carried
// none, from the engine's trace (tracing.Joiner): done gets the probe with
// its Engine set, later. Join reports false when it cannot (no trace id).
type EngineJoiner interface {
	Join(r prober.Result, done func(prober.Result)) bool
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

func (o probeObserver) observeEngine(j EngineJoiner, r *prober.Result) {
	if r.Engine.Source != prober.TimingResponse && collector.TTFTRecorded(r) {
		turn := *r
		turn.Earlier = nil
		if j.Join(turn, o.settled) {
			return
		}
	}
	o.ObserveEngineTurn(r)
}

// settled records a probe turn whose engine timing the joiner settled.
func (o probeObserver) settled(r prober.Result) {
	o.ObserveEngineTurn(&r)
	for _, h := range (hookSet{o.d}).list() {
		if eh, ok := h.(EngineTimingHook); ok {
			eh.EngineTimed(&r)
		}
	}
}

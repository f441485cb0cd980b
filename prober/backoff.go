package prober

// This file holds a target's backoff: the gate that holds back its probes
// while it is down (backoff) or has asked for a pause (Retry-After). It is
// not internal/gate, the rollout gate.

import (
	"log/slog"
	"sync"
	"time"
)

// gate holds back the probes of one target while it is down or has asked
// for a pause with Retry-After. One scenario loop, the owner, keeps
// probing (with backoff when down); the others wait for the gate to open.
// Working with channels rather than deadlines keeps it on the scheduler's
// injected Sleep.
type gate struct {
	mu    sync.Mutex
	open  chan struct{} // nil: open; closed when the gate opens
	owner string        // the scenario that closed it
	down  bool          // closed because the target is down (else Retry-After)
	fails int           // consecutive failed probes of the owner while down
	since time.Time
}

type gateAction int

const (
	gateNone       gateAction = iota
	gateBackoff               // the owner waits backoff(fails) before its next probe
	gateRetryAfter            // the owner waits wait, then opens the gate
)

type gateStep struct {
	kind  gateAction
	fails int
	wait  time.Duration
}

// wait returns nil when scenario may probe now, else a channel closed when
// the gate opens.
func (g *gate) wait(scenario string) <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open == nil || g.owner == scenario {
		return nil
	}
	return g.open
}

// note updates the gate with the result of a probe of sc and says what the
// loop of sc does next.
func (g *gate) note(res *Result, sc Scenario, log *slog.Logger) gateStep {
	g.mu.Lock()
	defer g.mu.Unlock()
	if res.Reason.TargetDown() {
		if g.open == nil {
			g.open, g.owner, g.down, g.fails, g.since = make(chan struct{}), sc.Name, true, 0, time.Now()
			log.Warn("target unreachable; probing it with one scenario, with exponential backoff, until it answers",
				"scenario", sc.Name, "reason", res.Reason, "err", res.Err)
		}
		if g.owner == sc.Name && g.down {
			g.fails++
			return gateStep{kind: gateBackoff, fails: g.fails}
		}
		return gateStep{}
	}
	// The target answered.
	if g.open != nil && g.down {
		log.Info("target answers again; resuming every scenario", "failed_probes", g.fails,
			"down_for", time.Since(g.since).Round(time.Second))
		g.openLocked()
	}
	if res.RetryAfter > 0 && g.open == nil {
		wait := res.RetryAfter
		if sc.Interval > 0 {
			wait = min(wait, sc.Interval)
		}
		g.open, g.owner, g.down, g.fails, g.since = make(chan struct{}), sc.Name, false, 0, time.Now()
		log.Info("server asked to retry later; pausing the target's probes", "scenario", sc.Name,
			"retry_after", res.RetryAfter, "pause", wait, "status", res.Reason)
		return gateStep{kind: gateRetryAfter, wait: wait}
	}
	return gateStep{}
}

// release opens the gate if scenario owns it: the owner of a Retry-After
// pause once the pause is over, or any owner that could not probe (its
// scenario was disabled), so that the others are not blocked behind it.
func (g *gate) release(scenario string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open != nil && g.owner == scenario {
		g.openLocked()
	}
}

func (g *gate) openLocked() {
	close(g.open)
	g.open, g.owner, g.down, g.fails = nil, "", false, 0
}

package probehandler

// This file holds what keeps /probe within the limits the scheduler obeys:
// the cap on requests running at once (probe.max_concurrent), the sweep
// holds, the target's in-flight slots (global.max_in_flight_per_target),
// and one calibration per target and scenario, bounded in time.

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/prober"
)

// lease is what an admitted request holds: its place under
// probe.max_concurrent, its entry in the target's holds and its in-flight
// slot. It is given back when the request and the calibration it started,
// if any, are both done.
type lease struct {
	mu      sync.Mutex
	refs    int
	release []func()
}

func (l *lease) add() {
	l.mu.Lock()
	l.refs++
	l.mu.Unlock()
}

// done drops one reference; the last gives everything back, last taken
// first.
func (l *lease) done() {
	l.mu.Lock()
	l.refs--
	last := l.refs == 0
	l.mu.Unlock()
	if !last {
		return
	}
	for i := len(l.release) - 1; i >= 0; i-- {
		l.release[i]()
	}
}

// admit takes what a probe of t needs, in the scheduler's order: a place
// under probe.max_concurrent (refused at once beyond it), the target's
// holds (refused while a sweep holds it), then one of its in-flight slots
// (waited for until ctx ends). A nil lease comes with the status, reason
// and message of the refusal.
func (h *Handler) admit(ctx context.Context, cfg *config.Config, t prober.Target) (*lease, int, string, string) {
	l := &lease{refs: 1}
	fail := func(status int, reason, msg string) (*lease, int, string, string) {
		l.refs = 1
		l.done()
		return nil, status, reason, msg
	}
	h.mu.Lock()
	if h.running >= cfg.Probe.MaxConcurrent {
		h.mu.Unlock()
		return nil, http.StatusTooManyRequests, refusedConcurrency,
			fmt.Sprintf("%d /probe requests are running, the most probe.max_concurrent allows; retry later", cfg.Probe.MaxConcurrent)
	}
	h.running++
	h.mu.Unlock()
	l.release = append(l.release, func() {
		h.mu.Lock()
		h.running--
		h.mu.Unlock()
	})

	if h.opts.Holds != nil {
		// Enter with an ended context does not wait: it enters when the
		// target is not held and refuses when it is.
		now, stop := context.WithCancel(ctx)
		stop()
		leave, ok := h.opts.Holds.Enter(now, t.Name)
		if !ok {
			return fail(http.StatusServiceUnavailable, refusedHeld, "a sweep holds this target; its probes wait until the sweep ends")
		}
		l.release = append(l.release, leave)
	}

	release, ok, known := func() (func(), bool, bool) {
		if h.opts.Slot == nil {
			return nil, false, false
		}
		return h.opts.Slot(ctx, t.Name)
	}()
	if !known {
		release, ok = h.ownSlot(ctx, t.BaseURL, cfg.Global.MaxInFlightPerTarget)
	}
	if !ok {
		return fail(http.StatusTooManyRequests, refusedTargetBusy,
			"no in-flight slot of this target (global.max_in_flight_per_target) freed within the probe's timeout; retry later")
	}
	l.release = append(l.release, release)
	return l, 0, "", ""
}

// ownSlot takes one of /probe's own in-flight slots of the target at base,
// for targets no scheduler probes. Only the slots in use are kept.
func (h *Handler) ownSlot(ctx context.Context, base string, n int) (func(), bool) {
	h.mu.Lock()
	sem := h.slots[base]
	if sem == nil {
		sem = make(chan struct{}, max(n, 1))
		h.slots[base] = sem
	}
	h.slotRefs[base]++
	h.mu.Unlock()
	unref := func() {
		h.mu.Lock()
		if h.slotRefs[base]--; h.slotRefs[base] == 0 {
			delete(h.slotRefs, base)
			delete(h.slots, base)
		}
		h.mu.Unlock()
	}
	select {
	case sem <- struct{}{}:
		return func() { <-sem; unref() }, true
	case <-ctx.Done():
		unref()
		return nil, false
	}
}

// calKey is what one calibration of /probe is shared by.
type calKey struct {
	base, name, model, scenario string
	api                         prober.API
	metrics                     bool
}

type calResult struct {
	prep *prober.Prepared
	err  error
}

// calCall is a calibration in flight; done is closed when res is set.
type calCall struct {
	done chan struct{}
	res  calResult
}

// calibration returns the calibration in flight for t and s, or starts
// one. One it starts keeps the request's lease until it ends, and ends at
// most timeout after the request does.
func (h *Handler) calibration(ctx context.Context, t prober.Target, s prober.Scenario, l *lease, timeout time.Duration) *calCall {
	k := calKey{base: t.BaseURL, name: t.Name, model: t.Model, scenario: s.Name, api: s.APIOn(t), metrics: t.PerRequestMetrics}
	h.mu.Lock()
	h.calAsked++
	if c := h.calls[k]; c != nil {
		h.mu.Unlock()
		return c
	}
	c := &calCall{done: make(chan struct{})}
	h.calls[k] = c
	h.mu.Unlock()

	// It does not end with the request: the next scrape finds it cached.
	// It ends at the latest timeout after the request has.
	calCtx, calCancel := context.WithCancel(context.WithoutCancel(ctx))
	calCtx, stop := context.WithTimeout(calCtx, 2*timeout)
	go func() {
		<-ctx.Done()
		timer := time.AfterFunc(timeout, calCancel)
		<-calCtx.Done()
		timer.Stop()
	}()
	l.add()
	go func() {
		defer l.done()
		defer stop()
		defer calCancel()
		p, err := h.opts.Runner.Prepare(calCtx, t, t.Model, s)
		if t.Client != nil && ctx.Err() != nil {
			// The request is gone (it closed its client's idle connections
			// then): leave none open after it either.
			t.Client.CloseIdleConnections()
		}
		h.mu.Lock()
		delete(h.calls, k)
		h.mu.Unlock()
		c.res = calResult{p, err}
		close(c.done)
	}()
	return c
}

// InFlight reports the requests /probe holds admitted (calibrations that
// outlived their request included), the calibrations it runs and the
// targets it keeps slots for: for tests of its bounds.
func (h *Handler) InFlight() (running, calibrations, slots int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.running, len(h.calls), len(h.slots)
}

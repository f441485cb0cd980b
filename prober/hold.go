package prober

// This file holds Holds, which pause a target's scheduled probes while a
// sweep loads it on purpose.

import (
	"context"
	"sync"
)

// Holds pauses the scheduled probes of a target while something else
// loads it on purpose: a sweep. A probe sent then would measure the sweep's
// load, not what users get, and would add one request to the sweep's
// steps (at N = 1 that halves the per-user baseline that scaling
// efficiency divides by). The zero value is ready to use.
type Holds struct {
	mu      sync.Mutex
	targets map[string]*holdState
}

type holdState struct {
	holds    int           // Hold calls not yet released
	inFlight int           // probes between Enter and their leave
	released chan struct{} // closed when holds drops to 0
	idle     chan struct{} // closed when inFlight drops to 0
}

func (h *Holds) stateLocked(target string) *holdState {
	if h.targets == nil {
		h.targets = map[string]*holdState{}
	}
	st := h.targets[target]
	if st == nil {
		st = &holdState{}
		h.targets[target] = st
	}
	return st
}

// Enter waits while target is held, then counts one probe in flight until
// leave is called. ok is false when ctx ended first (leave is then nil).
func (h *Holds) Enter(ctx context.Context, target string) (leave func(), ok bool) {
	for {
		h.mu.Lock()
		st := h.stateLocked(target)
		if st.holds == 0 {
			st.inFlight++
			h.mu.Unlock()
			var once sync.Once
			return func() { once.Do(func() { h.leave(target) }) }, true
		}
		wait := st.released
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, false
		case <-wait:
		}
	}
}

func (h *Holds) leave(target string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.stateLocked(target)
	st.inFlight--
	if st.inFlight == 0 && st.idle != nil {
		close(st.idle)
		st.idle = nil
	}
	h.forgetIdleLocked(target, st)
}

// forgetIdleLocked drops the state of a target neither held nor probed, so
// that the map holds only targets in use (a fleet's addresses change).
func (h *Holds) forgetIdleLocked(target string, st *holdState) {
	if st.holds == 0 && st.inFlight == 0 && h.targets[target] == st {
		delete(h.targets, target)
	}
}

// Len is how many targets the Holds keeps state for: those held or with a
// probe in flight.
func (h *Holds) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.targets)
}

// Hold stops new probes of target from starting and waits until those in
// flight have ended, so the caller has the target to itself. release ends
// the hold (call it once, also when err is not nil: the hold is in place
// even when ctx ended before the probes in flight did).
func (h *Holds) Hold(ctx context.Context, target string) (release func(), err error) {
	h.mu.Lock()
	st := h.stateLocked(target)
	if st.holds == 0 {
		st.released = make(chan struct{})
	}
	st.holds++
	var once sync.Once
	release = func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			st := h.stateLocked(target)
			st.holds--
			if st.holds == 0 {
				close(st.released)
			}
			h.forgetIdleLocked(target, st)
		})
	}
	for st.inFlight > 0 {
		if st.idle == nil {
			st.idle = make(chan struct{})
		}
		idle := st.idle
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return release, ctx.Err()
		case <-idle:
		}
		h.mu.Lock()
	}
	h.mu.Unlock()
	return release, nil
}

// Held reports whether target's probes are held now.
func (h *Holds) Held(target string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.targets[target]
	return st != nil && st.holds > 0
}

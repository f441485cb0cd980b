package prober

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// holdWithin runs h.Hold in a goroutine and reports whether it returned
// within d.
func holdWithin(h *Holds, ctx context.Context, target string, d time.Duration) (release func(), err error, returned bool) {
	type res struct {
		release func()
		err     error
	}
	ch := make(chan res, 1)
	go func() {
		r, err := h.Hold(ctx, target)
		ch <- res{r, err}
	}()
	select {
	case r := <-ch:
		return r.release, r.err, true
	case <-time.After(d):
		// Collect it later so the goroutine does not leak past the test.
		r := <-ch
		return r.release, r.err, false
	}
}

func TestHoldsWaitsForProbesInFlight(t *testing.T) {
	var h Holds
	ctx := context.Background()
	leave, ok := h.Enter(ctx, "a")
	if !ok {
		t.Fatal("Enter on a target nobody holds did not proceed")
	}
	// Another target's probe does not delay a hold of "a".
	leaveB, _ := h.Enter(ctx, "b")
	defer leaveB()

	held := make(chan func(), 1)
	go func() {
		r, err := h.Hold(ctx, "a")
		if err != nil {
			t.Errorf("Hold: %v", err)
		}
		held <- r
	}()
	select {
	case <-held:
		t.Fatal("Hold returned while a probe of the target was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	if !h.Held("a") || h.Held("b") {
		t.Fatalf("Held(a) = %v, Held(b) = %v; want true, false", h.Held("a"), h.Held("b"))
	}
	leave()
	leave() // a second call is a no-op
	var release func()
	select {
	case release = <-held:
	case <-time.After(5 * time.Second):
		t.Fatal("Hold did not return after the probe in flight ended")
	}

	// Held: a new probe waits until the release.
	var entered atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		l, ok := h.Enter(ctx, "a")
		if !ok {
			t.Error("Enter gave up without its context ending")
			return
		}
		entered.Store(true)
		l()
	}()
	time.Sleep(50 * time.Millisecond)
	if entered.Load() {
		t.Fatal("a probe started while the target was held")
	}
	release()
	release() // idempotent
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting probe did not start after the release")
	}
	if !entered.Load() || h.Held("a") {
		t.Fatalf("after release: entered %v, held %v", entered.Load(), h.Held("a"))
	}
}

func TestHoldsNestedAndCancelled(t *testing.T) {
	var h Holds
	ctx := context.Background()

	// Two holds: the target stays held until both are released.
	r1, err1, ok1 := holdWithin(&h, ctx, "a", time.Second)
	r2, err2, ok2 := holdWithin(&h, ctx, "a", time.Second)
	if !ok1 || !ok2 || err1 != nil || err2 != nil {
		t.Fatalf("holds with nothing in flight: returned %v %v, errors %v %v", ok1, ok2, err1, err2)
	}
	r1()
	if !h.Held("a") {
		t.Fatal("released one of two holds and the target is no longer held")
	}
	// A probe waiting on a held target gives up when its context ends.
	cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, ok := h.Enter(cctx, "a"); ok {
		t.Fatal("Enter proceeded on a held target")
	}
	r2()
	if h.Held("a") {
		t.Fatal("still held after both releases")
	}

	// A hold whose context ends while a probe is in flight returns the
	// context's error; the hold stays in place until released.
	leave, _ := h.Enter(ctx, "a")
	hctx, hcancel := context.WithCancel(ctx)
	hcancel()
	release, err := h.Hold(hctx, "a")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Hold with a cancelled context and a probe in flight: err = %v", err)
	}
	if !h.Held("a") {
		t.Fatal("Hold returned an error and left the target unheld")
	}
	release()
	leave()
	if h.Held("a") {
		t.Fatal("still held after release")
	}
	if l, ok := h.Enter(ctx, "a"); !ok {
		t.Fatal("Enter after everything was released did not proceed")
	} else {
		l()
	}
}

// TestSchedulerHolds: while a target is held no probe of it starts, the one
// in flight when the hold began has its result recorded before Hold
// returns, and probing resumes on release.
func TestSchedulerHolds(t *testing.T) {
	var holds Holds
	var started, total atomic.Int32
	obs := newSchedObserver()
	probe := func(ctx context.Context, tg Target, model string, s Scenario, think ThinkFunc) Result {
		started.Add(1)
		time.Sleep(2 * time.Millisecond)
		total.Add(1)
		return schedOK(tg, model, s)
	}
	s := NewScheduler([]ScheduledTarget{{Target: Target{Name: "a", Model: "m"}, Scenarios: []Scenario{
		schedScenario("s1", 100, time.Second), schedScenario("s2", 100, time.Second),
	}}}, SchedulerOptions{
		Probe: probe, ListModels: schedStaticModels(ModelInfo{ID: "m"}), Observer: obs,
		Sleep: schedFastSleep, Holds: &holds,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		end := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(end) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitFor("probes to run", func() bool { return total.Load() >= 5 })

	release, err := holds.Hold(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	// Everything that started has ended and been recorded.
	results, _, _, _ := obs.snapshot()
	if n := started.Load(); n != total.Load() || int(n) != len(results) {
		t.Fatalf("after Hold: %d probes started, %d ended, %d recorded; want all equal", n, total.Load(), len(results))
	}
	before := started.Load()
	time.Sleep(100 * time.Millisecond) // ~100 intervals at the test's speed
	if n := started.Load(); n != before {
		t.Fatalf("%d probes started while the target was held", n-before)
	}
	release()
	waitFor("probes to resume", func() bool { return started.Load() >= before+3 })
}

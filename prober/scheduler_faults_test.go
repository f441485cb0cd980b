package prober_test

import (
	"context"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/prober"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// probeLog records every probe the scheduler sends: when it started and
// ended and how it went.
type probeLog struct {
	mu      sync.Mutex
	entries []probeEntry
}

type probeEntry struct {
	scenario   string
	start, end time.Time
	reason     prober.Reason
	kind       prober.Kind
}

func (l *probeLog) wrap(probe prober.ProbeFunc, before func(n int)) prober.ProbeFunc {
	return func(ctx context.Context, t prober.Target, model string, s prober.Scenario, think prober.ThinkFunc) prober.Result {
		l.mu.Lock()
		n := len(l.entries)
		l.entries = append(l.entries, probeEntry{scenario: s.Name, start: time.Now()})
		l.mu.Unlock()
		if before != nil {
			before(n)
		}
		res := probe(ctx, t, model, s, think)
		l.mu.Lock()
		l.entries[n].end, l.entries[n].reason, l.entries[n].kind = time.Now(), res.Reason, res.Kind
		l.mu.Unlock()
		return res
	}
}

func (l *probeLog) snapshot() []probeEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.entries)
}

func runScheduler(t *testing.T, s *prober.Scheduler, limit time.Duration, done func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { s.Run(ctx); close(stopped) }()
	for end := time.Now().Add(limit); time.Now().Before(end) && !done(); {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the scheduler did not stop")
	}
}

func faultScenarios(interval time.Duration, names ...string) []prober.Scenario {
	out := make([]prober.Scenario, len(names))
	for i, n := range names {
		out[i] = faultScenario
		out[i].Name, out[i].Interval = n, interval
	}
	return out
}

// TestSchedulerHonoursRetryAfter: a 429 with Retry-After: 2 pauses every
// scenario of the target for 2 s; one with Retry-After far beyond the
// interval pauses it for one interval only.
func TestSchedulerHonoursRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fault    string
		interval time.Duration
		pause    time.Duration // the least time without a probe after the 429
	}{
		{"retry-after within the interval", "429", 4 * time.Second, 2 * time.Second},
		{"retry-after bounded by the interval", "503date", 1500 * time.Millisecond, 1500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newFaultRig(t)
			p := prober.New(nil, nil)
			target := r.target(r.plain.URL, r.plainTr)
			if res := p.Probe(context.Background(), target, "", faultScenario); res.Kind != prober.KindSuccess {
				t.Fatalf("calibration probe: %s %v", res.Reason, res.Err)
			}
			var log probeLog
			probe := log.wrap(p.ProbePaced, func(n int) {
				if n == 0 {
					r.h.set(tc.fault) // the first scheduled probe is refused
				} else {
					r.h.set("")
				}
			})
			names := []string{"a", "b", "c", "d"}
			s := prober.NewScheduler([]prober.ScheduledTarget{{Target: target, Scenarios: faultScenarios(tc.interval, names...)}},
				prober.SchedulerOptions{Probe: probe, ListModels: func(context.Context, prober.Target) ([]prober.ModelInfo, error) {
					return []prober.ModelInfo{{ID: r.model}}, nil
				}, FirstProbeMaxDelay: 300 * time.Millisecond})
			// Done once every scenario has probed after the refused one.
			runScheduler(t, s, 30*time.Second, func() bool {
				e := log.snapshot()
				seen := map[string]bool{}
				for _, x := range e[min(1, len(e)):] {
					if !x.end.IsZero() {
						seen[x.scenario] = true
					}
				}
				return len(seen) == len(names)
			})
			e := log.snapshot()
			if len(e) < 2 || e[0].kind != prober.KindError {
				t.Fatalf("probes %+v; want a refused one first", e)
			}
			for _, x := range e[1:] {
				if gap := x.start.Sub(e[0].end); gap < tc.pause {
					t.Errorf("scenario %s probed %v after the %s answer; want no probe for %v", x.scenario, gap, e[0].reason, tc.pause)
				}
				if x.kind != prober.KindSuccess && !x.end.IsZero() {
					t.Errorf("probe after the pause: %s/%s", x.kind, x.reason)
				}
			}
		})
	}
}

// TestSchedulerBacksOffFromADownTarget: while nothing listens, one scenario
// probes with growing, jittered waits; the others wait; when the server
// comes back every scenario resumes, spread out rather than all at once.
func TestSchedulerBacksOffFromADownTarget(t *testing.T) {
	r := newFaultRig(t)
	// Nothing listens there: connection refused until the server comes up.
	// A port below the ephemeral range, which no outgoing connection takes
	// in the meantime.
	addr := testproc.FreeAddr(t)
	target := r.target("http://"+addr, r.plainTr)
	p := prober.New(nil, nil)

	var (
		mu     sync.Mutex
		sleeps []time.Duration
		srv    *http.Server
	)
	const downProbes = 5
	var log probeLog
	probe := log.wrap(p.ProbePaced, func(n int) {})
	// The scheduler's time runs 200× faster than real time.
	sleep := func(ctx context.Context, d time.Duration) bool {
		mu.Lock()
		sleeps = append(sleeps, d)
		mu.Unlock()
		tm := time.NewTimer(d / 200)
		defer tm.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-tm.C:
			return true
		}
	}
	names := []string{"s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9"}
	interval := 10 * time.Second
	s := prober.NewScheduler([]prober.ScheduledTarget{{Target: target, Scenarios: faultScenarios(interval, names...)}},
		// No interval jitter, so every wait longer than the interval is a
		// backoff (which has its own jitter).
		prober.SchedulerOptions{Probe: probe, Sleep: sleep, BackoffMax: 80 * time.Second, Jitter: 0,
			ListModels: func(context.Context, prober.Target) ([]prober.ModelInfo, error) {
				return []prober.ModelInfo{{ID: r.model}}, nil
			}})
	var failed int
	runScheduler(t, s, 60*time.Second, func() bool {
		e := log.snapshot()
		failed = 0
		for _, x := range e {
			if x.reason == prober.ReasonConnectionRefused {
				failed++
			}
		}
		if failed >= downProbes+len(names) && srv == nil {
			// Bring the target up on the same address; should something
			// else hold it for a moment, try again at the next look.
			l, err := net.Listen("tcp", addr)
			if err != nil {
				t.Logf("relisten on %s: %v; trying again", addr, err)
				return false
			}
			srv = &http.Server{Handler: r.h}
			go srv.Serve(l)
		}
		ok := map[string]bool{}
		for _, x := range e {
			if x.kind == prober.KindSuccess {
				ok[x.scenario] = true
			}
		}
		return len(ok) == len(names)
	})
	if srv != nil {
		defer srv.Close()
	}
	e := log.snapshot()

	// While down: count the refused probes per scenario. Each scenario may
	// have had one probe on its way when the target was found down; after
	// that only the owner probes.
	perScenario := map[string]int{}
	owner, ownerN := "", 0
	firstOK := len(e)
	for i, x := range e {
		if x.kind == prober.KindSuccess {
			firstOK = min(firstOK, i)
			continue
		}
		perScenario[x.scenario]++
		if perScenario[x.scenario] > ownerN {
			owner, ownerN = x.scenario, perScenario[x.scenario]
		}
	}
	if firstOK == len(e) {
		t.Fatalf("no scenario succeeded after the target came back: %+v", e)
	}
	for name, n := range perScenario {
		if name != owner && n > 1 {
			t.Errorf("scenario %s probed the down target %d times; only %s should while it is down", name, n, owner)
		}
	}
	if ownerN < downProbes {
		t.Errorf("the owner probed the down target %d times, want at least %d", ownerN, downProbes)
	}

	// The owner's waits grow exponentially from 2×interval, within
	// [d/2, d], up to the cap.
	mu.Lock()
	var backoffs []time.Duration
	for _, d := range sleeps {
		if d > interval { // longer than the interval: a backoff
			backoffs = append(backoffs, d)
		}
	}
	mu.Unlock()
	if len(backoffs) < downProbes-1 {
		t.Fatalf("backoff waits %v; want at least %d", backoffs, downProbes-1)
	}
	for i, d := range backoffs[:downProbes-1] {
		hi := min(interval<<(i+1), 80*time.Second)
		if d < hi/2 || d > hi {
			t.Errorf("backoff %d = %v, want within [%v, %v]", i+1, d, hi/2, hi)
		}
	}

	// Recovery: the others resume spread out, not in one burst: their first
	// successful probes do not all start together.
	var starts []time.Time
	seen := map[string]bool{}
	for _, x := range e[firstOK:] {
		if x.kind == prober.KindSuccess && !seen[x.scenario] {
			seen[x.scenario] = true
			starts = append(starts, x.start)
		}
	}
	if len(starts) != len(names) {
		t.Fatalf("%d of %d scenarios resumed", len(starts), len(names))
	}
	t.Logf("owner %s: %d refused probes, backoffs %v; resumed over %v", owner, ownerN, backoffs, starts[len(starts)-1].Sub(starts[0]))
}

package sweep

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/prober"
)

// leftoverEngine wraps the fake engine with requests that keep "running"
// on the server after their client left, as engines that never abort do.
type leftoverEngine struct {
	*swFakeEngine
	mu        sync.Mutex
	leftovers int // requests still running server-side
	scrapes   int
	drainPer  int // leftovers finished per scrape
	noQueue   bool
}

func (e *leftoverEngine) counters(ctx context.Context) (EngineCounters, error) {
	c, _ := e.swFakeEngine.counters(ctx)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.scrapes++
	if e.noQueue {
		return c, nil
	}
	c.HasQueue = true
	c.Running = float64(e.leftovers + e.current())
	e.leftovers = max(0, e.leftovers-e.drainPer)
	return c, nil
}

func TestSweepWaitsForDrainedEngine(t *testing.T) {
	for _, tc := range []struct {
		name      string
		leftovers int
		drainPer  int
		noQueue   bool
		timeout   time.Duration
		method    string
		busy      bool
	}{
		{"already empty", 0, 0, false, time.Second, DrainEngine, false},
		{"leftovers finish", 4, 1, false, 5 * time.Second, DrainEngine, false},
		{"leftovers never finish", 3, 0, false, 60 * time.Millisecond, DrainEngine, true},
		{"no engine counts: cooldown", 3, 0, true, time.Second, DrainCooldown, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &leftoverEngine{swFakeEngine: newSwFakeEngine(), leftovers: tc.leftovers, drainPer: tc.drainPer, noQueue: tc.noQueue}
			opts := swFastOptions(swScenario())
			opts.ClosedLoop, opts.Burst = nil, []int{1}
			opts.Scrape = e.counters
			opts.Drain = DrainOptions{Timeout: tc.timeout, PollInterval: 5 * time.Millisecond}
			res, err := Run(context.Background(), e, prober.Target{Name: "t"}, "m", opts)
			if err != nil {
				t.Fatal(err)
			}
			st := res.Scenarios[0].Burst[0]
			d := st.Drain
			if d == nil || d.Method != tc.method || d.Busy != tc.busy || st.StartedBusy() != tc.busy {
				t.Fatalf("drain = %+v; want method %s, busy %v", d, tc.method, tc.busy)
			}
			if tc.leftovers > 0 && tc.drainPer > 0 && e.scrapes < tc.leftovers {
				t.Errorf("started after %d scrapes, before the %d leftovers finished", e.scrapes, tc.leftovers)
			}
			if tc.busy {
				if d.Running != float64(tc.leftovers) || d.WaitedSeconds < tc.timeout.Seconds() {
					t.Errorf("busy drain = %+v; want running %d after the %s timeout", d, tc.leftovers, tc.timeout)
				}
				// A busy step is kept, marked, but capacity is not read from it.
				if mq := res.Scenarios[0].MaxSafeQueue; mq != nil {
					t.Errorf("max safe queue %s read from a busy step", mq)
				}
			} else if res.Scenarios[0].MaxSafeQueue == nil {
				t.Error("no max safe queue from a drained step")
			}
		})
	}
}

// Every burst round after the first waits for the engine too; a busy
// round marks the whole step.
func TestBurstRoundsDrain(t *testing.T) {
	e := &leftoverEngine{swFakeEngine: newSwFakeEngine()}
	opts := swFastOptions(swScenario())
	opts.ClosedLoop, opts.Burst, opts.BurstRepeat = nil, []int{2}, 3
	opts.Scrape = func(ctx context.Context) (EngineCounters, error) {
		c, err := e.counters(ctx)
		return c, err
	}
	opts.Drain = DrainOptions{Timeout: time.Second, PollInterval: 5 * time.Millisecond}
	res, err := Run(context.Background(), e, prober.Target{Name: "t"}, "m", opts)
	if err != nil {
		t.Fatal(err)
	}
	// One drain check before the step and one before each later round
	// (plus the queue-wait scrapes around the step).
	if e.scrapes < 1+2+2 {
		t.Errorf("%d scrapes; want the engine checked before each of the 3 rounds", e.scrapes)
	}
	if d := res.Scenarios[0].Burst[0].Drain; d == nil || d.Busy {
		t.Errorf("drain = %+v", d)
	}
	d := DrainResult{Method: DrainEngine, WaitedSeconds: 1}
	d.merge(DrainResult{Method: DrainEngine, WaitedSeconds: 2, Busy: true, Running: 2, Waiting: 5})
	d.merge(DrainResult{Method: DrainEngine, WaitedSeconds: 3, Busy: true, Running: 4, Waiting: 1})
	if d != (DrainResult{Method: DrainEngine, WaitedSeconds: 6, Busy: true, Running: 4, Waiting: 5}) {
		t.Errorf("merged = %+v", d)
	}
}

// A burst of several rounds keeps each round's median of every metric:
// the independent samples a comparison of bursts resamples. One round
// keeps none.
func TestBurstRoundMedians(t *testing.T) {
	for _, repeat := range []int{1, 3} {
		e := newSwFakeEngine()
		opts := swFastOptions(swScenario())
		opts.ClosedLoop, opts.Burst, opts.BurstRepeat = nil, []int{4}, repeat
		res, err := Run(context.Background(), e, prober.Target{Name: "t"}, "m", opts)
		if err != nil {
			t.Fatal(err)
		}
		st := res.Scenarios[0].Burst[0]
		rm := st.Samples.RoundMedians
		if repeat == 1 {
			if rm != nil {
				t.Errorf("one round kept round medians %+v", rm)
			}
			continue
		}
		if rm == nil || len(rm.TTFT) != repeat || len(rm.E2E) != repeat {
			t.Fatalf("round medians %+v; want %d per metric", rm, repeat)
		}
		if len(st.Samples.TTFT) != 4*repeat {
			t.Fatalf("%d TTFT samples; want %d", len(st.Samples.TTFT), 4*repeat)
		}
		for i := range repeat {
			want := Summarize(st.Samples.TTFT[4*i : 4*(i+1)]).P50
			if rm.TTFT[i] != want {
				t.Errorf("round %d TTFT median %v; want %v, the median of its own requests", i, rm.TTFT[i], want)
			}
		}
	}
}

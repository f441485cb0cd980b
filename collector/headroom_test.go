package collector

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/internal/sweeper"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// headroomScenario is a swept scenario whose closed-loop step N completed
// 10×N requests per second over a 10 s window (N = 1, 2, 4, 8).
func headroomScenario(name string) report.Scenario {
	sc := report.Scenario{ScenarioSpec: sweep.ScenarioSpec{Name: name}}
	for _, n := range []int{1, 2, 4, 8} {
		sc.ClosedLoop = append(sc.ClosedLoop, report.Step{Concurrency: n, DurationSeconds: 10,
			RequestsSent: 100 * n, RequestsOK: 100 * n})
	}
	return sc
}

func useCase(scenario string, b sweep.Bound) report.UseCaseCapacity {
	return report.UseCaseCapacity{Scenario: scenario, Mode: sweep.ModeClosedLoop, Bound: b}
}

// TestCapacityRequestRate: the capacity as a request rate is the completed
// rate of the largest step within the smallest closed-loop capacity.
func TestCapacityRequestRate(t *testing.T) {
	busy := headroomScenario("s")
	busy.ClosedLoop[2].Drain = &sweep.DrainResult{Busy: true}
	for _, tc := range []struct {
		name         string
		sc           report.Scenario
		cap          report.Capacity
		rate         float64
		atLeast, has bool
	}{
		{"use case within", headroomScenario("s"), report.Capacity{UseCases: []report.UseCaseCapacity{useCase("s", sweep.Bound{Value: 4})}}, 40, false, true},
		{"interpolated between steps: the last step that met", headroomScenario("s"),
			report.Capacity{UseCases: []report.UseCaseCapacity{useCase("s", sweep.Bound{Value: 6, Approximate: true})}}, 40, false, true},
		{"capacity_on tighter than the thresholds", headroomScenario("s"), report.Capacity{
			UseCases: []report.UseCaseCapacity{useCase("s", sweep.Bound{Value: 8, AtLeast: true})},
			On:       []sweep.RuleCapacity{{Scenario: "s", Mode: sweep.ModeClosedLoop, Rule: "goodput >= 95%", Bound: sweep.Bound{Value: 2}}}}, 20, false, true},
		{"every step held: a lower bound", headroomScenario("s"),
			report.Capacity{UseCases: []report.UseCaseCapacity{useCase("s", sweep.Bound{Value: 8, AtLeast: true})}}, 80, true, true},
		{"below the smallest step", headroomScenario("s"), report.Capacity{UseCases: []report.UseCaseCapacity{useCase("s", sweep.Bound{})}}, 0, false, true},
		{"a step that started busy is left out", busy, report.Capacity{UseCases: []report.UseCaseCapacity{useCase("s", sweep.Bound{Value: 4})}}, 20, false, true},
		{"burst capacity only: none", headroomScenario("s"), report.Capacity{MaxSafeQueue: []report.QueueCapacity{{Scenario: "s", Bound: sweep.Bound{Value: 4}}}}, 0, false, false},
		{"another scenario's capacity: none", headroomScenario("s"), report.Capacity{UseCases: []report.UseCaseCapacity{useCase("t", sweep.Bound{Value: 4})}}, 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &report.Report{Capacity: tc.cap}
			rate, atLeast, ok := CapacityRequestRate(r, &tc.sc)
			if rate != tc.rate || atLeast != tc.atLeast || ok != tc.has {
				t.Errorf("got rate %v, lower bound %v, ok %v; want %v, %v, %v", rate, atLeast, ok, tc.rate, tc.atLeast, tc.has)
			}
		})
	}
}

// headroomTolerance is how far the exported multiple may be from C/R: the
// engine's counter over a 3 s window of 25 req/s counts 75 ± 2 requests.
// A multiple 10 % off fails.
const headroomTolerance = 0.05

// TestLiveTrafficMultipleAgainstSim runs background traffic of a known
// rate R against the simulated engine (which exports vLLM's finished-request
// count, vllm:e2e_request_latency_seconds_count), injects a sweep result of
// known capacity C, and checks slaprobe_capacity_live_traffic_multiple
// against C/R; then that it is absent while the engine is idle, while the
// target is being swept and right after its sweep.
func TestLiveTrafficMultipleAgainstSim(t *testing.T) {
	testproc.QuietLight(t) // an open-loop rate within 5 %: a loaded machine sent 0.61 of it late
	cfg, _, srv, target, pool := decodeBoundSim(t, 50*time.Millisecond)
	const (
		window = 3 * time.Second
		C      = 40.0 // step N=4 of headroomScenario
	)
	var mu sync.Mutex
	snap := sweeper.Snapshot{Enabled: true, Targets: []sweeper.TargetSnapshot{{
		Target:      target.Name,
		Result:      &report.Report{Scenarios: []report.Scenario{headroomScenario("live")}, Capacity: report.Capacity{UseCases: []report.UseCaseCapacity{useCase("live", sweep.Bound{Value: 4})}}},
		LastAttempt: sweeper.Attempt{Finished: time.Now().Add(-time.Hour), Complete: true},
	}}}
	c := NewLiveHeadroom(func() sweeper.Snapshot { mu.Lock(); defer mu.Unlock(); return snap }, pool, window)
	labels := map[string]string{"target": target.Name, "scenario": "live"}
	value := func(name string) (float64, bool) {
		ms := liveFind(t, c, name, labels)
		if len(ms) == 0 {
			return 0, false
		}
		return ms[0].GetGauge().GetValue(), true
	}

	time.Sleep(window) // scrapes of an idle engine
	if v, ok := value("slaprobe_capacity_requests_per_second"); !ok || v != C {
		t.Errorf("slaprobe_capacity_requests_per_second = %v (present %v), want %v", v, ok, C)
	}
	if v, ok := value("slaprobe_capacity_live_traffic_multiple"); ok {
		t.Errorf("idle engine: slaprobe_capacity_live_traffic_multiple = %v, want absent", v)
	}

	// Open loop: request i leaves at start + i/R, so a late send catches up.
	body := fmt.Sprintf(`{"model":%q,"prompt":"traffic","max_tokens":2,"min_tokens":2,"ignore_eos":true}`, cfg.ModelName)
	traffic := func(R float64) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			for i := 0; ctx.Err() == nil; i++ {
				time.Sleep(time.Until(start.Add(time.Duration(float64(i) / R * float64(time.Second)))))
				wg.Add(1)
				go func() {
					defer wg.Done()
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/completions", strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					if resp, err := srv.Client().Do(req); err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				}()
			}
		}()
		return func() { cancel(); wg.Wait() }
	}
	for _, R := range []float64{25, 50} { // requests per second: 1.6× and 0.8×
		stop := traffic(R)
		time.Sleep(window + window/2) // the window holds this rate only
		got, ok := value("slaprobe_capacity_live_traffic_multiple")
		want := C / R
		t.Logf("R = %.0f req/s: multiple %.3f, want C/R = %.0f/%.0f = %.3f (%+.1f%%)", R, got, C, R, want, 100*(got/want-1))
		if !ok || math.Abs(got/want-1) > headroomTolerance {
			t.Errorf("R = %.0f req/s: slaprobe_capacity_live_traffic_multiple = %v (present %v), want %.3f ± %.0f%%", R, got, ok, want, 100*headroomTolerance)
		}
		if lb, ok := value("slaprobe_capacity_live_traffic_multiple_lower_bound"); !ok || lb != 0 {
			t.Errorf("lower bound = %v (present %v), want 0", lb, ok)
		}
		if R == 50 {
			defer stop() // traffic keeps running for the cases below
		} else {
			stop()
		}
	}

	for _, tc := range []struct {
		name string
		set  func(s *sweeper.Snapshot)
	}{
		{"being swept", func(s *sweeper.Snapshot) { s.Running, s.Current, s.Holding = true, target.Name, target.Name }},
		{"swept a moment ago: the window holds the sweep's load", func(s *sweeper.Snapshot) {
			s.Targets[0].LastAttempt.Finished = time.Now().Add(-window / 4)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			saved := snap
			saved.Targets = append([]sweeper.TargetSnapshot(nil), snap.Targets...)
			tc.set(&snap)
			mu.Unlock()
			defer func() { mu.Lock(); snap = saved; mu.Unlock() }()
			if v, ok := value("slaprobe_capacity_live_traffic_multiple"); ok {
				t.Errorf("slaprobe_capacity_live_traffic_multiple = %v, want absent", v)
			}
			if _, ok := value("slaprobe_capacity_requests_per_second"); !ok {
				t.Error("slaprobe_capacity_requests_per_second absent")
			}
		})
	}
}

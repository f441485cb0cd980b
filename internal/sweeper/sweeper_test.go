package sweeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/engine"
	"github.com/slaprobe/slaprobe/prober"
)

// stubRunner answers every request after delay with 10 tokens.
type stubRunner struct {
	delay   time.Duration
	inRun   atomic.Int64
	maxSeen atomic.Int64
	calls   atomic.Int64
}

func (r *stubRunner) Prepare(_ context.Context, t prober.Target, model string, s prober.Scenario) (*prober.Prepared, error) {
	return &prober.Prepared{Target: t.Name, Model: model, Scenario: s}, nil
}

func (r *stubRunner) Run(ctx context.Context, t prober.Target, prep *prober.Prepared) prober.Result {
	n := r.inRun.Add(1)
	defer r.inRun.Add(-1)
	r.calls.Add(1)
	for {
		m := r.maxSeen.Load()
		if n <= m || r.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	start := time.Now()
	res := prober.Result{Target: t.Name, Scenario: prep.Scenario.Name, Start: start, PromptTokens: 10, FirstChunkTokens: 1}
	timer := time.NewTimer(r.delay)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		res.Kind, res.Reason = prober.KindError, prober.ReasonTimeout
		return res
	case <-timer.C:
	}
	res.FirstToken = start.Add(r.delay / 2)
	res.LastToken = time.Now()
	res.OutputTokens = 10
	res.Kind = prober.KindSuccess
	return res
}

type fixture struct {
	cfg     config.SweepConfig
	runner  *stubRunner
	waiting atomic.Int64 // engine's waiting queue, for the pause gate
	scrapes atomic.Int64
	noScrap bool
}

func newFixture(t *testing.T) *fixture {
	cfg := config.DefaultSweepConfig()
	cfg.Enabled = true
	cfg.ClosedLoop.Concurrency = []int{1, 2}
	cfg.ClosedLoop.Warmup = 0
	cfg.ClosedLoop.Duration = model.Duration(30 * time.Millisecond)
	cfg.Burst.Concurrency = []int{1, 4, 512}
	cfg.MaxConcurrency = 4
	cfg.Cooldown = 0
	cfg.Pause.CheckInterval = model.Duration(5 * time.Millisecond)
	cfg.StateFile = filepath.Join(t.TempDir(), "state", "sweep.json")
	return &fixture{cfg: cfg, runner: &stubRunner{delay: 5 * time.Millisecond}}
}

// targets sets up the plans of targets a and b by hand (NewPlan would
// read /v1/models), with an engine whose queue the test controls.
func (f *fixture) targets(_ context.Context, sc config.SweepConfig, _ []string) ([]*Plan, error) {
	s, _ := prober.LookupBuiltin("chatbot")
	plan := func(name string) *Plan {
		p := &Plan{Target: prober.Target{Name: name}, Model: prober.ModelInfo{ID: "m"}, Scenarios: []prober.Scenario{s},
			Options: sc.Options([]prober.Scenario{s})}
		if !f.noScrap {
			p.Engine = func(context.Context) (engine.Snapshot, error) {
				f.scrapes.Add(1)
				return engine.Snapshot{HasQueue: true, Waiting: float64(f.waiting.Load()), HasKVCache: true, KVCacheUsage: 0.1}, nil
			}
		}
		return p
	}
	return []*Plan{plan("a"), plan("b")}, nil
}

func (f *fixture) new(t *testing.T) *Sweeper {
	t.Helper()
	s, err := New(Options{Config: f.cfg, Runner: f.runner, Plans: f.targets})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestTriggerPersistsAndReloads(t *testing.T) {
	f := newFixture(t)
	s := f.new(t)
	if err := s.Trigger("a"); err != nil {
		t.Fatal(err)
	}
	s.Wait()
	snap := s.Snapshot()
	if snap.Running || len(snap.Targets) != 1 || snap.Targets[0].Target != "a" {
		t.Fatalf("snapshot after sweep: %+v", snap)
	}
	res := snap.Targets[0].Result
	if res == nil || !snap.Targets[0].LastAttempt.Complete || snap.Targets[0].LastAttempt.Trigger != TriggerRequest {
		t.Fatalf("attempt %+v result %v", snap.Targets[0].LastAttempt, res)
	}
	sc := res.Scenarios[0]
	if len(sc.ClosedLoop) != 2 || len(sc.Burst) != 2 || sc.Burst[1].Concurrency != 4 {
		t.Errorf("steps: closed loop %d, burst %d; want 2 and 2 (512 is above the ceiling of 4)", len(sc.ClosedLoop), len(sc.Burst))
	}
	if m := f.runner.maxSeen.Load(); m > 4 {
		t.Errorf("%d requests in flight; the ceiling is 4", m)
	}
	// Every step was gated on the engine's metrics, and queue wait read.
	if f.scrapes.Load() < 4 {
		t.Errorf("engine scraped %d times; want at least once per step", f.scrapes.Load())
	}

	// The state file is complete JSON with no temporary left behind.
	entries, _ := os.ReadDir(filepath.Dir(f.cfg.StateFile))
	if len(entries) != 1 {
		t.Errorf("state directory holds %d entries; want only the state file", len(entries))
	}
	// A new sweeper (a restart) loads what the first one measured.
	s2 := f.new(t)
	snap2 := s2.Snapshot()
	if len(snap2.Targets) != 1 || snap2.Targets[0].Result == nil ||
		snap2.Targets[0].Result.Scenarios[0].Burst[1].TTFT != sc.Burst[1].TTFT {
		t.Errorf("after restart: %+v", snap2)
	}
}

func TestBusyAndHandler(t *testing.T) {
	f := newFixture(t)
	f.runner.delay = 50 * time.Millisecond
	f.cfg.ClosedLoop.Duration = model.Duration(300 * time.Millisecond)
	s := f.new(t)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()

	post := func(query string) (int, map[string]any) {
		resp, err := http.Post(srv.URL+"/-/sweep"+query, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	if code, body := post("?target=nope"); code != http.StatusBadRequest || !strings.Contains(body["error"].(string), "unknown target") {
		t.Errorf("unknown target: %d %v", code, body)
	}
	if code, _ := post(""); code != http.StatusAccepted {
		t.Fatalf("first POST: %d; want 202", code)
	}
	if code, body := post(""); code != http.StatusConflict || body["status"] != "busy" {
		t.Errorf("second POST while running: %d %v; want 409 busy", code, body)
	}
	if err := s.Trigger(); !errors.Is(err, ErrBusy) {
		t.Errorf("Trigger while running: %v; want ErrBusy", err)
	}
	resp, err := http.Get(srv.URL + "/-/sweep")
	if err != nil {
		t.Fatal(err)
	}
	var snap Snapshot
	_ = json.NewDecoder(resp.Body).Decode(&snap)
	resp.Body.Close()
	if !snap.Running || snap.Current == "" {
		t.Errorf("GET while running: %+v", snap)
	}
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/-/sweep", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("PUT: %v %v; want 405", resp.StatusCode, err)
	}
	// DELETE stops it; the attempt is recorded as incomplete.
	req, _ = http.NewRequest(http.MethodDelete, srv.URL+"/-/sweep", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("DELETE: %v", err)
	}
	s.Wait()
	if snap := s.Snapshot(); snap.Running || len(snap.Targets) != 1 || snap.Targets[0].LastAttempt.Complete {
		t.Errorf("after DELETE: %+v", snap)
	}
	if code, _ := post(""); code != http.StatusAccepted {
		t.Errorf("POST after the sweep stopped: %d; want 202", code)
	}
}

func TestPause(t *testing.T) {
	f := newFixture(t)
	f.waiting.Store(3)
	s := f.new(t)
	if err := s.Trigger("a"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.Snapshot().Paused["a"] != PauseWaiting {
		if time.Now().After(deadline) {
			t.Fatal("sweep never reported the pause")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if c := f.runner.calls.Load(); c != 0 {
		t.Errorf("%d requests sent while the engine had requests waiting", c)
	}
	f.waiting.Store(0)
	s.Wait()
	snap := s.Snapshot()
	if len(snap.Paused) != 0 || !snap.Targets[0].LastAttempt.Complete {
		t.Errorf("after resume: paused %v attempt %+v", snap.Paused, snap.Targets[0].LastAttempt)
	}

	// Paused longer than max_pause: the sweep gives up and keeps the
	// previous complete result.
	f.cfg.Pause.MaxPause = model.Duration(30 * time.Millisecond)
	f.waiting.Store(1)
	s2 := f.new(t)
	if err := s2.Trigger("a"); err != nil {
		t.Fatal(err)
	}
	s2.Wait()
	snap = s2.Snapshot()
	att := snap.Targets[0].LastAttempt
	if att.Complete || !strings.Contains(att.Error, "paused too long") {
		t.Errorf("attempt %+v; want incomplete, paused too long", att)
	}
	if r := snap.Targets[0].Result; r == nil || r.Meta.Interrupted {
		t.Errorf("the previous complete result was replaced: %+v", r)
	}
}

func TestRequireEngineMetrics(t *testing.T) {
	f := newFixture(t)
	f.noScrap = true
	f.cfg.Pause.MaxPause = model.Duration(20 * time.Millisecond)
	s := f.new(t)
	_ = s.Trigger("a")
	s.Wait()
	if att := s.Snapshot().Targets[0].LastAttempt; att.Complete || !strings.Contains(att.Error, PauseUnavailable) {
		t.Errorf("attempt %+v; want it paused for %s", att, PauseUnavailable)
	}
	if f.runner.calls.Load() != 0 {
		t.Error("requests were sent to a target whose load cannot be checked")
	}

	f.cfg.Pause.RequireEngineMetrics = false
	s2 := f.new(t)
	_ = s2.Trigger("a")
	s2.Wait()
	if att := s2.Snapshot().Targets[0].LastAttempt; !att.Complete {
		t.Errorf("attempt %+v; want complete with require_engine_metrics off", att)
	}
}

func TestSchedule(t *testing.T) {
	f := newFixture(t)
	loc := time.UTC
	at := func(h, m int) time.Time { return time.Date(2025, 6, 2, h, m, 0, 0, loc) }
	var now atomic.Pointer[time.Time]
	set := func(t time.Time) { now.Store(&t) }
	set(at(1, 0))
	f.cfg.Schedule.Window = "02:00-05:00"
	s, err := New(Options{Config: f.cfg, Runner: f.runner, Plans: f.targets, Now: func() time.Time { return *now.Load() }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	check := func(when time.Time, want bool) {
		t.Helper()
		set(when)
		if got, _ := s.due(when); got != want {
			t.Errorf("due at %s = %v; want %v", when.Format("15:04"), got, want)
		}
	}
	// Window only: once per window occurrence.
	check(at(1, 59), false)
	check(at(2, 0), true)
	s.mu.Lock()
	s.st.LastScheduled = at(2, 0)
	s.mu.Unlock()
	check(at(4, 0), false)
	check(at(2, 0).AddDate(0, 0, 1), true)
	if _, dl := s.due(at(2, 30).AddDate(0, 0, 1)); !dl.Equal(at(5, 0).AddDate(0, 0, 1)) {
		t.Errorf("deadline %v; want the window's end", dl)
	}

	// Interval and window: every 30m inside the window.
	f.cfg.Schedule.Interval = model.Duration(30 * time.Minute)
	if err := s.SetConfig(f.cfg); err != nil {
		t.Fatal(err)
	}
	check(at(2, 20), false)
	check(at(2, 30), true)
	check(at(6, 0), false)

	// Interval only; disabled never runs.
	f.cfg.Schedule.Window = ""
	_ = s.SetConfig(f.cfg)
	check(at(2, 29), false)
	check(at(7, 0), true)
	f.cfg.Enabled = false
	_ = s.SetConfig(f.cfg)
	check(at(9, 0), false)

	// A wrapping window.
	w, _ := config.ParseWindow("22:00-04:00")
	for h, want := range map[int]bool{21: false, 22: true, 23: true, 0: true, 3: true, 4: false} {
		if got := w.Contains(at(h, 0)); got != want {
			t.Errorf("22:00-04:00 contains %02d:00 = %v", h, got)
		}
	}
	if open := w.OpenedAt(at(1, 0)); !open.Equal(at(22, 0).AddDate(0, 0, -1)) {
		t.Errorf("opened at %v; want yesterday 22:00", open)
	}
}

func TestWindowDeadlineStopsSweep(t *testing.T) {
	f := newFixture(t)
	f.cfg.ClosedLoop.Duration = model.Duration(10 * time.Second)
	s := f.new(t)
	start := time.Now()
	if err := s.start(TriggerSchedule, []string{"a"}, time.Now().Add(80*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	s.Wait()
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("sweep ran %v past its window", d)
	}
	att := s.Snapshot().Targets[0].LastAttempt
	if att.Complete || !strings.Contains(att.Error, "window closed") || att.Trigger != TriggerSchedule {
		t.Errorf("attempt %+v; want stopped by the window", att)
	}
}

func TestRunScheduled(t *testing.T) {
	f := newFixture(t)
	f.cfg.Schedule.Interval = model.Duration(time.Hour)
	s, err := New(Options{Config: f.cfg, Runner: f.runner, Plans: f.targets, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for len(s.Snapshot().Targets) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("scheduled sweep did not run")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	for _, ts := range s.Snapshot().Targets {
		if ts.LastAttempt.Trigger != TriggerSchedule || !ts.LastAttempt.Complete {
			t.Errorf("%s: %+v", ts.Target, ts.LastAttempt)
		}
	}
	// The schedule survives a restart: no second sweep within the hour.
	s2 := f.new(t)
	if due, _ := s2.due(time.Now()); due {
		t.Error("a restarted sweeper wants to sweep again right away")
	}
}

func TestCorruptStateFile(t *testing.T) {
	f := newFixture(t)
	_ = os.MkdirAll(filepath.Dir(f.cfg.StateFile), 0o755)
	if err := os.WriteFile(f.cfg.StateFile, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := f.new(t) // logs and starts empty
	if len(s.Snapshot().Targets) != 0 {
		t.Error("corrupt state produced targets")
	}
	if err := s.Trigger("a"); err != nil {
		t.Fatal(err)
	}
	s.Wait()
	if _, err := loadState(f.cfg.StateFile); err != nil {
		t.Errorf("state after a sweep: %v", err)
	}
}

// holdRunner is a stubRunner that records, for every request, which
// targets were held when it ran.
type holdRunner struct {
	stubRunner
	holds   *prober.Holds
	holding func() string // the sweeper's Snapshot().Holding
	mu      sync.Mutex
	bad     []string
}

func (r *holdRunner) Run(ctx context.Context, t prober.Target, prep *prober.Prepared) prober.Result {
	for _, other := range []string{"a", "b"} {
		if r.holds.Held(other) != (other == t.Name) {
			r.mu.Lock()
			r.bad = append(r.bad, fmt.Sprintf("request to %s ran with Held(%s) = %v", t.Name, other, r.holds.Held(other)))
			r.mu.Unlock()
		}
	}
	if h := r.holding(); h != t.Name {
		r.mu.Lock()
		r.bad = append(r.bad, fmt.Sprintf("request to %s ran with the snapshot naming %q held", t.Name, h))
		r.mu.Unlock()
	}
	return r.stubRunner.Run(ctx, t, prep)
}

// TestHoldsScheduledProbes: each target's scheduled probes are held for
// the whole of its own sweep, and only then; the snapshot names the target
// held.
func TestHoldsScheduledProbes(t *testing.T) {
	f := newFixture(t)
	var holds prober.Holds
	runner := &holdRunner{stubRunner: stubRunner{delay: 5 * time.Millisecond}, holds: &holds}
	s, err := New(Options{Config: f.cfg, Runner: runner, Plans: f.targets, Hold: holds.Hold})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	runner.holding = func() string { return s.Snapshot().Holding }
	// A scheduled probe of "a" in flight: the sweep waits for it.
	leave, _ := holds.Enter(context.Background(), "a")
	if err := s.Trigger(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := runner.calls.Load(); n != 0 {
		t.Fatalf("%d sweep requests sent while a scheduled probe of the target was in flight", n)
	}
	if !holds.Held("a") {
		t.Fatal("target a not held while its sweep waits for the probe in flight")
	}
	leave()
	s.Wait()
	if runner.calls.Load() == 0 {
		t.Fatal("no sweep request ran")
	}
	runner.mu.Lock()
	defer runner.mu.Unlock()
	for _, b := range runner.bad {
		t.Error(b)
	}
	if holds.Held("a") || holds.Held("b") {
		t.Error("targets still held after the sweep")
	}
	if snap := s.Snapshot(); snap.Holding != "" {
		t.Errorf("snapshot names %q held after the sweep", snap.Holding)
	}
}

// TestDisabledRefusesOnDemand: with sweep.enabled false nothing loads the
// target, not even POST /-/sweep (403); GET still answers.
func TestDisabledRefusesOnDemand(t *testing.T) {
	f := newFixture(t)
	f.cfg.Enabled = false
	s := f.new(t)
	if err := s.Trigger(); !errors.Is(err, ErrDisabled) {
		t.Fatalf("Trigger with sweeps disabled: %v; want ErrDisabled", err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/-/sweep", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || body["status"] != "disabled" || !strings.Contains(body["error"], "sweep.enabled") {
		t.Errorf("POST with sweeps disabled: %d %v; want 403 naming sweep.enabled", resp.StatusCode, body)
	}
	if resp, err := http.Get(srv.URL + "/-/sweep"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET with sweeps disabled: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if n := f.runner.calls.Load(); n != 0 {
		t.Errorf("%d requests sent with sweeps disabled", n)
	}
	// Enabling it by reload lets on-demand sweeps run.
	f.cfg.Enabled = true
	if err := s.SetConfig(f.cfg); err != nil {
		t.Fatal(err)
	}
	if err := s.Trigger("a"); err != nil {
		t.Fatalf("Trigger after enabling: %v", err)
	}
	s.Wait()
}

// nextDue must agree with due: scanning minute by minute, the first minute due says yes is the time
// nextDue gave; and when due says yes now, nextDue is not in the future.
func TestNextScheduledAgreesWithDue(t *testing.T) {
	f := newFixture(t)
	at := func(d, h, m int) time.Time { return time.Date(2025, 6, d, h, m, 0, 0, time.UTC) }
	s, err := New(Options{Config: f.cfg, Runner: f.runner, Plans: f.targets, Now: func() time.Time { return at(2, 0, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cases := []struct {
		window   string
		interval time.Duration
		last     time.Time
	}{
		{"", 6 * time.Hour, time.Time{}},
		{"", 6 * time.Hour, at(1, 22, 0)},
		{"", 6 * time.Hour, at(1, 10, 0)}, // overdue
		{"", 0, time.Time{}},              // on demand only
		{"02:00-05:00", 0, time.Time{}},
		{"02:00-05:00", 0, at(1, 2, 0)},
		{"02:00-05:00", 0, at(2, 2, 0)},
		{"02:00-05:00", 30 * time.Minute, at(2, 2, 0)},
		{"02:00-05:00", 12 * time.Hour, at(1, 2, 0)}, // due at 14:00 outside the window: the window's opening
		{"02:00-05:00", 24 * time.Hour, at(1, 2, 30)},
		{"22:00-04:00", 0, at(1, 23, 0)},
		{"22:00-04:00", 2 * time.Hour, at(1, 23, 0)},
	}
	// The time an overdue schedule became due, exactly: the alert measures lateness from it.
	overdue := []struct {
		window    string
		interval  time.Duration
		last, now time.Time
		want      time.Time
	}{
		{"", 6 * time.Hour, at(1, 10, 0), at(2, 0, 0), at(1, 16, 0)},
		{"", 6 * time.Hour, time.Time{}, at(2, 0, 0), at(2, 0, 0)},                // never ran: due now
		{"02:00-05:00", 0, at(1, 2, 0), at(2, 3, 0), at(2, 2, 0)},                 // the window's opening
		{"02:00-05:00", 12 * time.Hour, at(1, 2, 0), at(2, 2, 10), at(2, 2, 0)},   // interval ran out outside the window
		{"02:00-05:00", 30 * time.Minute, at(2, 2, 0), at(2, 3, 0), at(2, 2, 30)}, // inside the window
		{"22:00-04:00", 2 * time.Hour, at(1, 23, 0), at(2, 3, 0), at(2, 1, 0)},    // across midnight
	}
	for _, c := range overdue {
		f.cfg.Schedule.Window, f.cfg.Schedule.Interval = c.window, model.Duration(c.interval)
		if err := s.SetConfig(f.cfg); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		s.st.LastScheduled = c.last
		got := s.nextDue(c.now)
		s.mu.Unlock()
		if !got.Equal(c.want) {
			t.Errorf("window %q interval %s last %s, at %s: next scheduled %v; want %v",
				c.window, c.interval, c.last.Format("02 15:04"), c.now.Format("02 15:04"), got, c.want)
		}
	}
	for _, c := range cases {
		f.cfg.Schedule.Window, f.cfg.Schedule.Interval = c.window, model.Duration(c.interval)
		if err := s.SetConfig(f.cfg); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		s.st.LastScheduled = c.last
		s.mu.Unlock()
		for _, now := range []time.Time{at(2, 0, 0), at(2, 1, 59), at(2, 2, 10), at(2, 3, 0), at(2, 4, 30), at(2, 13, 0), at(2, 23, 30)} {
			if now.Before(c.last) {
				continue // the last scheduled sweep is never in the future
			}
			s.mu.Lock()
			next := s.nextDue(now)
			s.mu.Unlock()
			name := fmt.Sprintf("window %q interval %s last %s, at %s", c.window, c.interval, c.last.Format("02 15:04"), now.Format("02 15:04"))
			if due, _ := s.due(now); due {
				if next.IsZero() || next.After(now) {
					t.Errorf("%s: due now, but next scheduled %v", name, next)
				}
				continue
			}
			var first time.Time
			for m := now; m.Before(now.Add(72 * time.Hour)); m = m.Add(time.Minute) {
				if due, _ := s.due(m); due {
					first = m
					break
				}
			}
			if !next.Equal(first) {
				t.Errorf("%s: next scheduled %v; due first says yes at %v", name, next, first)
			}
		}
	}
}

// A due time that no sweep started for stays exported until one starts: after a start that failed
// (the scheduler moved on to the next interval) and after a window that closed while an earlier sweep
// still ran. Otherwise SlaprobeSweepOverdue could not see either.
func TestNextScheduledRemembersMissed(t *testing.T) {
	at := func(d, h, m int) time.Time { return time.Date(2025, 6, d, h, m, 0, 0, time.UTC) }
	f := newFixture(t)
	f.cfg.Schedule.Interval = model.Duration(time.Hour)
	failing := func(context.Context, config.SweepConfig, []string) ([]*Plan, error) {
		return nil, errors.New("target a: /v1/models: connection refused")
	}
	s, err := New(Options{Config: f.cfg, Runner: f.runner, Plans: failing})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	next := func(now time.Time) time.Time {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.nextScheduled(now)
	}
	s.tick(at(2, 0, 0)) // due (never ran); the start fails
	if got := next(at(2, 0, 30)); !got.Equal(at(2, 0, 0)) {
		t.Errorf("after a failed start: next scheduled %v; want the missed %v", got, at(2, 0, 0))
	}
	s.tick(at(2, 1, 0)) // due again; fails again: still late since 00:00
	if got := next(at(2, 1, 30)); !got.Equal(at(2, 0, 0)) {
		t.Errorf("after two failed starts: next scheduled %v; want %v", got, at(2, 0, 0))
	}

	// A window that opens and closes while an earlier sweep runs.
	f2 := newFixture(t)
	f2.cfg.Schedule.Window = "02:00-03:00"
	clock := at(2, 2, 5)
	s2, err := New(Options{Config: f2.cfg, Runner: f2.runner, Plans: f2.targets, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	s2.mu.Lock()
	s2.st.LastScheduled = at(1, 2, 0)
	s2.running = true
	s2.mu.Unlock()
	next2 := func(now time.Time) time.Time {
		s2.mu.Lock()
		defer s2.mu.Unlock()
		return s2.nextScheduled(now)
	}
	s2.tick(at(2, 2, 5))
	s2.tick(at(2, 3, 30)) // the window has closed
	if got := next2(at(2, 3, 30)); !got.Equal(at(2, 2, 0)) {
		t.Errorf("after a missed window: next scheduled %v; want its opening %v", got, at(2, 2, 0))
	}
	s2.mu.Lock()
	s2.running = false
	s2.mu.Unlock()
	clock = at(3, 2, 0)
	s2.tick(clock) // the next window: the sweep starts
	s2.Wait()
	if got := next2(at(3, 2, 1)); !got.Equal(at(4, 2, 0)) {
		t.Errorf("after a sweep started: next scheduled %v; want the next window %v", got, at(4, 2, 0))
	}
}

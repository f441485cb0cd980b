package prober

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// schedObserver records what the scheduler publishes.
type schedObserver struct {
	mu        sync.Mutex
	results   []Result
	enabled   map[string]bool // "target/model/scenario"
	planned   map[string]float64
	forgotten []string // "target" or "target/model"
}

func newSchedObserver() *schedObserver {
	return &schedObserver{enabled: map[string]bool{}, planned: map[string]float64{}}
}

func (o *schedObserver) Observe(r *Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.results = append(o.results, *r)
}

func (o *schedObserver) SetScenarioEnabled(target, model, scenario, _ string, enabled bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.enabled[target+"/"+model+"/"+scenario] = enabled
}

func (o *schedObserver) SetPlannedTokensPerHour(target string, v float64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.planned[target] = v
}

func (o *schedObserver) ForgetTarget(target string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.forgotten = append(o.forgotten, target)
	for k := range o.enabled {
		if len(k) > len(target) && k[:len(target)+1] == target+"/" {
			delete(o.enabled, k)
		}
	}
}

func (o *schedObserver) ForgetModel(target, model string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.forgotten = append(o.forgotten, target+"/"+model)
}

func (o *schedObserver) snapshot() ([]Result, map[string]bool, map[string]float64, []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	en := make(map[string]bool, len(o.enabled))
	for k, v := range o.enabled {
		en[k] = v
	}
	pl := make(map[string]float64, len(o.planned))
	for k, v := range o.planned {
		pl[k] = v
	}
	return append([]Result(nil), o.results...), en, pl, append([]string(nil), o.forgotten...)
}

// schedFastSleep runs scheduler time 1000× faster than real time.
func schedFastSleep(ctx context.Context, d time.Duration) bool { return schedSleep(ctx, d/1000) }

func schedScenario(name string, in int, interval time.Duration) Scenario {
	return Scenario{Name: name, InputTokens: in, OutputTokens: 256, Interval: interval, Timeout: time.Minute}
}

func schedStaticModels(models ...ModelInfo) func(context.Context, Target) ([]ModelInfo, error) {
	return func(context.Context, Target) ([]ModelInfo, error) { return models, nil }
}

func schedOK(t Target, model string, s Scenario) Result {
	return Result{Target: t.Name, Model: model, Scenario: s.Name, Kind: KindSuccess}
}

// runFor runs the scheduler until cond holds (checked every few ms) or the
// deadline passes, then stops it and waits for Run to return.
func schedRunFor(t *testing.T, s *Scheduler, deadline time.Duration, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	end := time.Now().Add(deadline)
	for time.Now().Before(end) && !cond() {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestSchedulerOneProbeInFlightPerTarget(t *testing.T) {
	var inFlight [2]atomic.Int32
	var maxSeen [2]atomic.Int32
	var total atomic.Int32
	probe := func(ctx context.Context, tg Target, model string, s Scenario, think ThinkFunc) Result {
		i := 0
		if tg.Name == "b" {
			i = 1
		}
		n := inFlight[i].Add(1)
		for {
			m := maxSeen[i].Load()
			if n <= m || maxSeen[i].CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(3 * time.Millisecond)
		inFlight[i].Add(-1)
		total.Add(1)
		return schedOK(tg, model, s)
	}
	scenarios := []Scenario{
		schedScenario("s1", 100, time.Second), schedScenario("s2", 100, time.Second),
		schedScenario("s3", 100, time.Second), schedScenario("s4", 100, time.Second),
	}
	s := NewScheduler([]ScheduledTarget{
		{Target: Target{Name: "a", Model: "m"}, Scenarios: scenarios},
		{Target: Target{Name: "b", Model: "m"}, Scenarios: scenarios},
	}, SchedulerOptions{
		Probe: probe, ListModels: schedStaticModels(ModelInfo{ID: "m"}),
		Sleep: schedFastSleep, Jitter: 0.2,
	})
	schedRunFor(t, s, 3*time.Second, func() bool { return total.Load() >= 200 })
	if total.Load() < 50 {
		t.Fatalf("only %d probes ran", total.Load())
	}
	for i, name := range []string{"a", "b"} {
		if got := maxSeen[i].Load(); got != 1 {
			t.Errorf("target %s: %d probes in flight at once, want at most 1", name, got)
		}
	}
}

func TestSchedulerMaxInFlightSetting(t *testing.T) {
	var inFlight, maxSeen, total atomic.Int32
	release := make(chan struct{})
	probe := func(ctx context.Context, tg Target, model string, s Scenario, think ThinkFunc) Result {
		n := inFlight.Add(1)
		for {
			m := maxSeen.Load()
			if n <= m || maxSeen.CompareAndSwap(m, n) {
				break
			}
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		inFlight.Add(-1)
		total.Add(1)
		return schedOK(tg, model, s)
	}
	var scenarios []Scenario
	for i := range 5 {
		scenarios = append(scenarios, schedScenario(fmt.Sprintf("s%d", i), 100, time.Second))
	}
	s := NewScheduler([]ScheduledTarget{{Target: Target{Name: "a", Model: "m"}, Scenarios: scenarios}},
		SchedulerOptions{Probe: probe, ListModels: schedStaticModels(), Sleep: schedFastSleep, MaxInFlightPerTarget: 2})
	schedRunFor(t, s, 2*time.Second, func() bool { return inFlight.Load() >= 2 })
	close(release)
	if got := maxSeen.Load(); got != 2 {
		t.Errorf("max in flight = %d, want 2", got)
	}
}

func TestSchedulerJitterBounds(t *testing.T) {
	const interval = 30 * time.Second
	const jitter = 0.2
	var mu sync.Mutex
	var delays []time.Duration
	var probes atomic.Int32
	sleep := func(ctx context.Context, d time.Duration) bool {
		mu.Lock()
		delays = append(delays, d)
		mu.Unlock()
		return schedFastSleep(ctx, d/100) // 100 000× faster: fast enough for many rounds
	}
	probe := func(ctx context.Context, tg Target, model string, s Scenario, think ThinkFunc) Result {
		probes.Add(1)
		return schedOK(tg, model, s)
	}
	s := NewScheduler([]ScheduledTarget{{Target: Target{Name: "a", Model: "m"}, Scenarios: []Scenario{schedScenario("s", 100, interval)}}},
		SchedulerOptions{Probe: probe, ListModels: schedStaticModels(), Sleep: sleep, Jitter: jitter, FirstProbeMaxDelay: 10 * time.Second})
	schedRunFor(t, s, 3*time.Second, func() bool { return probes.Load() >= 300 })

	mu.Lock()
	defer mu.Unlock()
	if len(delays) < 100 {
		t.Fatalf("only %d sleeps", len(delays))
	}
	if first := delays[0]; first < 0 || first >= 10*time.Second {
		t.Errorf("first delay %v, want in [0, 10s)", first)
	}
	lo, hi := time.Duration(float64(interval)*(1-jitter)), time.Duration(float64(interval)*(1+jitter))
	minD, maxD := hi, lo
	for _, d := range delays[1:] {
		if d < lo || d > hi {
			t.Fatalf("delay %v outside [%v, %v]", d, lo, hi)
		}
		minD, maxD = min(minD, d), max(maxD, d)
	}
	// The spread is actually used, not a constant.
	if maxD-minD < (hi-lo)/2 {
		t.Errorf("delays span only [%v, %v] of [%v, %v]", minD, maxD, lo, hi)
	}
}

func TestSchedulerNextDelayExtremes(t *testing.T) {
	for _, tc := range []struct {
		u    float64
		want time.Duration
	}{{0, 80 * time.Second}, {0.5, 100 * time.Second}, {1, 120 * time.Second}} {
		s := NewScheduler(nil, SchedulerOptions{Jitter: 0.2, Rand: func() float64 { return tc.u }})
		if got := s.nextDelay(100 * time.Second); got != tc.want {
			t.Errorf("u=%g: delay %v, want %v", tc.u, got, tc.want)
		}
	}
}

func TestSchedulerFirstProbeBoundedByInterval(t *testing.T) {
	var mu sync.Mutex
	first := map[time.Duration]bool{}
	sleep := func(ctx context.Context, d time.Duration) bool {
		mu.Lock()
		first[d] = true
		mu.Unlock()
		<-ctx.Done()
		return false
	}
	s := NewScheduler([]ScheduledTarget{{Target: Target{Name: "a", Model: "m"}, Scenarios: []Scenario{
		schedScenario("short", 100, 2*time.Second), schedScenario("long", 100, time.Hour),
	}}}, SchedulerOptions{
		Probe: func(context.Context, Target, string, Scenario, ThinkFunc) Result { return Result{} }, ListModels: schedStaticModels(),
		Sleep: sleep, Rand: func() float64 { return 0.999 },
	})
	schedRunFor(t, s, time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(first) == 2 })
	mu.Lock()
	defer mu.Unlock()
	for d := range first {
		if d >= 10*time.Second {
			t.Errorf("first delay %v, want < 10s", d)
		}
	}
	if !first[time.Duration(0.999*float64(2*time.Second))] {
		t.Errorf("first delays %v: want one bounded by the 2s interval", first)
	}
}

// modelsServer serves /v1/models like vLLM.
func schedModelsServer(t *testing.T, body func() string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body())
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestSchedulerDisablesScenarioOverMaxModelLen(t *testing.T) {
	srv := schedModelsServer(t, func() string {
		return `{"object":"list","data":[{"id":"lora","root":"/adapters/x","max_model_len":null},{"id":"qwen","root":"/models/qwen","max_model_len":4096}]}`
	})
	obs := newSchedObserver()
	var mu sync.Mutex
	probed := map[string]string{}
	probe := func(ctx context.Context, tg Target, model string, s Scenario, think ThinkFunc) Result {
		mu.Lock()
		probed[s.Name] = model
		mu.Unlock()
		return schedOK(tg, model, s)
	}
	fits, tooLong := schedScenario("chatbot", 1024, time.Minute), schedScenario("rag", 4096, time.Minute)
	s := NewScheduler([]ScheduledTarget{{Target: Target{Name: "a", BaseURL: srv.URL}, Scenarios: []Scenario{fits, tooLong}}},
		SchedulerOptions{Probe: probe, Observer: obs, Sleep: schedFastSleep})
	schedRunFor(t, s, 2*time.Second, func() bool { r, _, _, _ := obs.snapshot(); return len(r) >= 5 })

	_, enabled, planned, _ := obs.snapshot()
	if e, ok := enabled["a/qwen/chatbot"]; !ok || !e {
		t.Errorf("chatbot enabled = %v (set: %v), want true", e, ok)
	}
	if e, ok := enabled["a/qwen/rag"]; !ok || e {
		t.Errorf("rag enabled = %v (set: %v), want false", e, ok)
	}
	if d, maxLen := s.ScenarioDisabled("a", "rag"); !d || maxLen != 4096 {
		t.Errorf("ScenarioDisabled(a, rag) = %v, %d; want true, 4096", d, maxLen)
	}
	if d, _ := s.ScenarioDisabled("a", "chatbot"); d {
		t.Error("ScenarioDisabled(a, chatbot) = true, want false")
	}
	mu.Lock()
	defer mu.Unlock()
	if _, ok := probed["rag"]; ok {
		t.Error("the scenario over max_model_len was probed")
	}
	if probed["chatbot"] != "qwen" {
		t.Errorf("probed model %q, want the base model qwen (LoRA adapters have no max_model_len)", probed["chatbot"])
	}
	if want := float64(1024+256) * 60; planned["a"] != want {
		t.Errorf("planned tokens/hour = %g, want %g (enabled scenarios only)", planned["a"], want)
	}
}

func TestSchedulerModelChange(t *testing.T) {
	var serving atomic.Value
	serving.Store("m1")
	var invalidated atomic.Int32
	obs := newSchedObserver()
	probe := func(ctx context.Context, tg Target, model string, s Scenario, think ThinkFunc) Result {
		if model != serving.Load().(string) {
			err := &HTTPError{StatusCode: 404, Message: "model not found"}
			return Result{Target: tg.Name, Model: model, Scenario: s.Name, Kind: KindError, Reason: ReasonHTTP4xx, Err: err}
		}
		return schedOK(tg, model, s)
	}
	list := func(context.Context, Target) ([]ModelInfo, error) {
		return []ModelInfo{{ID: serving.Load().(string), MaxModelLen: 100000}}, nil
	}
	s := NewScheduler([]ScheduledTarget{{Target: Target{Name: "a"}, Scenarios: []Scenario{schedScenario("chatbot", 1024, time.Second)}}},
		SchedulerOptions{
			Probe: probe, ListModels: list, Observer: obs, Sleep: schedFastSleep,
			ModelRefreshInterval: time.Hour, // only a 404 can notice the change
			Invalidate:           func(Target, string) { invalidated.Add(1) },
		})
	switched := false
	schedRunFor(t, s, 5*time.Second, func() bool {
		res, _, _, _ := obs.snapshot()
		if !switched && len(res) >= 3 {
			serving.Store("m2")
			switched = true
		}
		return switched && len(res) > 0 && res[len(res)-1].Model == "m2" && res[len(res)-1].Kind == KindSuccess
	})
	res, enabled, _, forgotten := obs.snapshot()
	if last := res[len(res)-1]; last.Model != "m2" || last.Kind != KindSuccess {
		t.Fatalf("last probe %s/%s, want a success on m2", last.Model, last.Kind)
	}
	if !schedContains(forgotten, "a") {
		t.Errorf("ForgetTarget not called on model change; forgotten=%v", forgotten)
	}
	if invalidated.Load() == 0 {
		t.Error("calibrations not invalidated on model change")
	}
	if !enabled["a/m2/chatbot"] {
		t.Errorf("scenario not enabled under the new model: %v", enabled)
	}
	if got := s.Models()["a"]; got != "m2" {
		t.Errorf("Models()[a] = %q, want m2", got)
	}
}

func schedContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestSchedulerKnownModelIsNoChange(t *testing.T) {
	obs := newSchedObserver()
	s := NewScheduler([]ScheduledTarget{{Target: Target{Name: "a"}, Scenarios: []Scenario{schedScenario("chatbot", 1024, time.Second)}}},
		SchedulerOptions{
			Probe: func(ctx context.Context, tg Target, model string, sc Scenario, think ThinkFunc) Result {
				return schedOK(tg, model, sc)
			},
			ListModels: schedStaticModels(ModelInfo{ID: "m1"}), Observer: obs, Sleep: schedFastSleep,
			KnownModels: map[string]string{"a": "m1"},
		})
	schedRunFor(t, s, 2*time.Second, func() bool { r, _, _, _ := obs.snapshot(); return len(r) >= 2 })
	if _, _, _, forgotten := obs.snapshot(); schedContains(forgotten, "a") {
		t.Errorf("a restart with the same model forgot the target's series")
	}
}

func TestSchedulerUnknownModelProbesAndForgetsEmptyModel(t *testing.T) {
	var up atomic.Bool
	obs := newSchedObserver()
	list := func(context.Context, Target) ([]ModelInfo, error) {
		if !up.Load() {
			return nil, errors.New("connection refused")
		}
		return []ModelInfo{{ID: "m"}}, nil
	}
	probe := func(ctx context.Context, tg Target, model string, s Scenario, think ThinkFunc) Result {
		if model == "" {
			return Result{Target: tg.Name, Scenario: s.Name, Kind: KindError, Reason: ReasonConnectionRefused}
		}
		return schedOK(tg, model, s)
	}
	s := NewScheduler([]ScheduledTarget{{Target: Target{Name: "a"}, Scenarios: []Scenario{schedScenario("chatbot", 1024, time.Second)}}},
		SchedulerOptions{Probe: probe, ListModels: list, Observer: obs, Sleep: schedFastSleep})
	schedRunFor(t, s, 10*time.Second, func() bool {
		res, _, _, _ := obs.snapshot()
		if len(res) >= 2 {
			up.Store(true)
		}
		return len(res) > 0 && res[len(res)-1].Model == "m"
	})
	res, _, _, forgotten := obs.snapshot()
	if res[0].Model != "" || res[0].Reason != ReasonConnectionRefused {
		t.Errorf("first result %q/%q, want model \"\" and connection_refused", res[0].Model, res[0].Reason)
	}
	if res[len(res)-1].Model != "m" {
		t.Fatalf("model never detected after the target came up")
	}
	if !schedContains(forgotten, "a/") {
		t.Errorf("series with model=\"\" not forgotten once the model was known: %v", forgotten)
	}
	if schedContains(forgotten, "a") {
		t.Errorf("first detection treated as a model change: %v", forgotten)
	}
}

type schedHook struct{ before, after atomic.Int32 }

func (h *schedHook) BeforeProbe(context.Context, Target, Scenario) { h.before.Add(1) }
func (h *schedHook) AfterProbe(*Result)                            { h.after.Add(1) }

func TestSchedulerStopCancelsInFlight(t *testing.T) {
	started := make(chan struct{}, 1)
	var cancelled atomic.Bool
	probe := func(ctx context.Context, tg Target, model string, s Scenario, think ThinkFunc) Result {
		select {
		case started <- struct{}{}:
		default:
		}
		<-ctx.Done()
		cancelled.Store(true)
		return Result{Target: tg.Name, Model: model, Scenario: s.Name, Kind: KindError, Reason: ReasonConnection, Err: ctx.Err()}
	}
	obs := newSchedObserver()
	hook := &schedHook{}
	s := NewScheduler([]ScheduledTarget{{Target: Target{Name: "a", Model: "m"}, Scenarios: []Scenario{schedScenario("chatbot", 1024, time.Second)}}},
		SchedulerOptions{Probe: probe, ListModels: schedStaticModels(), Observer: obs, Sleep: schedFastSleep, Hooks: []ProbeHook{hook}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("no probe started")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if !cancelled.Load() {
		t.Error("the probe in flight was not cancelled")
	}
	if res, _, _, _ := obs.snapshot(); len(res) != 0 {
		t.Errorf("a cancelled probe was recorded: %+v", res)
	}
	if b, a := hook.before.Load(), hook.after.Load(); b != 1 || a != 1 {
		t.Errorf("hooks: %d before, %d after; want 1 and 1", b, a)
	}
}

func TestPlannedTokensPerHour(t *testing.T) {
	got := PlannedTokensPerHour([]Scenario{
		{InputTokens: 1024, OutputTokens: 256, Interval: 30 * time.Second},
		{InputTokens: 4096, OutputTokens: 256, Interval: time.Minute},
	})
	if want := 1280.0*120 + 4352*60; got != want {
		t.Errorf("PlannedTokensPerHour = %g, want %g", got, want)
	}
	// A conversation comes round every interval (counted from its end) plus
	// its think time: 60 s + 2 × 20 s mean, so 36 conversations an hour of
	// (1000+100) + (1600+100) + (2200+100) tokens (each follow-up replays the
	// 100-token answer before it, then adds 500).
	conv := Scenario{InputTokens: 1000, OutputTokens: 100, Interval: time.Minute,
		Conversation: Conversation{Turns: 3, NewTokens: 500, ThinkTime: ThinkTime{Min: 10 * time.Second, Max: 30 * time.Second}}}
	if got, want := PlannedTokensPerHour([]Scenario{conv}), 5100.0*36; got != want {
		t.Errorf("PlannedTokensPerHour(conversation with think time) = %g, want %g", got, want)
	}
}

// NextProbe tells when each loop wakes: unknown before the loop starts,
// then the interval after the last probe (the sleep here never returns, so
// the time stays put).
func TestSchedulerNextProbe(t *testing.T) {
	probed := make(chan struct{}, 1)
	s := NewScheduler([]ScheduledTarget{{Target: Target{Name: "a", Model: "m"}, Scenarios: []Scenario{schedScenario("chatbot", 1024, time.Hour)}}},
		SchedulerOptions{
			Probe: func(_ context.Context, tg Target, model string, sc Scenario, think ThinkFunc) Result {
				select {
				case probed <- struct{}{}:
				default:
				}
				return schedOK(tg, model, sc)
			},
			ListModels: schedStaticModels(ModelInfo{ID: "m"}),
			Rand:       func() float64 { return 0 }, // first probe at once
		})
	if _, ok := s.NextProbe("a", "chatbot"); ok {
		t.Fatal("NextProbe before Run: ok, want false")
	}
	before := time.Now()
	schedRunFor(t, s, 5*time.Second, func() bool {
		_, ok := s.NextProbe("a", "chatbot")
		return len(probed) == 1 && ok && func() bool { n, _ := s.NextProbe("a", "chatbot"); return n.After(before.Add(time.Minute)) }()
	})
	next, ok := s.NextProbe("a", "chatbot")
	if !ok {
		t.Fatal("NextProbe after the first probe: not ok")
	}
	if lo, hi := before.Add(time.Hour), time.Now().Add(time.Hour); next.Before(lo) || next.After(hi) {
		t.Errorf("next probe at %v; want within [%v, %v] (an hour after the first probe)", next, lo, hi)
	}
	if _, ok := s.NextProbe("a", "rag"); ok {
		t.Error("NextProbe of a scenario the target does not probe: ok, want false")
	}
}

package prober

import (
	"context"
	"testing"
	"time"
)

// TestBackoffBaseIsTheShortestInterval: whichever scenario finds a target
// down, its backoff grows from the target's shortest interval, doubling to
// the cap, each wait within [d/2, d].
func TestBackoffBaseIsTheShortestInterval(t *testing.T) {
	u := 0.0
	s := NewScheduler([]ScheduledTarget{{Target: Target{Name: "a"}, Scenarios: []Scenario{
		schedScenario("long_document", 32768, 15*time.Minute), schedScenario("chatbot", 1024, 30*time.Second),
	}}}, SchedulerOptions{Probe: func(context.Context, Target, string, Scenario, ThinkFunc) Result { return Result{} },
		Rand: func() float64 { return u }, BackoffMax: 4 * time.Minute})
	ts := s.targets[0]
	if ts.minInterval != 30*time.Second {
		t.Fatalf("minInterval = %v, want 30s", ts.minInterval)
	}
	for fails, want := range map[int]time.Duration{1: time.Minute, 2: 2 * time.Minute, 3: 4 * time.Minute, 9: 4 * time.Minute} {
		u = 0
		if got := s.backoff(ts.minInterval, fails); got != want/2 {
			t.Errorf("backoff after %d failures, lowest draw = %v, want %v", fails, got, want/2)
		}
		u = 0.999999
		if got := s.backoff(ts.minInterval, fails); got < want*99/100 || got > want {
			t.Errorf("backoff after %d failures, highest draw = %v, want about %v", fails, got, want)
		}
	}
}

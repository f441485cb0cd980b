package sweeper

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/report"
)

// A complete sweep keeps the complete one before it as Previous; the
// result shown is then compared with it; a partial sweep never becomes
// Previous, and the state file keeps both across a restart.
func TestPreviousSweepKept(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	mk := func(i int, interrupted bool) *report.Report {
		return &report.Report{SchemaVersion: report.SchemaVersion,
			Meta: report.Meta{Model: "m", StartedAt: t0.Add(time.Duration(i) * time.Hour), Interrupted: interrupted}}
	}
	ts := &targetState{}
	first, second, partial, third := mk(1, false), mk(2, false), mk(3, true), mk(4, false)
	ts.setResult(first)
	if ts.Previous != nil || ts.shown() != first {
		t.Fatal("the first sweep has nothing to compare with")
	}
	ts.setResult(second)
	if ts.Previous != first {
		t.Fatal("the second complete sweep did not keep the first as Previous")
	}
	shown := ts.shown()
	if shown.Comparison == nil || shown.Comparison.Base.Meta.StartedAt != first.Meta.StartedAt {
		t.Fatalf("shown = %+v; want the second compared with the first", shown.Comparison)
	}
	if want := "the previous sweep (2026-03-02 10:00 UTC)"; shown.Comparison.BaseLabel != want {
		t.Errorf("base label %q; want %q", shown.Comparison.BaseLabel, want)
	}
	if ts.shown() != shown {
		t.Error("the comparison is computed again for the same result")
	}
	ts.setResult(partial) // the sweeper only does this over a partial result; Previous must survive it
	ts.setResult(third)
	if ts.Previous != second {
		t.Fatalf("Previous = %v", ts.Previous.Meta.StartedAt)
	}

	st := newState()
	ts = &targetState{}
	ts.setResult(first)
	ts.setResult(second)
	st.Targets["a"] = ts
	path := filepath.Join(t.TempDir(), "state.json")
	if err := st.save(path); err != nil {
		t.Fatal(err)
	}
	back, err := loadState(path)
	if err != nil {
		t.Fatal(err)
	}
	if p := back.Targets["a"].Previous; p == nil || !p.Meta.StartedAt.Equal(first.Meta.StartedAt) {
		t.Fatalf("the state file lost the previous sweep: %+v", p)
	}
	if back.Targets["a"].shown().Comparison == nil {
		t.Error("a restarted daemon shows no comparison")
	}
}

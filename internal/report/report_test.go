package report

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/prober"
)

func TestFromSweep(t *testing.T) {
	t0 := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	qw := 0.5
	step := func(mode sweep.Mode, n int) sweep.StepResult {
		return sweep.StepResult{Mode: mode, Concurrency: n, Requests: n, Succeeded: n, SuccessRatio: 1, WindowSeconds: 60,
			TTFT: sweep.Summary{Mean: 1, P50: 0.9, P90: 1.5, P95: 1.7, P99: 2}, SystemThroughput: 100 * float64(n),
			Decode:        sweep.Summary{Mean: 50, P1: 31, P5: 35, P10: 40, P50: 51, P90: 58, P95: 60, P99: 63},
			Drain:         &sweep.DrainResult{Method: sweep.DrainEngine, WaitedSeconds: 120, Busy: n == 2, Running: 3},
			TokensPerHour: 360000 * float64(n), ScalingEfficiency: 0.9, QueueWaitSeconds: &qw, PrefillExclQueue: 12345,
			Prefill: sweep.Summary{Mean: 9000}, Errors: map[prober.Reason]int{prober.ReasonTimeout: 1},
			Power: &sweep.PowerReading{AvgWatts: 500, PeakWatts: 600, Joules: 30000, JoulesPerOutputToken: 0.5}}
	}
	res := &sweep.Result{
		Target: "t", Model: "m", Started: t0, Finished: t0.Add(time.Hour), Interrupted: true,
		Settings: sweep.Settings{ClosedLoop: []int{1, 2}, Burst: []int{4}, StepSeconds: 60, WarmupSeconds: 10,
			EarlyStopFactor: 3, MaxSafeTTFTSeconds: 3, CapacityStat: sweep.StatP90},
		Scenarios: []sweep.ScenarioResult{
			{ScenarioSpec: sweep.ScenarioSpec{Name: "general_chat", Family: prober.FamilyUseCase, InputTokens: 32768, OutputTokens: 1024, Thresholds: prober.Thresholds{TTFT: 8 * time.Second, MinDecode: 15}},
				ClosedLoop:   []sweep.StepResult{step(sweep.ModeClosedLoop, 1), step(sweep.ModeClosedLoop, 2)},
				Burst:        []sweep.StepResult{step(sweep.ModeBurst, 4)},
				StoppedEarly: []sweep.EarlyStop{{Mode: sweep.ModeBurst, AfterN: 4, SkippedLadderN: []int{8, 16}, Reason: "every threshold far exceeded"}},
				MaxSafeQueue: &sweep.Capacity{N: 3, Approximate: true, Bound: sweep.BoundWithin, MaxTested: 4},
				Capacity:     &sweep.Capacity{N: 2, Bound: sweep.BoundAtLeast, MaxTested: 2, Limits: []sweep.CapacityLimit{{Kind: "ttft", Threshold: 8, Stat: sweep.StatP90, Capacity: sweep.Capacity{N: 2, Bound: sweep.BoundAtLeast}}}},
			},
			{ScenarioSpec: sweep.ScenarioSpec{Name: "broken"}, Error: "calibrate broken: prompt too long"},
		},
	}
	rep := FromSweep(res, Meta{Model: "m"}, 0.1, true)
	if err := rep.Validate(); err != nil {
		t.Fatal(err)
	}
	if !rep.Meta.Interrupted || rep.Config.Thresholds.MaxSafeQueueStat != "p90" || rep.Config.PricePerKWh != 0.1 || !rep.Config.EarlyStop {
		t.Errorf("meta/config: %+v %+v", rep.Meta, rep.Config)
	}
	if len(rep.Scenarios) != 1 || len(rep.Notes) != 2 {
		t.Fatalf("scenarios %d, notes %v", len(rep.Scenarios), rep.Notes)
	}
	s := rep.Scenarios[0]
	cl := s.ClosedLoop[0]
	if cl.PrefillTokensPerSecond != 12345 || cl.Errors["timeout"] != 1 || cl.ScalingEfficiency == nil || cl.TTFT.P90 != 1.5 ||
		cl.Power == nil || cl.Power.CostPerHourUSD != 0.05 || cl.Power.JoulesPerToken != 0.5 {
		t.Errorf("closed-loop step = %+v", cl)
	}
	// The slow tail of decode speed and how each step started come through.
	if d := cl.Decode; d.P1 != 31 || d.P10 != 40 || d.P50 != 51 || d.P99 != 63 {
		t.Errorf("decode = %+v; want p1 31, p10 40", d)
	}
	if cl.Drain == nil || cl.StartedBusy() || !s.ClosedLoop[1].StartedBusy() || s.ClosedLoop[1].Drain.Running != 3 {
		t.Errorf("drain = %+v, %+v; want N=2 busy with 3 running", cl.Drain, s.ClosedLoop[1].Drain)
	}
	if s.Burst[0].ScalingEfficiency != nil {
		t.Error("burst steps carry no scaling efficiency in the report")
	}
	if len(s.StoppedEarly) != 1 || s.StoppedEarly[0].Mode != sweep.ModeBurst || !reflect.DeepEqual(s.StoppedEarly[0].SkippedLadderN, []int{8, 16}) {
		t.Errorf("stopped early = %+v", s.StoppedEarly)
	}
	q := rep.Capacity.MaxSafeQueue
	if len(q) != 1 || q[0].Value != 3 || !q[0].Approximate || q[0].Stat != "p90" || q[0].MaxTested != 4 {
		t.Errorf("max safe queue = %+v", q)
	}
	u := rep.Capacity.UseCases
	if len(u) != 1 || !u[0].AtLeast || u[0].Value != 2 || len(u[0].Limits) != 1 || !u[0].Limits[0].AtLeast {
		t.Errorf("use cases = %+v", u)
	}
}

func TestLoadRejectsOtherSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	os.WriteFile(path, []byte(`{"schema_version":"slaprobe.report/v0"}`), 0o644)
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "slaprobe.report/v1") {
		t.Fatalf("err = %v; want a schema version error", err)
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                                   "",
		"http://127.0.0.1:8000":              "http://127.0.0.1:8000",
		"https://u:p@h.example:443/v1?k=v#f": "https://h.example:443/v1",
		"http://[::1]:8000/":                 "http://[::1]:8000/",
		"://bad":                             "(invalid URL)",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestNewSamples(t *testing.T) {
	if NewSamples(sweep.Samples{}) != nil {
		t.Error("no values: want nil")
	}
	few := NewSamples(sweep.Samples{TTFT: []float64{0.3, 0.1234567891, 0.2}})
	if few.Subsampled || !reflect.DeepEqual(few.TTFT, []float64{0.3, 0.123457, 0.2}) {
		t.Errorf("few = %+v; want them in request order, rounded to 6 digits", few)
	}
	many := make([]float64, 2*MaxSamples+7)
	for i := range many {
		many[i] = float64(len(many) - i) // descending
	}
	s := NewSamples(sweep.Samples{Decode: many})
	if !s.Subsampled || len(s.Decode) != MaxSamples {
		t.Fatalf("%d values kept, subsampled %v; want %d", len(s.Decode), s.Subsampled, MaxSamples)
	}
	if s.Decode[0] != 1 || s.Decode[MaxSamples-1] != float64(len(many)) || !slices.IsSorted(s.Decode) {
		t.Errorf("subsample must run from the smallest to the largest value, sorted: %v … %v", s.Decode[0], s.Decode[MaxSamples-1])
	}
	if m := s.Decode[MaxSamples/2]; math.Abs(m-float64(len(many))/2) > 3 {
		t.Errorf("subsample median %v; want about %v", m, len(many)/2)
	}
}

// A report written before samples were kept (v1) still loads, and says it
// has none.
func TestLoadV1Report(t *testing.T) {
	r, err := Load(filepath.Join("testdata", "report.v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.SchemaVersion != SchemaVersionV1 || r.HasSamples() || len(r.Scenarios) == 0 {
		t.Fatalf("schema %q, samples %v, %d scenarios", r.SchemaVersion, r.HasSamples(), len(r.Scenarios))
	}
}

package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/prober"
)

func TestParseLadder(t *testing.T) {
	for in, want := range map[string][]int{"1,2,4": {1, 2, 4}, " 8 , 16 ": {8, 16}, "none": {}, "": {}} {
		got, err := parseLadder(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("parseLadder(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"1,x", "0", "1,,2", "-4"} {
		if _, err := parseLadder(in); err == nil {
			t.Errorf("parseLadder(%q) succeeded; want an error", in)
		}
	}
}

// startSim serves a fast simulated engine on loopback.
func startSim(t *testing.T) string {
	t.Helper()
	cfg := vllmsim.DefaultConfig()
	cfg.TimeScale = 0.2
	e, err := vllmsim.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e.Handler())
	t.Cleanup(func() { srv.Close(); e.Close() })
	return srv.URL
}

func writeBenchConfig(t *testing.T, url string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "slaprobe.yml")
	cfg := `targets:
  - name: sim
    url: ` + url + `
scenarios:
  - name: tiny
    input_tokens: 256
    output_tokens: 24
    thresholds: {ttft: 150ms, itl: 50ms}
power:
  nvml: false
sweep:
  scenarios: [tiny]
`
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// lineWatcher calls fn for every line written to it.
type lineWatcher struct {
	mu  sync.Mutex
	buf bytes.Buffer
	fn  func(line string)
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for _, l := range strings.SplitAfter(string(p), "\n") {
		if strings.HasSuffix(l, "\n") && w.fn != nil {
			w.fn(strings.TrimSpace(l))
		}
	}
	return len(p), nil
}

func (w *lineWatcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func parseBench(t *testing.T, args ...string) {
	t.Helper()
	cmd, err := app.Parse(append([]string{"bench"}, args...))
	if err != nil || cmd != "bench" {
		t.Fatalf("parse %v: %q %v", args, cmd, err)
	}
}

func TestBenchAgainstSim(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a small sweep against the simulated engine")
	}
	out := filepath.Join(t.TempDir(), "report")
	parseBench(t, "--config.file="+writeBenchConfig(t, startSim(t)), "--concurrency=1,2", "--burst=1,4,8",
		"--step.duration=400ms", "--step.warmup=100ms", "--cooldown=0s", "--ttft.threshold=60ms", "--out="+out)
	var stdout bytes.Buffer
	stderr := &lineWatcher{}
	code := runBench(context.Background(), slog.New(slog.DiscardHandler), &stdout, stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "report written to "+out) {
		t.Errorf("stdout does not say where the report is:\n%s", stdout.String())
	}
	// Not a terminal: one plain line per step start and finish.
	if n := strings.Count(stderr.String(), " done: "); n != 5 {
		t.Errorf("%d finished-step lines on stderr; want 5:\n%s", n, stderr.String())
	}
	for _, f := range []string{report.JSONFile, report.MarkdownFile, report.HTMLFile} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	rep, err := report.Load(filepath.Join(out, report.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Meta.Model == "" || rep.Meta.Engine != "vllm" || rep.Meta.Interrupted {
		t.Errorf("meta = %+v", rep.Meta)
	}
	if len(rep.Scenarios) != 1 || len(rep.Scenarios[0].ClosedLoop) != 2 || len(rep.Scenarios[0].Burst) != 3 {
		t.Fatalf("scenarios = %+v", rep.Scenarios)
	}
	s := rep.Scenarios[0]
	if s.ClosedLoop[1].ScalingEfficiency == nil || *s.ClosedLoop[1].ScalingEfficiency <= 0.5 {
		t.Errorf("closed loop N=2 efficiency = %v", s.ClosedLoop[1].ScalingEfficiency)
	}
	if s.Burst[2].QueueWaitSeconds == nil || *s.Burst[2].QueueWaitSeconds <= 0 {
		t.Errorf("burst N=8 queue wait = %v; the sim queues prefills", s.Burst[2].QueueWaitSeconds)
	}
	if len(rep.Capacity.MaxSafeQueue) != 1 || rep.Capacity.MaxSafeQueue[0].ThresholdSeconds != 0.06 || rep.Capacity.MaxSafeQueue[0].Stat != "mean" {
		t.Errorf("max safe queue = %+v", rep.Capacity.MaxSafeQueue)
	}
	if len(rep.Capacity.UseCases) != 1 || len(rep.Capacity.UseCases[0].Limits) == 0 {
		t.Errorf("use-case capacity = %+v", rep.Capacity.UseCases)
	}
	if rep.Headline.PeakDecode == nil || rep.Headline.RequestsOK == 0 {
		t.Errorf("headline = %+v", rep.Headline)
	}
}

func TestBenchInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a sweep against the simulated engine")
	}
	out := filepath.Join(t.TempDir(), "report")
	parseBench(t, "--config.file="+writeBenchConfig(t, startSim(t)), "--concurrency=1,2,4,8", "--burst=1,2,4",
		"--step.duration=2s", "--step.warmup=100ms", "--cooldown=0s", "--ttft.threshold=3s", "--out="+out)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &lineWatcher{fn: func(line string) {
		if strings.HasPrefix(line, "[2/") && strings.Contains(line, "started") {
			cancel() // Ctrl-C during the second step
		}
	}}
	var stdout bytes.Buffer
	start := time.Now()
	code := runBench(ctx, slog.New(slog.DiscardHandler), &stdout, stderr)
	if code != 130 {
		t.Fatalf("exit %d; want 130\nstderr: %s", code, stderr.String())
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("interrupted bench took %v", d)
	}
	rep, err := report.Load(filepath.Join(out, report.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Meta.Interrupted || len(rep.Scenarios) != 1 || len(rep.Scenarios[0].ClosedLoop) != 1 || len(rep.Notes) == 0 {
		t.Errorf("partial report: interrupted=%v scenarios=%+v notes=%v", rep.Meta.Interrupted, rep.Scenarios, rep.Notes)
	}
}

func TestBuildReportMapping(t *testing.T) {
	t0 := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	qw := 0.5
	step := func(mode prober.Mode, n int) prober.StepResult {
		return prober.StepResult{Mode: mode, Concurrency: n, Requests: n, Succeeded: n, SuccessRatio: 1, WindowSeconds: 60,
			TTFT: prober.Summary{Mean: 1, P50: 0.9, P90: 1.5, P95: 1.7, P99: 2}, SystemThroughput: 100 * float64(n),
			TokensPerHour: 360000 * float64(n), ScalingEfficiency: 0.9, QueueWaitSeconds: &qw, PrefillExclQueue: 12345,
			Prefill: prober.Summary{Mean: 9000}, Errors: map[prober.Reason]int{prober.ReasonTimeout: 1},
			Power: &prober.PowerReading{AvgWatts: 500, PeakWatts: 600, Joules: 30000, JoulesPerOutputToken: 0.5}}
	}
	res := &prober.SweepResult{
		Target: "t", Model: "m", Started: t0, Finished: t0.Add(time.Hour), Interrupted: true,
		Settings: prober.SweepSettings{ClosedLoop: []int{1, 2}, Burst: []int{4}, StepSeconds: 60, WarmupSeconds: 10,
			EarlyStopFactor: 3, MaxSafeTTFTSeconds: 3, CapacityStat: prober.StatP90},
		Scenarios: []prober.ScenarioResult{
			{Name: "general_chat", Family: prober.FamilyUseCase, InputTokens: 32768, OutputTokens: 1024,
				Thresholds:     prober.SLA{TTFTSeconds: 8, MinDecodeTokensPS: 15},
				ClosedLoop:     []prober.StepResult{step(prober.ModeClosedLoop, 1), step(prober.ModeClosedLoop, 2)},
				Burst:          []prober.StepResult{step(prober.ModeBurst, 4)},
				BurstStop:      &prober.EarlyStop{Concurrency: 4, Skipped: []int{8, 16}, Reason: "every threshold far exceeded"},
				MaxSafeQueue:   &prober.Capacity{N: 3, Approximate: true, Bound: prober.BoundWithin, MaxTested: 4},
				Capacity:       &prober.Capacity{N: 2, Bound: prober.BoundAtLeast, MaxTested: 2, Limits: []prober.CapacityLimit{{Kind: "ttft", Threshold: 8, Stat: prober.StatP90, Capacity: prober.Capacity{N: 2, Bound: prober.BoundAtLeast}}}},
				ClosedLoopStop: nil},
			{Name: "broken", Error: "calibrate broken: prompt too long"},
		},
	}
	rep := buildReport(res, report.Meta{Model: "m"}, 0.1, true)
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
	if s.Burst[0].ScalingEfficiency != nil {
		t.Error("burst steps carry no scaling efficiency in the report")
	}
	if len(s.StoppedEarly) != 1 || s.StoppedEarly[0].Mode != report.ModeBurst || !reflect.DeepEqual(s.StoppedEarly[0].SkippedLadderN, []int{8, 16}) {
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

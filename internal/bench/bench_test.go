package bench

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

	"github.com/prometheus/common/model"

	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/vllmsim"
)

func TestParseLadder(t *testing.T) {
	for in, want := range map[string][]int{"1,2,4": {1, 2, 4}, " 8 , 16 ": {8, 16}, "none": {}, "": {}} {
		got, err := ParseLadder(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseLadder(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"1,x", "0", "1,,2", "-4"} {
		if _, err := ParseLadder(in); err == nil {
			t.Errorf("ParseLadder(%q) succeeded; want an error", in)
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

// benchOptions loads the config at path and sets the sweep as the flags
// --concurrency, --burst, --step.duration, --step.warmup, --cooldown and
// --ttft.threshold would.
func benchOptions(t testing.TB, path string, closed, burst []int, step, warmup, ttft time.Duration, out string) Options {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	sc := cfg.Sweep
	sc.ClosedLoop.Concurrency, sc.Burst.Concurrency = closed, burst
	sc.ClosedLoop.Duration, sc.ClosedLoop.Warmup = model.Duration(step), model.Duration(warmup)
	sc.Capacity.MaxSafeTTFT, sc.Cooldown = model.Duration(ttft), 0
	return Options{Config: cfg, Sweep: sc, Out: out, Logger: slog.New(slog.DiscardHandler)}
}

func TestBenchAgainstSim(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a small sweep against the simulated engine")
	}
	out := filepath.Join(t.TempDir(), "report")
	o := benchOptions(t, writeBenchConfig(t, startSim(t)), []int{1, 2}, []int{1, 4, 8}, 400*time.Millisecond, 100*time.Millisecond, 60*time.Millisecond, out)
	var stdout bytes.Buffer
	stderr := &lineWatcher{}
	o.Stdout, o.Stderr = &stdout, stderr
	code := Run(context.Background(), o)
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
	o := benchOptions(t, writeBenchConfig(t, startSim(t)), []int{1, 2, 4, 8}, []int{1, 2, 4}, 2*time.Second, 100*time.Millisecond, 3*time.Second, out)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &lineWatcher{fn: func(line string) {
		if strings.HasPrefix(line, "[2/") && strings.Contains(line, "started") {
			cancel() // Ctrl-C during the second step
		}
	}}
	var stdout bytes.Buffer
	start := time.Now()
	o.Stdout, o.Stderr = &stdout, stderr
	code := Run(ctx, o)
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

// TestBenchConversationScenario: bench sweeps a conversation scenario (N
// conversations in flight) and its report carries the follow-ups, their
// cache and the capacity in concurrent conversations. The simulated engine's
// KV cache is far larger than two conversations, so every follow-up hits
// and the capacity is at least the largest N tested.
func TestBenchConversationScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a small sweep against the simulated engine")
	}
	path := filepath.Join(t.TempDir(), "slaprobe.yml")
	cfg := `targets:
  - name: sim
    url: ` + startSim(t) + `
scenarios:
  - name: agent
    input_tokens: 256
    output_tokens: 16
    conversation: {turns: 3, new_tokens: 32}
    thresholds: {ttft: 2s}
power:
  nvml: false
sweep:
  scenarios: [agent]
`
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "report")
	o := benchOptions(t, path, []int{1, 2}, nil, 800*time.Millisecond, 100*time.Millisecond, 3*time.Second, out)
	var stdout bytes.Buffer
	stderr := &lineWatcher{}
	o.Stdout, o.Stderr = &stdout, stderr
	if code := Run(context.Background(), o); code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	if n := strings.Count(stderr.String(), "follow-ups ok, 100% hit the cache, follow-up TTFT mean"); n != 2 {
		t.Errorf("%d conversation step lines on stderr; want 2:\n%s", n, stderr.String())
	}
	rep, err := report.Load(filepath.Join(out, report.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Scenarios) != 1 || rep.Scenarios[0].Turns != 3 || len(rep.Scenarios[0].ClosedLoop) != 2 {
		t.Fatalf("scenarios = %+v", rep.Scenarios)
	}
	for _, st := range rep.Scenarios[0].ClosedLoop {
		cs := st.Conversation
		if cs == nil || cs.Conversations < st.Concurrency || cs.FollowUps != 2*cs.Conversations || st.RequestsSent != cs.FollowUps ||
			cs.Hit != cs.FollowUps || cs.HitShare == nil || *cs.HitShare != 1 || cs.PrimingTTFT.Mean <= 0 {
			t.Errorf("N=%d: step %+v, conversation %+v; want every follow-up sent and hitting, and the priming turns' TTFT", st.Concurrency, st, cs)
		}
	}
	cc := rep.Capacity.Conversations
	if len(cc) != 1 || !cc[0].AtLeast || cc[0].Value != 2 || cc[0].HitShare != 0.9 {
		t.Errorf("capacity in conversations = %+v; want at least 2", cc)
	}
	md, err := os.ReadFile(filepath.Join(out, report.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "This server carries at least 2 concurrent agent conversations") {
		t.Errorf("report.md does not state the capacity in conversations:\n%s", md)
	}
}

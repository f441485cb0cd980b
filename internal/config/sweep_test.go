package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/prober"
)

func TestSweepConfigDefaults(t *testing.T) {
	c, err := LoadBytes([]byte("targets: [{url: 'http://127.0.0.1:8000'}]\nsweep:\n  enabled: true\n  burst:\n    concurrency: [1, 8]\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Sweep
	want := DefaultSweepConfig()
	want.Enabled = true
	want.Burst.Concurrency = []int{1, 8}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("sweep = %+v\nwant %+v", s, want)
	}
	// No sweep section: its defaults, filled in when the file is parsed.
	c, err = LoadBytes([]byte("targets: [{url: 'http://127.0.0.1:8000'}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Sweep; !reflect.DeepEqual(got, DefaultSweepConfig()) || got.Enabled {
		t.Errorf("absent sweep section: %+v", got)
	}

	o := want.Options(prober.Builtin()[:1])
	if o.StepDuration != 20*time.Second || o.Warmup != 10*time.Second || o.MaxConcurrency != 256 ||
		o.Capacity.MaxSafeTTFT != 3*time.Second || o.Capacity.Stat != sweep.StatMean || o.EarlyStopFactor != 3 ||
		len(o.Capacity.On) != 1 || o.Capacity.On[0].Text != "goodput >= 95%" ||
		!reflect.DeepEqual(o.ClosedLoop, sweep.DefaultClosedLoopLadder) || !reflect.DeepEqual(o.Burst, []int{1, 8}) {
		t.Errorf("options = %+v", o)
	}
	if got := want.ScenarioNames(); !reflect.DeepEqual(got, prober.DefaultScenarios) {
		t.Errorf("scenario names = %v", got)
	}
}

func TestSweepConfigErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"burst: {concurrency: [0]}", "sweep.burst.concurrency: 0; expected concurrency values from 1 to 10000"},
		{"closed_loop: {duration: 0s}", "sweep.closed_loop.duration=0s; expected a positive duration"},
		{"burst: {repeat: 0}", "sweep.burst.repeat=0; expected from 1 to 10000"},
		{"early_stop: {factor: 0.5}", "sweep.early_stop.factor=0.5; expected 0 (off) or a factor >= 1"},
		{"capacity: {statistic: p42}", `sweep.capacity.statistic: statistic "p42": expected one of mean, p50, p90, p95, p99`},
		{"capacity: {max_safe_ttft: 0s}", "sweep.capacity.max_safe_ttft=0s; expected a positive duration"},
		{"schedule: {interval: 10s}", "sweep.schedule.interval=10s; expected at least 1m"},
		{"schedule: {window: '2-5'}", `sweep.schedule.window: "2-5": time "2": expected HH:MM`},
		{"schedule: {window: '02:00-02:00'}", "start equals end"},
		{"pause: {max_kv_cache_usage: 1.5}", "sweep.pause.max_kv_cache_usage=1.5; expected a ratio in (0, 1]"},
		{"enabled: true\n  state_file: ''", "sweep.state_file is empty"},
		{"capacity_on: ['goodput >= 120%']", `sweep.capacity_on[0]: rule "goodput >= 120%": expected a share of good requests in (0%, 100%]`},
		{"capacity_on: ['goodput >= 95%', 'p99 ttft <= 2']", `sweep.capacity_on[1]: rule "p99 ttft <= 2": expected a positive duration such as 2s`},
		{"capacity_on: ['p99 ttft <= 2s', 'p99 ttft <= 2000ms']", `sweep.capacity_on[1]: rule "p99 ttft <= 2000ms" given twice`},
		{"bogus: 1", `unknown field "bogus"`},
	} {
		_, err := LoadBytes([]byte("targets: [{url: 'http://127.0.0.1:8000'}]\nsweep:\n  " + tc.yaml + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v; want it to contain %q", tc.yaml, err, tc.want)
		}
	}
}

func TestSweepConfigFull(t *testing.T) {
	c, err := LoadBytes([]byte(`targets: [{url: 'http://127.0.0.1:8000'}]
sweep:
  enabled: true
  targets: [127.0.0.1:8000]
  scenarios: [chatbot, general_chat]
  closed_loop: {concurrency: [1, 2, 4], warmup: 5s, duration: 30s}
  burst: {concurrency: [1, 16, 64], repeat: 2}
  max_concurrency: 32
  cooldown: 5s
  early_stop: {factor: 4, min_success_ratio: 0.8}
  capacity: {max_safe_ttft: 2s, statistic: p90, min_success_ratio: 0.99}
  capacity_on: ["goodput >= 90%", "p99 ttft <= 2s"]
  schedule: {interval: 6h, window: "22:00-04:00"}
  pause: {max_waiting: 2, max_kv_cache_usage: 0.7, check_interval: 30s, max_pause: 1h, require_engine_metrics: false}
  state_file: /var/lib/slaprobe/sweep.json
`))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Sweep
	if s.Schedule.Interval != model.Duration(6*time.Hour) || s.Capacity.Statistic != "p90" || s.Pause.RequireEngineMetrics ||
		s.Burst.Repeat != 2 || s.MaxConcurrency != 32 || s.StateFile != "/var/lib/slaprobe/sweep.json" {
		t.Errorf("sweep = %+v", s)
	}
	o := s.Options(nil)
	if o.Capacity.Stat != sweep.StatP90 || o.Capacity.MaxSafeTTFT != 2*time.Second || o.BurstRepeat != 2 || o.Cooldown != 5*time.Second ||
		len(o.Capacity.On) != 2 || o.Capacity.On[0].Text != "goodput >= 90%" || o.Capacity.On[1].Text != "p99 ttft <= 2s" {
		t.Errorf("options = %+v", o)
	}
}

// An unknown scenario in sweep.scenarios is an error at load (so check-config
// and reloads reject it), as bench's --scenarios is; daemon sweeps used to
// drop it silently.
func TestSweepScenariosMustExist(t *testing.T) {
	_, err := LoadBytes([]byte("targets: [{url: 'http://127.0.0.1:8000'}]\nsweep:\n  scenarios: [chatbot, chatbt]\n"))
	if err == nil || !strings.Contains(err.Error(), `sweep.scenarios: unknown scenario "chatbt"; expected one of:`) {
		t.Fatalf("err = %v", err)
	}
	c, err := LoadBytes([]byte("targets: [{url: 'http://127.0.0.1:8000'}]\nscenarios: [{name: mine, input_tokens: 100, output_tokens: 10}]\nsweep:\n  scenarios: [chatbot, mine]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Sweep.ScenarioNames(); !reflect.DeepEqual(got, []string{"chatbot", "mine"}) {
		t.Errorf("ScenarioNames = %v", got)
	}
}

func TestPowerDevicesFor(t *testing.T) {
	p := PowerConfig{Devices: []string{"0", "1"}, TargetDevices: map[string][]string{"a": {"1"}}}
	if got := p.DevicesFor("a"); !reflect.DeepEqual(got, []string{"1"}) {
		t.Errorf("a: %v", got)
	}
	if got := p.DevicesFor("b"); !reflect.DeepEqual(got, []string{"0", "1"}) {
		t.Errorf("b: %v", got)
	}
}

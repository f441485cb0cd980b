package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slaprobe/slaprobe/internal/daemon"
	"github.com/slaprobe/slaprobe/internal/vllmsim"
)

// TestDaemonSweepEndpoint runs the daemon's sweep job against the simulated
// engine through POST /-/sweep: 202, then 409 while it runs, then gauges and
// a state file that a new daemon loads back. The target's scheduled probes
// (every second here) are held while it is swept and resume afterwards.
func TestDaemonSweepEndpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a small sweep against the simulated engine")
	}
	eng, err := vllmsim.New(vllmsim.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	sim := httptest.NewServer(eng.Handler())
	defer sim.Close()

	dir := t.TempDir()
	state := filepath.Join(dir, "sweep-state.json")
	cfgPath := filepath.Join(dir, "slaprobe.yml")
	cfg := `global: {scenarios: [chatbot]}
targets:
  - name: sim
    url: ` + sim.URL + `
engine: {enabled: false}
power: {nvml: false}
scenarios:
  - name: chatbot
    interval: 1s
sweep:
  enabled: true
  scenarios: [chatbot]
  closed_loop: {concurrency: [1, 2], warmup: 500ms, duration: 2s}
  burst: {concurrency: [1, 2]}
  state_file: ` + state + `
`
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}

	start := func() (*daemon.Daemon, context.CancelFunc, chan error) {
		a, err := New(Options{ConfigFile: cfgPath})
		if err != nil {
			t.Fatal(err)
		}
		d := a.Daemon
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		return d, cancel, done
	}
	post := func(d *daemon.Daemon) int {
		rec := httptest.NewRecorder()
		d.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/-/sweep", nil))
		return rec.Code
	}

	d, cancel, done := start()
	// Let the scheduled probes start, so that the hold has one to wait for.
	deadline := time.Now().Add(30 * time.Second)
	for familySum(t, d, "slaprobe_probes_total") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no scheduled probe within 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code := post(d); code != http.StatusAccepted {
		t.Fatalf("first POST /-/sweep = %d, want 202", code)
	}
	if code := post(d); code != http.StatusConflict {
		t.Fatalf("second POST /-/sweep while one runs = %d, want 409", code)
	}
	// While the target is held no probe ends; the sweep's own requests are
	// not probes.
	heldProbes := -1.0
	deadline = time.Now().Add(60 * time.Second)
	for gaugeValue(t, d, "slaprobe_sweep_last_timestamp_seconds") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the sweep did not finish within 60 s")
		}
		held := gaugeValue(t, d, "slaprobe_sweep_probes_held") == 1
		n := familySum(t, d, "slaprobe_probes_total")
		switch {
		case held && heldProbes < 0:
			heldProbes = n
		case held && n != heldProbes:
			t.Fatalf("slaprobe_probes_total went from %v to %v while the target was held for its sweep", heldProbes, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if heldProbes < 0 {
		t.Fatal("slaprobe_sweep_probes_held was never 1 during the sweep")
	}
	if v := gaugeValue(t, d, "slaprobe_sweep_probes_held"); v != 0 {
		t.Fatalf("slaprobe_sweep_probes_held = %v after the sweep, want 0", v)
	}
	// The probes resume.
	after := familySum(t, d, "slaprobe_probes_total")
	deadline = time.Now().Add(30 * time.Second)
	for familySum(t, d, "slaprobe_probes_total") <= after {
		if time.Now().After(deadline) {
			t.Fatal("scheduled probes did not resume within 30 s of the sweep's end")
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(state); err != nil {
		t.Fatalf("state file: %v", err)
	}

	// A new daemon exports the saved results at once, before any sweep;
	// with the engine's metrics read, the capacity as a request rate too
	// (the live multiple waits for 5 min of traffic).
	if err := os.WriteFile(cfgPath, []byte(strings.Replace(cfg, "engine: {enabled: false}", "engine: {enabled: true}", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	d2, cancel2, done2 := start()
	defer func() { cancel2(); <-done2 }()
	n, err := testutil.GatherAndCount(d2.Registry(), "slaprobe_scaling_efficiency_ratio", "slaprobe_capacity_max_safe_concurrency")
	if err != nil {
		t.Fatal(err)
	}
	if n < 4 { // efficiency at N=1 and 2, capacity for closed loop and burst
		t.Fatalf("after restart: %d efficiency/capacity series, want at least 4", n)
	}
	if v := gaugeValue(t, d2, "slaprobe_capacity_requests_per_second"); !(v > 0) {
		t.Fatalf("after restart: slaprobe_capacity_requests_per_second = %v, want a rate", v)
	}
}

// familySum adds up every series of a counter or gauge family in d's
// registry; 0 when there is none.
func familySum(t *testing.T, d *daemon.Daemon, name string) float64 {
	t.Helper()
	mfs, err := d.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// gaugeValue reads the first sample of a gauge family from d's registry;
// 0 when there is none yet.
func gaugeValue(t *testing.T, d *daemon.Daemon, name string) float64 {
	t.Helper()
	mfs, err := d.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return 0
}

package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// TestHeadroomCommand: slaprobe headroom replays a trace against a simulated engine, writes its
// report and slaprobe_capacity_traffic_multiple, and against a baseline from a faster engine
// says the headroom fell and exits 3.
func TestHeadroomCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("two replay sweeps (about 20 s)")
	}
	bin := binary(t)
	dir := t.TempDir()
	// A Mooncake trace written here: 40 requests of 500 in, 16 out, one every 125 ms.
	var tr strings.Builder
	for i := range 40 {
		fmt.Fprintf(&tr, `{"timestamp": %d, "input_length": 500, "output_length": 16, "hash_ids": [%d]}`+"\n", i*125, i)
	}
	trace := filepath.Join(dir, "steady.jsonl")
	os.WriteFile(trace, []byte(tr.String()), 0o600)

	engine := func(scale float64) string {
		cfg := vllmsim.DefaultConfig()
		cfg.MaxNumSeqs, cfg.MaxModelLen, cfg.EOSMeanTokens = 2, 4096, 0
		cfg.PrefillOverhead, cfg.PrefillTokensPerSecond, cfg.PrefillQuadratic = time.Millisecond, 1e6, 0
		cfg.DecodeBase, cfg.DecodePerSeq, cfg.DecodePerKVToken = 5*time.Millisecond, 0, 0
		cfg.TimeScale = scale
		e, err := vllmsim.New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(e.Handler())
		t.Cleanup(srv.Close)
		t.Cleanup(e.Close)
		return srv.URL
	}
	run := func(args ...string) (int, string, string) {
		cmd := exec.Command(bin, append([]string{"headroom", "--trace=" + trace, "--refine=1", "--ttft=200ms"}, args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), out.String(), errb.String()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, out.String(), errb.String()
	}

	// Timing against simulated engines: quiet cores, up to three attempts.
	report, metrics := filepath.Join(dir, "base"), filepath.Join(dir, "headroom.prom")
	testproc.TimingAttempts(t, func(errorf func(string, ...any)) {
		code, out, errOut := run("--speedups=1,2,4", "--target.url="+engine(1), "--workload=steady", "--out="+report, "--metrics.file="+metrics)
		if code != 0 || !strings.Contains(out, "on steady (40 requests, 8 req/s at ×1, goodput >= 95%)") {
			errorf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
			return
		}
		t.Logf("fast engine: %s", out)
		prom, err := os.ReadFile(metrics)
		if err != nil || !strings.Contains(string(prom), `slaprobe_capacity_traffic_multiple{target="127.0.0.1:`) || !strings.Contains(string(prom), `workload="steady"}`) {
			errorf("metrics file (%v):\n%s", err, prom)
			return
		}
		if md, err := os.ReadFile(filepath.Join(report, "report.md")); err != nil || !strings.Contains(string(md), "| speed-up |") {
			errorf("report.md (%v):\n%s", err, md)
			return
		}
		// 2.5 times slower: its headroom is 1.3×, against the other's 3.2× (TestReplayHeadroom's figures).
		code, out, errOut = run("--speedups=1,2,4", "--target.url="+engine(2.5), "--workload=steady", "--baseline="+report)
		t.Logf("engine 2.5 times slower: %s", out)
		if code != exitRegression || !strings.Contains(out, "% less (significant") {
			errorf("against the faster baseline: exit %d, want %d, and a drop said\nstdout: %s\nstderr: %s", code, exitRegression, out, errOut)
		}
	})
	if code, _, errOut := run("--speedups=2,1", "--target.url=http://127.0.0.1:1"); code != exitFailure || !strings.Contains(errOut, "ascending") {
		t.Errorf("bad --speedups: exit %d, stderr %s", code, errOut)
	}
	if code, _, errOut := run("--target.url=http://127.0.0.1:1", "--baseline="+metrics); code != exitFailure || !strings.Contains(errOut, "not a slaprobe report") {
		t.Errorf("a baseline that is no report: exit %d, stderr %s", code, errOut)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestCompareCommand(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	v1, err := filepath.Abs(filepath.Join("..", "..", "internal", "report", "testdata", "report.v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	notReport := filepath.Join(dir, "x.json")
	os.WriteFile(notReport, []byte(`{"hello": 1}`), 0o644)
	out := filepath.Join(dir, "out")
	// v1 with chatbot's max safe queue depth down from ~130 to ~50: past
	// the measured N=32, 64 and 128, so capacity is worse.
	raw, err := os.ReadFile(v1)
	if err != nil {
		t.Fatal(err)
	}
	lower := filepath.Join(dir, "lower.json")
	os.WriteFile(lower, []byte(strings.Replace(string(raw), `"value": 130,`, `"value": 50,`, 1)), 0o644)
	verdict := filepath.Join(dir, "verdict.json")
	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string
		wantStderr string
	}{
		{name: "v1 against itself", args: []string{v1, v1, "--out=" + out}, wantCode: 0,
			wantStdout: []string{"comparison written to " + out, "report.html", "no confidence available", "0 significant regression(s)"}},
		{name: "missing", args: []string{filepath.Join(dir, "nope"), v1}, wantCode: 1,
			wantStderr: "compare: BASE: " + filepath.Join(dir, "nope") + ": no such file or directory; expected a report.json"},
		{name: "not a report", args: []string{v1, notReport}, wantCode: 1,
			wantStderr: "compare: NEW: " + notReport + ": not a slaprobe report (no schema_version field)"},
		{name: "one argument", args: []string{v1}, wantCode: 2, wantStderr: "required argument 'NEW' not provided"},
		// The gate. A v1 report has no samples, so no step figure has a
		// verdict; capacity is compared as numbers all the same.
		{name: "gate: no confidence fails closed", args: []string{v1, v1, "--out=" + out, "--fail-on=any"}, wantCode: exitNoVerdict,
			wantStdout: []string{"gate failed closed: no regression found, but ", "figures without a verdict (", "… and ", "more (all in --verdict-file)"}},
		{name: "gate: no confidence passes open", args: []string{v1, v1, "--out=" + out, "--fail-on=metric:ttft", "--fail-on-unknown=pass"}, wantCode: exitOK,
			wantStdout: []string{"gate passed open: no regression found, but ", "chatbot closed_loop N=1 ttft [metric:ttft]: no verdict: no raw samples"}},
		{name: "gate: capacity unchanged", args: []string{v1, v1, "--out=" + out, "--fail-on=capacity"}, wantCode: exitOK,
			wantStdout: []string{"gate passed: no significant regression named by --fail-on=capacity"}},
		{name: "gate: capacity down", args: []string{v1, lower, "--out=" + out, "--fail-on=metric:itl", "--fail-on=capacity", "--verdict-file=" + verdict}, wantCode: exitRegression,
			wantStdout: []string{"gate failed: 1 significant regression(s) named by --fail-on=metric:itl,capacity", "chatbot max_safe_queue [capacity]: capacity down past a measured N"}},
		{name: "gate: bad kind", args: []string{v1, v1, "--fail-on=any,latency"}, wantCode: exitUsage,
			wantStderr: `--fail-on="latency": unknown kind; expected any, capacity, metric:<ttft|itl|decode|e2e|prefill>, goodput:<percentage points, 0 to 100>, or headroom:<percent, 0 to 100>`},
		{name: "gate: bad policy", args: []string{v1, v1, "--fail-on=any", "--fail-on-unknown=maybe"}, wantCode: exitUsage,
			wantStderr: `--fail-on-unknown="maybe": expected fail`},
		{name: "gate: verdict file not writable", args: []string{v1, v1, "--out=" + out, "--fail-on=any", "--verdict-file=" + filepath.Join(dir, "no", "dir", "v.json")}, wantCode: exitFailure,
			wantStderr: "compare: --verdict-file: open " + filepath.Join(dir, "no", "dir", "v.json")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"compare"}, tc.args...)...)
			var o, e bytes.Buffer
			cmd.Stdout, cmd.Stderr = &o, &e
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d\nstderr: %s", code, tc.wantCode, e.String())
			}
			for _, w := range tc.wantStdout {
				if !strings.Contains(o.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, o.String())
				}
			}
			if !strings.Contains(e.String(), tc.wantStderr) {
				t.Errorf("stderr %q lacks %q", e.String(), tc.wantStderr)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(out, "report.html")); err != nil {
		t.Error(err)
	}
	// The verdict file of "capacity down".
	var v struct {
		Result   string
		ExitCode int `json:"exit_code"`
		Reasons  []struct {
			Figure, Why string
			Base, New   float64
		}
		NoVerdict []struct{ Figure string } `json:"no_verdict"`
	}
	if b, err := os.ReadFile(verdict); err != nil {
		t.Error(err)
	} else if err := json.Unmarshal(b, &v); err != nil {
		t.Error(err)
	} else if v.Result != "fail" || v.ExitCode != exitRegression || len(v.Reasons) != 1 || v.Reasons[0].Figure != "chatbot max_safe_queue" ||
		v.Reasons[0].Base != 130 || v.Reasons[0].New != 50 || len(v.NoVerdict) == 0 {
		t.Errorf("verdict file: %s", b)
	}
	help, _ := exec.Command(bin, "compare", "--help").CombinedOutput()
	flat := strings.Join(strings.Fields(string(help)), " ")
	for _, w := range []string{"BASE", "NEW", "--out=\"slaprobe-compare\"", "bootstrap", "at least 5%"} {
		if !strings.Contains(flat, w) {
			t.Errorf("compare --help lacks %q:\n%s", w, help)
		}
	}
}

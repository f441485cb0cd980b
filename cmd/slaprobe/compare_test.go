package main

import (
	"bytes"
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
	help, _ := exec.Command(bin, "compare", "--help").CombinedOutput()
	flat := strings.Join(strings.Fields(string(help)), " ")
	for _, w := range []string{"BASE", "NEW", "--out=\"slaprobe-compare\"", "bootstrap", "at least 5%"} {
		if !strings.Contains(flat, w) {
			t.Errorf("compare --help lacks %q:\n%s", w, help)
		}
	}
}

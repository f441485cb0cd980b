package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slaprobe/slaprobe/test/testproc"
)

func TestSummary(t *testing.T) {
	ev := func(action, pkg, test, output string) string {
		q := func(s string) string {
			return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`).Replace(s) + `"`
		}
		return `{"Action":` + q(action) + `,"Package":` + q(pkg) + `,"Test":` + q(test) + `,"Output":` + q(output) + `}`
	}
	deferLine := testproc.QuietMarkDefer + "\t/r/p\tTestT/sub\tlight\n"
	heldLine := testproc.QuietMarkHeld + "\tp.TestH\t1.0\t2.0\t3.0\t0.10\n"
	for _, tc := range []struct {
		name       string
		in         []string
		wantOut    string
		wantDefer  string
		wantHeld   string
		wantFailed bool
	}{{
		name: "passing package: its ok line only",
		in: []string{
			ev("output", "p", "TestA", "=== RUN   TestA\n"), ev("output", "p", "TestA", "    a_test.go:1: chatter\n"),
			ev("pass", "p", "TestA", ""), ev("output", "p", "", "PASS\n"), ev("output", "p", "", "ok  \tp\t0.01s\n"), ev("pass", "p", "", ""),
		},
		wantOut: "ok  \tp\t0.01s\n",
	}, {
		name: "deferred and held checks, also from a cached result",
		in: []string{
			ev("output", "p", "TestT/sub", deferLine), ev("output", "p", "TestH", heldLine),
			ev("output", "p", "", "ok  \tp\t(cached)\n"), ev("pass", "p", "", ""),
		},
		wantOut:   "ok  \tp\t(cached)\n",
		wantDefer: "/r/p\tTestT/sub\tlight\n",
		wantHeld:  "p.TestH\t1.0\t2.0\t3.0\t0.10\tcached\n",
	}, {
		name: "failing package: the failed tests' output, not the passing ones'",
		in: []string{
			ev("output", "p", "TestA", "    a_test.go:1: fine\n"), ev("pass", "p", "TestA", ""),
			ev("output", "p", "TestB", "    b_test.go:2: broken\n"), ev("output", "p", "TestB", "--- FAIL: TestB (0.00s)\n"), ev("fail", "p", "TestB", ""),
			ev("output", "p", "", "FAIL\n"), ev("output", "p", "", "FAIL\tp\t0.02s\n"), ev("fail", "p", "", ""),
		},
		wantOut:    "    b_test.go:2: broken\n--- FAIL: TestB (0.00s)\nFAIL\nFAIL\tp\t0.02s\n",
		wantFailed: true,
	}, {
		name:       "not json, and a package go test never ended",
		in:         []string{"# p\n./x.go:1: syntax error", ev("output", "q", "TestA", "    started\n")},
		wantOut:    "# p\n./x.go:1: syntax error\n    started\n",
		wantFailed: true,
	}, {
		name: "a package failed with no test failed: every test's output",
		in: []string{
			ev("output", "p", "TestA", "    a_test.go:1: fine\n"), ev("output", "p", "TestA", "--- PASS: TestA (0.00s)\n"), ev("pass", "p", "TestA", ""),
			ev("output", "p", "", "FAIL\n"), ev("output", "p", "", "FAIL\tp\t0.02s\n"), ev("fail", "p", "", ""),
		},
		wantOut:    "    a_test.go:1: fine\n--- PASS: TestA (0.00s)\nFAIL\nFAIL\tp\t0.02s\n",
		wantFailed: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var out strings.Builder
			failed, err := run(strings.NewReader(strings.Join(tc.in, "\n")+"\n"), &out, filepath.Join(dir, "d"), filepath.Join(dir, "h"))
			if err != nil {
				t.Fatal(err)
			}
			if failed != tc.wantFailed {
				t.Errorf("failed = %v, want %v", failed, tc.wantFailed)
			}
			if out.String() != tc.wantOut {
				t.Errorf("printed %q, want %q", out.String(), tc.wantOut)
			}
			for file, want := range map[string]string{"d": tc.wantDefer, "h": tc.wantHeld} {
				b, _ := os.ReadFile(filepath.Join(dir, file))
				if string(b) != want {
					t.Errorf("file %s holds %q, want %q", file, b, want)
				}
			}
		})
	}
}

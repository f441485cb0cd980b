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
		wantWhy    string
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
		wantWhy:    "p TestB\n    b_test.go:2: broken\n",
		wantFailed: true,
	}, {
		name: "why: the last lines each failed test logged, repeats folded, continuation lines left out",
		in: []string{
			ev("output", "p", "TestC", "    c_test.go:1: step 1\n"), ev("output", "p", "TestC", "    c_test.go:2: step 2\n"),
			ev("output", "p", "TestC", "    c_test.go:3: step 3\n"), ev("output", "p", "TestC", "    c_test.go:9: the healthy fleet pages\n"),
			ev("output", "p", "TestC", "        ALERTS: [x]\n"),
			ev("output", "p", "TestC", "    engine.go:146: engine log (tail):\n"), ev("output", "p", "TestC", "        time=1 msg=hello\n"),
			ev("output", "p", "TestC", "    engine.go:146: engine log (tail):\n"), ev("output", "p", "TestC", "        time=2 msg=hello\n"),
			ev("output", "p", "TestC", "    c_test.go:5: "+strings.Repeat("é", 310)+"\n"),
			ev("output", "p", "TestC", "    engine.go:146: engine log (tail):\n"),
			ev("output", "p", "TestC", "--- FAIL: TestC (1.00s)\n"), ev("fail", "p", "TestC", ""),
			ev("output", "p", "TestD/sub", "    d_test.go:1: sub broke\n"), ev("fail", "p", "TestD/sub", ""), ev("fail", "p", "TestD", ""),
			ev("output", "p", "", "FAIL\n"), ev("fail", "p", "", ""),
		},
		wantOut: "    c_test.go:1: step 1\n    c_test.go:2: step 2\n    c_test.go:3: step 3\n    c_test.go:9: the healthy fleet pages\n        ALERTS: [x]\n" +
			"    engine.go:146: engine log (tail):\n        time=1 msg=hello\n    engine.go:146: engine log (tail):\n        time=2 msg=hello\n" +
			"    c_test.go:5: " + strings.Repeat("é", 310) + "\n    engine.go:146: engine log (tail):\n--- FAIL: TestC (1.00s)\n    d_test.go:1: sub broke\nFAIL\n",
		wantWhy: "p TestC\n    c_test.go:2: step 2\n    c_test.go:3: step 3\n    c_test.go:9: the healthy fleet pages\n" +
			"    engine.go:146: engine log (tail): (2 times)\n    c_test.go:5: " + strings.Repeat("é", 300-len("c_test.go:5: ")) + "…\n" +
			"    engine.go:146: engine log (tail):\np TestD/sub\n    d_test.go:1: sub broke\n",
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
			failed, err := run(strings.NewReader(strings.Join(tc.in, "\n")+"\n"), &out, files{filepath.Join(dir, "d"), filepath.Join(dir, "h"), filepath.Join(dir, "w")})
			if err != nil {
				t.Fatal(err)
			}
			if failed != tc.wantFailed {
				t.Errorf("failed = %v, want %v", failed, tc.wantFailed)
			}
			if out.String() != tc.wantOut {
				t.Errorf("printed %q, want %q", out.String(), tc.wantOut)
			}
			for file, want := range map[string]string{"d": tc.wantDefer, "h": tc.wantHeld, "w": tc.wantWhy} {
				b, _ := os.ReadFile(filepath.Join(dir, file))
				if string(b) != want {
					t.Errorf("file %s holds %q, want %q", file, b, want)
				}
			}
		})
	}
}

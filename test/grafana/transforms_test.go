package grafana

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTransformCheckerCatchesMistakes runs transforms/check.mjs (Grafana's own transformations, from
// @grafana/data) on its sample panels, which must pass, and on broken copies of them, which must each
// fail: a trend x axis left as text, one not sorted, an override naming a field that the
// transformations renamed, a fillBelowTo target that is not there, a bar chart's lost xField. A checker
// that cannot fail proves nothing about the dashboards it passes (test/e2e runs it on every panel).
func TestTransformCheckerCatchesMistakes(t *testing.T) {
	node, err := exec.LookPath("node")
	msg := ""
	if err != nil {
		msg = "node not found: run `make test-deps` (Debian packages nodejs and npm)"
	} else if _, err := os.Stat(filepath.Join("transforms", "node_modules", "@grafana", "data")); err != nil {
		msg = "@grafana/data not installed: run `make test-deps` (npm ci in test/grafana/transforms)"
	}
	if msg != "" {
		if os.Getenv("SLAPROBE_REQUIRE_DEPS") == "1" {
			t.Fatal(msg + " (SLAPROBE_REQUIRE_DEPS=1)")
		}
		t.Skip(msg)
	}
	run := func(file string) (string, int) {
		_ = os.Getenv("SLAPROBE_TEST_TREE") // make test's tree digest: go test reuses this result only for the same tree
		out, err := exec.Command(node, filepath.Join("transforms", "check.mjs"), filepath.Join("transforms", "testdata", file)).CombinedOutput()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return string(out), 0
		case errors.As(err, &exit):
			return string(out), exit.ExitCode()
		}
		t.Fatalf("node check.mjs %s: %v\n%s", file, err, out)
		return "", 0
	}
	if out, code := run("sample.json"); code != 0 || strings.Contains(out, "FAIL") {
		t.Errorf("sample.json: exit %d, want 0\n%s", code, out)
	}
	out, code := run("broken.json")
	if code != 1 {
		t.Errorf("broken.json: exit %d, want 1\n%s", code, out)
	}
	if n := strings.Count(out, "FAIL "); n != 5 {
		t.Errorf("broken.json: %d panels failing, want all 5\n%s", n, out)
	}
}

package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slaprobe/slaprobe/test/testproc"
)

// TestExitCodes runs every command with the same kinds of mistake and
// checks they all exit with the same code (see exitcodes.go).
func TestExitCodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs slaprobe")
	}
	bin := binary(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(bad, []byte("targets:\n  - url: http://vllm:8000\n   name: a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.yml")
	if err := os.WriteFile(good, []byte("targets:\n  - url: http://127.0.0.1:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badSim := filepath.Join(dir, "sim.yml")
	if err := os.WriteFile(badSim, []byte("max_num_seqs: -3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "report")
	v1, err := filepath.Abs(filepath.Join("..", "..", "internal", "report", "testdata", "report.v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(v1)
	if err != nil {
		t.Fatal(err)
	}
	lower := filepath.Join(dir, "lower.json") // chatbot's max safe queue depth down from ~130 to ~50
	if err := os.WriteFile(lower, []byte(strings.Replace(string(raw), `"value": 130,`, `"value": 50,`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"no such command", []string{"frobnicate"}, exitUsage},
		{"run: unknown flag", []string{"run", "--no-such-flag"}, exitUsage},
		{"check-config: unknown flag", []string{"check-config", "--no-such-flag"}, exitUsage},
		{"bench: unknown flag", []string{"bench", "--no-such-flag"}, exitUsage},
		{"demo: unknown flag", []string{"demo", "--no-such-flag"}, exitUsage},
		{"sim: unknown flag", []string{"sim", "--no-such-flag"}, exitUsage},
		{"healthcheck: unknown flag", []string{"healthcheck", "--no-such-flag"}, exitUsage},
		{"healthcheck: malformed timeout", []string{"healthcheck", "--healthcheck.timeout=soon"}, exitUsage},
		{"healthcheck: nothing answers", []string{"healthcheck", "--healthcheck.url=" + testproc.FreeAddr(t), "--healthcheck.timeout=2s"}, exitFailure},
		{"run: malformed log level", []string{"run", "--log.level=loud"}, exitUsage},

		{"run: invalid config", []string{"run", "--config.file=" + bad, "--web.listen-address=127.0.0.1:0"}, exitFailure},
		{"check-config: invalid config", []string{"check-config", "--config.file=" + bad}, exitFailure},
		{"bench: invalid config", []string{"bench", "--config.file=" + bad, "--out=" + out}, exitFailure},
		{"sim: invalid config", []string{"sim", "--sim.config.file=" + badSim}, exitFailure},
		{"sim: KV cache below the context window", []string{"sim", "--sim.kv-cache-tokens=1000", "--sim.listen-address=127.0.0.1:0"}, exitFailure},
		{"run: missing config", []string{"run", "--config.file=" + filepath.Join(dir, "none.yml")}, exitFailure},
		{"check-config: missing config", []string{"check-config", "--config.file=" + filepath.Join(dir, "none.yml")}, exitFailure},
		{"run: unknown scenario flag", []string{"run", "--target.url=http://127.0.0.1:1", "--scenarios=nope"}, exitFailure},
		{"check-config: unknown scenario flag", []string{"check-config", "--target.url=http://127.0.0.1:1", "--scenarios=nope"}, exitFailure},
		{"bench: unknown scenario flag", []string{"bench", "--target.url=http://127.0.0.1:1", "--scenarios=nope", "--out=" + out}, exitFailure},
		{"bench: target down", []string{"bench", "--config.file=" + good, "--out=" + out}, exitFailure},

		{"compare: bad --fail-on", []string{"compare", v1, v1, "--fail-on=latency"}, exitUsage},
		{"bench: bad --fail-on", []string{"bench", "--config.file=" + good, "--baseline=" + v1, "--fail-on=metric:tpot", "--out=" + out}, exitUsage},
		{"bench: bad --fail-on-unknown", []string{"bench", "--config.file=" + good, "--baseline=" + v1, "--fail-on-unknown=maybe", "--out=" + out}, exitUsage},
		{"bench: --fail-on without --baseline", []string{"bench", "--config.file=" + good, "--fail-on=any", "--out=" + out}, exitUsage},
		{"compare: no verdict, failing closed", []string{"compare", v1, v1, "--fail-on=any", "--out=" + filepath.Join(dir, "cmp")}, exitNoVerdict},
		{"compare: regression", []string{"compare", v1, lower, "--fail-on=capacity", "--out=" + filepath.Join(dir, "cmp")}, exitRegression},

		{"check-config: valid", []string{"check-config", "--config.file=" + good}, exitOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			b, err := cmd.CombinedOutput()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.want {
				t.Errorf("slaprobe %v exited %d, want %d\n%s", tc.args, code, tc.want, b)
			}
		})
	}
}

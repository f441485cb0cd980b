package deploy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/test/testproc"
)

const unitFile = "deploy/systemd/slaprobe.service"

// buildSlaprobe builds ./cmd/slaprobe into the test's temporary directory.
func buildSlaprobe(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "slaprobe")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// -trimpath as the image's build (Dockerfile): the tests that build slaprobe share one compilation.
	testproc.SeesTree()
	cmd := exec.CommandContext(ctx, "go", "build", "-buildvcs=false", "-trimpath", "-o", bin, "./cmd/slaprobe")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/slaprobe: %v\n%s", err, out)
	}
	return bin
}

var exposureRE = regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+) `)

// TestSystemdUnit runs `systemd-analyze verify` on the unit (its ExecStart pointed at a fresh
// build, since verify checks that the binary exists) and `systemd-analyze security`, whose exposure
// score must stay at most 2.0 and match the one the unit's comment records.
func TestSystemdUnit(t *testing.T) {
	sa := requireTool(t, "systemd-analyze", "systemd")
	root := repoRoot(t)
	unit := string(readFile(t, filepath.Join(root, unitFile)))
	const installed = "/usr/local/bin/slaprobe"
	if !regexp.MustCompile(`(?m)^ExecStart=` + regexp.QuoteMeta(installed) + ` run --config\.file=/etc/slaprobe/slaprobe\.yml`).MatchString(unit) {
		t.Fatalf("ExecStart: want %s run --config.file=/etc/slaprobe/slaprobe.yml …", installed)
	}
	// Closed by default: the web config required, secrets as credentials, resources capped.
	for _, want := range []string{
		`(?m)^ExecStart=.* --web\.config\.file=%d/web-config\.yml$`,
		`(?m)^LoadCredential=web-config\.yml:/etc/slaprobe/web-config\.yml$`,
		`(?m)^LoadCredential=vllm-api-key:/etc/slaprobe/vllm-api-key$`,
		`(?m)^MemoryMax=\d+M$`,
		`(?m)^TasksMax=\d+$`,
		`(?m)^LimitNOFILE=\d+$`,
	} {
		if !regexp.MustCompile(want).MatchString(unit) {
			t.Errorf("the unit has no line matching %s", want)
		}
	}
	bin := buildSlaprobe(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "slaprobe.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(unit, installed, bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	testproc.SeesTree()
	out, err := exec.Command(sa, "verify", "--man=no", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}

	testproc.SeesTree()
	out, err = exec.Command(sa, "security", "--offline=true", "--no-pager", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m := exposureRE.FindSubmatch(out)
	if m == nil {
		t.Fatalf("no exposure level in:\n%s", out)
	}
	score, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("systemd-analyze security: exposure %.1f", score)
	if score > 2.0 {
		t.Errorf("exposure %.1f, want at most 2.0:\n%s", score, out)
	}
	recorded := regexp.MustCompile(`rates this unit ([0-9.]+) `).FindStringSubmatch(unit)
	if recorded == nil || recorded[1] != string(m[1]) {
		t.Errorf("the unit's comment records exposure %v; systemd-analyze says %s: update the comment and the docs", recorded, m[1])
	}
	if install := string(readFile(t, filepath.Join(root, "docs", "install.md"))); !strings.Contains(install, "rates its exposure **"+string(m[1])+" ") {
		t.Errorf("docs/install.md does not record the exposure %s (\"rates its exposure **%s …\")", m[1], m[1])
	}

	// ExecStart's flags are run's.
	testproc.SeesTree()
	help, err := exec.Command(bin, "run", "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(help), "--web.listen-address") || !strings.Contains(string(help), "--config.file") {
		t.Errorf("slaprobe run --help lacks the unit's flags: %v\n%s", err, help)
	}
}

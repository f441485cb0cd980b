package ollama

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slaprobe/slaprobe/test/testproc"
)

// The guard against the link error of a CPU with AMX: with -march=native, gcc defines __AMX_INT8__ on
// such a CPU, ggml-cpu.cpp then calls the AMX buffer type, and Ollama's cgo build, which does not
// compile ggml's AMX sources, fails to link. The flags scripts/test-deps.sh builds Ollama with must
// define no __AMX_* macro even when AMX is forced on (as that CPU's -march=native does, on any
// x86-64 machine), and the check make test runs before every build must reject flags that do.
func TestBuildFlagsKeepAMXOff(t *testing.T) {
	root, ok := testproc.RepoRoot()
	if !ok {
		t.Fatal("no repository root")
	}
	if _, err := exec.LookPath("g++"); err != nil {
		msg := "g++ not found: apt-get install g++ (scripts/test-deps.sh apt)"
		if os.Getenv(testproc.EnvRequire) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	script := filepath.Join(root, "scripts", "test-deps.sh")
	run := func(extra string, args ...string) (string, error) {
		cmd := exec.Command("bash", append([]string{script}, args...)...)
		cmd.Env = append(os.Environ(), "SLAPROBE_OLLAMA_EXTRA_FLAGS="+extra)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}

	forced := "-mamx-int8 -mamx-tile -mamx-bf16 -mavx512vnni"
	flags, err := run(forced, "ollama-flags")
	if err != nil {
		t.Fatalf("ollama-flags: %v: %s", err, flags)
	}
	if !strings.Contains(flags, "-march=native") || !strings.Contains(flags, forced) || !strings.HasSuffix(flags, "-mno-amx-tile") {
		t.Errorf("flags with AMX forced on: %q; want -march=native, the extra flags, then AMX turned off", flags)
	}
	if out, err := run(forced, "check-ollama-flags"); err != nil {
		t.Errorf("the guard rejects the build's own flags with AMX forced on: %v: %s", err, out)
	}
	for _, bad := range []string{"-O3 -march=native " + forced, "-O3 -march=sapphirerapids"} {
		out, err := run("", "check-ollama-flags", bad)
		if err == nil || !strings.Contains(out, "__AMX_INT8__") {
			t.Errorf("the guard let %q through (err %v): %s", bad, err, out)
		}
	}
}

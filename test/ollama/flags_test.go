package ollama

import (
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/slaprobe/slaprobe/test/testproc"
)

// testDeps runs scripts/test-deps.sh with args, stdin and extra environment, and returns its
// trimmed output.
func testDeps(t *testing.T, stdin string, env []string, args ...string) (string, error) {
	t.Helper()
	root, ok := testproc.RepoRoot()
	if !ok {
		t.Fatal("no repository root")
	}
	testproc.SeesTree()
	cmd := exec.Command("bash", append([]string{filepath.Join(root, "scripts", "test-deps.sh")}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// TestOllamaFlagsFor feeds the flag logic of Ollama's build (ollama_flags_for in
// scripts/test-deps.sh) the target option lists of gcc 12 to 15 on x86-64 and arm64
// (testdata/gcc/README.md says where each comes from) with what a try-compile of the native flags
// would have accepted, and checks the flags it chooses: on x86-64, -mno- of exactly the AMX options
// that compiler knows; on arm64 nothing x86, and -mcpu=native when the compiler accepts it. Each
// list is fed in its own order, reversed and shuffled: the flags must not depend on the order (gcc
// sorts its list, and newer versions list more AMX options after amx-tile).
func TestOllamaFlagsFor(t *testing.T) {
	const amx12 = "-mno-amx-bf16 -mno-amx-int8 -mno-amx-tile"
	const amx13 = "-mno-amx-bf16 -mno-amx-complex -mno-amx-fp16 -mno-amx-int8 -mno-amx-tile"
	const amx15 = "-mno-amx-avx512 -mno-amx-bf16 -mno-amx-complex -mno-amx-fp16 -mno-amx-fp8 -mno-amx-int8 -mno-amx-movrs -mno-amx-tf32 -mno-amx-tile -mno-amx-transpose"
	both := "-march=native -mcpu=native"
	cases := []struct {
		list, arch, native, extra, want string
	}{
		{"gcc12-amd64.txt", "amd64", "-march=native", "", "-O3 -march=native " + amx12},
		{"gcc13-amd64.txt", "amd64", "-march=native", "", "-O3 -march=native " + amx13},
		{"gcc14-amd64.txt", "amd64", "-march=native", "", "-O3 -march=native " + amx13},
		{"gcc15-amd64.txt", "amd64", "-march=native", "", "-O3 -march=native " + amx15},
		// gcc on x86-64 accepts -mcpu=native too (a deprecated -mtune): -march=native still wins.
		{"gcc15-amd64.txt", "amd64", both, "", "-O3 -march=native " + amx15},
		// The extra flags go between the native flag and AMX turned off, which must come last.
		{"gcc15-amd64.txt", "amd64", "-march=native", "-mamx-int8 -mamx-tile", "-O3 -march=native -mamx-int8 -mamx-tile " + amx15},
		// A compiler that lists no AMX option cannot turn AMX on: no -mno-amx-*, which it would reject.
		{"", "amd64", "-march=native", "", "-O3 -march=native"},
		{"gcc12-arm64.txt", "arm64", both, "", "-O3 -mcpu=native"},
		{"gcc13-arm64.txt", "arm64", both, "", "-O3 -mcpu=native"},
		{"gcc14-arm64.txt", "arm64", both, "", "-O3 -mcpu=native"},
		{"gcc15-arm64.txt", "arm64", both, "-ffp-contract=fast", "-O3 -mcpu=native -ffp-contract=fast"},
		{"gcc15-arm64.txt", "arm64", "-march=native", "", "-O3 -march=native"},
		// A cross compiler knows no "native".
		{"gcc12-arm64.txt", "arm64", "", "", "-O3"},
		// An x86-64 option list given for arm64 (a wrong GOARCH guess must still add nothing x86).
		{"gcc15-amd64.txt", "arm64", both, "", "-O3 -mcpu=native"},
	}
	for _, c := range cases {
		name := c.arch + "/" + strings.TrimSuffix(c.list, ".txt") + "/" + c.native + "/" + c.extra
		t.Run(name, func(t *testing.T) {
			var lines []string
			if c.list != "" {
				b, err := os.ReadFile(filepath.Join("testdata", "gcc", c.list))
				if err != nil {
					t.Fatal(err)
				}
				lines = strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			}
			orders := map[string][]string{"as listed": lines}
			rev := make([]string, len(lines))
			for i, l := range lines {
				rev[len(lines)-1-i] = l
			}
			orders["reversed"] = rev
			for seed := int64(1); seed <= 3; seed++ {
				s := append([]string(nil), lines...)
				rand.New(rand.NewSource(seed)).Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
				orders["shuffled "+string(rune('0'+seed))] = s
			}
			for order, l := range orders {
				got, err := testDeps(t, strings.Join(l, "\n")+"\n", nil, "ollama-flags-for", c.arch, c.native, c.extra)
				if err != nil {
					t.Fatalf("%s: ollama-flags-for: %v: %s", order, err, got)
				}
				if got != c.want {
					t.Errorf("%s: flags %q; want %q", order, got, c.want)
				}
				if c.arch != "amd64" && strings.Contains(got, "amx") {
					t.Errorf("%s: flags for %s name an x86 AMX option: %q", order, c.arch, got)
				}
			}
		})
	}
}

// The guard against the link error of a CPU with AMX: with -march=native, gcc defines __AMX_INT8__ on
// such a CPU, ggml-cpu.cpp then calls the AMX buffer type, and Ollama's cgo build, which does not
// compile ggml's AMX sources, fails to link. On x86-64, the flags scripts/test-deps.sh builds Ollama
// with (from this machine's compiler) must define no __AMX_* macro even when AMX is forced on (as
// that CPU's -march=native does, on any x86-64 machine), and the check make test runs before every
// build must reject flags that do. On any other architecture the flags must name no AMX option and
// pass the guard.
func TestBuildFlagsKeepAMXOff(t *testing.T) {
	if _, err := exec.LookPath("g++"); err != nil {
		msg := "g++ not found: apt-get install g++ (scripts/test-deps.sh apt)"
		if os.Getenv(testproc.EnvRequire) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if runtime.GOARCH != "amd64" {
		flags, err := testDeps(t, "", nil, "ollama-flags")
		if err != nil || strings.Contains(flags, "amx") {
			t.Fatalf("ollama-flags on %s: %q (err %v); want no AMX option", runtime.GOARCH, flags, err)
		}
		if out, err := testDeps(t, "", nil, "check-ollama-flags"); err != nil {
			t.Errorf("the guard rejects the build's own flags: %v: %s", err, out)
		}
		return
	}

	forced := "-mamx-int8 -mamx-tile -mamx-bf16 -mavx512vnni"
	extra := []string{"SLAPROBE_OLLAMA_EXTRA_FLAGS=" + forced}
	flags, err := testDeps(t, "", extra, "ollama-flags")
	if err != nil {
		t.Fatalf("ollama-flags: %v: %s", err, flags)
	}
	before, after, ok := strings.Cut(flags, forced)
	if !ok || !strings.Contains(before, "-march=native") {
		t.Fatalf("flags with AMX forced on: %q; want -march=native, then the extra flags %q", flags, forced)
	}
	// Every gcc that knows AMX (11 and later) knows these three; after them, only more -mno-amx-*.
	off := strings.Fields(after)
	for _, want := range []string{"-mno-amx-bf16", "-mno-amx-int8", "-mno-amx-tile"} {
		found := false
		for _, f := range off {
			found = found || f == want
		}
		if !found {
			t.Errorf("flags with AMX forced on: %q; want %s after the extra flags", flags, want)
		}
	}
	for _, f := range off {
		if !strings.HasPrefix(f, "-mno-amx-") {
			t.Errorf("flags with AMX forced on: %q; want only -mno-amx-* after the extra flags, got %s", flags, f)
		}
	}
	if out, err := testDeps(t, "", extra, "check-ollama-flags"); err != nil {
		t.Errorf("the guard rejects the build's own flags with AMX forced on: %v: %s", err, out)
	}
	for _, bad := range []string{"-O3 -march=native " + forced, "-O3 -march=sapphirerapids"} {
		out, err := testDeps(t, "", nil, "check-ollama-flags", bad)
		if err == nil || !strings.Contains(out, "__AMX_INT8__") {
			t.Errorf("the guard let %q through (err %v): %s", bad, err, out)
		}
	}
}

// Package testproc holds what the test packages that run a third-party program (test/llmd,
// test/ollama) share: finding the program that `make test-deps` built into .tools/bin, skipping or
// failing when it is missing, a free loopback port no outgoing connection can take, and a bounded
// tail of its output.
package testproc

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvRequire, when "1" (set by `make test`), turns a missing program into a test failure instead of
// a skip.
const EnvRequire = "SLAPROBE_REQUIRE_DEPS"

const mainModule = "github.com/slaprobe/slaprobe"

// Binary finds a program: $env when set (it wins over every other place), then
// <repo>/.tools/bin/<name>, then PATH. When $env is set but is not an executable file, it returns
// that path and false.
func Binary(name, env string) (string, bool) {
	SeesTree()
	if p := os.Getenv(env); p != "" {
		return p, IsExecutable(p)
	}
	if root, ok := RepoRoot(); ok {
		p := filepath.Join(root, ".tools", "bin", name)
		if IsExecutable(p) {
			return p, true
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, true
	}
	return "", false
}

// BuildFailedSuffix ends the name of the file that `make test` (scripts/test.sh) leaves beside a
// program in .tools/bin/ when the stage that builds it failed or could not run: <name>.build-failed,
// one line naming the stage and where its log is. A later build that passes (make test, make test-deps) removes it.
const BuildFailedSuffix = ".build-failed"

// BuildFailed returns what the marker of name's failed build says, when there is one in
// <repo>/.tools/bin and $env does not name the program explicitly.
func BuildFailed(name, env string) (string, bool) {
	if os.Getenv(env) != "" {
		return "", false
	}
	root, ok := RepoRoot()
	if !ok {
		return "", false
	}
	b, err := os.ReadFile(filepath.Join(root, ".tools", "bin", name+BuildFailedSuffix))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// SkipIfMissing skips the test when the program cannot be found, saying how to get it (what: the
// program and its version, for the message), and returns its path otherwise. With
// SLAPROBE_REQUIRE_DEPS=1 a missing program fails the test instead. When the last `make test` failed
// to build the program, the test is failed or skipped the same way, with the stage and its log named,
// even if an older build is still in .tools/bin: that one is not what the pins ask for.
func SkipIfMissing(t testing.TB, name, env, what string) string {
	t.Helper()
	p, ok := Binary(name, env)
	msg := ""
	if why, failed := BuildFailed(name, env); failed {
		msg = fmt.Sprintf("%s: not built: %s", what, why)
	} else if ok {
		return p
	} else if p != "" {
		msg = fmt.Sprintf("%s=%q is not an executable file; unset it or run `make test-deps`", env, p)
	} else {
		msg = fmt.Sprintf("%s not found: run `make test-deps` (builds .tools/bin/%s), or set %s to its path", what, name, env)
	}
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("%s (%s=1)", msg, EnvRequire)
	}
	t.Skip(msg)
	return ""
}

// IsExecutable reports whether p is a regular file with an execute bit.
func IsExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// RepoRoot walks up from the working directory (a package directory under `go test`) to the main
// module's go.mod.
func RepoRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modulePath(b) == mainModule {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

func modulePath(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module"); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// TailBuffer keeps the last Max bytes written to it: a program's log, for a failed test.
type TailBuffer struct {
	Max int

	mu  sync.Mutex
	buf []byte
}

func (b *TailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.Max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *TailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// quiet is this process's share of the cross-process "quiet cores" lock: held exclusive (held > 0,
// Quiet) or shared (shared > 0, Busy).
var quiet struct {
	mu     sync.Mutex
	held   int
	f      *os.File
	shared int
	sf     *os.File
}

// LockPath is the lock file of Quiet and Busy; `make test` holds it shared around promtool
// (scripts/test.sh).
func LockPath() string { return filepath.Join(os.TempDir(), "slaprobe-quiet-cores.lock") }

func lockFile(exclusive bool) (*os.File, error) {
	f, err := os.OpenFile(LockPath(), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	if err := flock(f, exclusive); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Busy marks a test that keeps the machine's cores busy (a browser, a Prometheus, a fleet of
// processes) without measuring time itself: it takes the Quiet lock shared, so that it runs beside
// other busy tests but never beside a test that asked for quiet cores. It returns a function that
// lets go early; otherwise the lock is held until the test ends.
func Busy(t testing.TB) {
	t.Helper()
	release, err := HoldShared()
	if err != nil {
		t.Fatalf("quiet-cores lock: %v", err)
	}
	t.Cleanup(release)
}

// HoldShared is Busy for a whole test binary (TestMain): it returns the function that lets go.
func HoldShared() (release func(), err error) {
	quiet.mu.Lock()
	defer quiet.mu.Unlock()
	if quiet.held > 0 {
		return func() {}, nil // the exclusive lock of this process covers it
	}
	if quiet.shared == 0 {
		f, err := lockFile(false)
		if err != nil {
			return nil, err
		}
		quiet.sf = f
	}
	quiet.shared++
	var once sync.Once
	return func() {
		once.Do(func() {
			quiet.mu.Lock()
			defer quiet.mu.Unlock()
			if quiet.shared--; quiet.shared == 0 {
				quiet.sf.Close()
				quiet.sf = nil
			}
		})
	}, nil
}

// Quiet gives the test the machine's cores to itself, as far as the other tests that call Quiet go:
// it takes an exclusive lock shared by every test process (`go test ./...` runs packages at once) and
// holds it until the test ends. Tests that compare timings with tight tolerances call it, and so do
// tests that keep the CPU busy on purpose (a real engine computing), so that the two never overlap.
// Within one process the lock is shared, not waited for.
//
// Under `make test` the go test run of every package defers these tests instead (EnvQuietDefer):
// each is skipped there and listed, and `make test` runs the listed ones afterwards, when nothing else
// runs, so that a test waiting for quiet cores never holds one of go test's package slots.
func Quiet(t testing.TB) {
	t.Helper()
	quietHold(t, false)
}

// QuietLight is Quiet for a timing check whose own work keeps well under one core busy (a simulated
// engine sleeping through its schedule, a few streams): make test's quiet pass runs such checks side
// by side, a core each (EnvQuietShared), and runs the others alone. Anywhere else it is Quiet.
func QuietLight(t testing.TB) {
	t.Helper()
	quietHold(t, true)
}

// EnvQuietShared, when "1", makes QuietLight take the lock shared, beside other light checks. make
// test's quiet pass sets it for its light checks only, once every busy stage has ended; it is never
// set where a busy test could run.
const EnvQuietShared = "SLAPROBE_QUIET_SHARED"

func quietHold(t testing.TB, light bool) {
	t.Helper()
	if path := os.Getenv(EnvQuietDefer); path != "" {
		class := "whole"
		if light {
			class = "light"
		}
		if err := deferQuiet(path, t.Name(), class); err != nil {
			t.Fatalf("quiet cores: deferring %s to %s: %v", t.Name(), path, err)
		}
		t.Skip("needs quiet cores: make test runs it in its quiet pass (" + EnvQuietDefer + ")")
	}
	quiet.mu.Lock()
	defer quiet.mu.Unlock()
	if quiet.held == 0 && quiet.shared > 0 {
		// This process holds the lock shared (Busy): asking for it exclusive would wait for itself.
		t.Log("quiet cores: this test process holds the lock shared; going on without it")
		return
	}
	var asked, got time.Time
	var cpu0 cpuTimes
	if quiet.held == 0 {
		asked = time.Now()
		f, err := lockFile(!(light && os.Getenv(EnvQuietShared) == "1"))
		if err != nil {
			t.Fatalf("quiet-cores lock: %v", err)
		}
		quiet.f = f
		got = time.Now()
		cpu0 = readCPUTimes()
	}
	quiet.held++
	t.Cleanup(func() {
		quiet.mu.Lock()
		defer quiet.mu.Unlock()
		if quiet.held--; quiet.held == 0 {
			busy := cpu0.coresBusy(readCPUTimes())
			quiet.f.Close() // closing the file releases the lock
			quiet.f = nil
			logQuiet(t.Name(), asked, got, time.Now(), busy)
		}
	})
}

// EnvQuietDefer names a file. When set, Quiet appends the package directory, the name of the
// test and its class ("whole" for Quiet, "light" for QuietLight), tab-separated, to it and skips the
// test. When it is "-", Quiet prints that line on the test's output instead, after QuietMarkDefer:
// `make test` sets it so for its first go test pass, reads the lines from go test -json's output
// (test/testsummary), which go test replays when it reuses a cached result, and then runs the tests
// listed (scripts/test.sh).
const EnvQuietDefer = "SLAPROBE_QUIET_DEFER"

// QuietMarkDefer and QuietMarkHeld begin the lines Quiet prints when EnvQuietDefer or EnvQuietLog is
// "-": the line is then the file's line, after the mark and a tab.
const (
	QuietMarkDefer = "slaprobe-quiet-defer"
	QuietMarkHeld  = "slaprobe-quiet-held"
)

func deferQuiet(path, name, class string) error {
	dir, err := os.Getwd() // go test runs a test binary in its package's directory
	if err != nil {
		return err
	}
	return record(path, QuietMarkDefer, dir+"\t"+name+"\t"+class)
}

// markOutput is where record prints: the test's output, which go test -json carries.
var markOutput io.Writer = os.Stdout

// record appends line to the file at path, or prints it after mark when path is "-".
func record(path, mark, line string) error {
	if path == "-" {
		_, err := fmt.Fprintf(markOutput, "%s\t%s\n", mark, line)
		return err
	}
	return appendLine(path, line)
}

// appendLine appends line and a newline to the file at path in one write, so that lines from several
// test processes do not interleave.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// EnvQuietLog names a file (or "-", as EnvQuietDefer) that Quiet appends one line to for each test that held the quiet cores:
// package.Test, when it asked, when it got them and when it let go (Unix seconds), and how many cores
// the test process (with the programs it started and stopped) kept busy on average while it held
// them ("-" where that cannot be read), tab-separated.
// `make test` sets it and prints the chain of timing checks, so a slow one shows.
const EnvQuietLog = "SLAPROBE_QUIET_LOG"

func logQuiet(name string, asked, got, done time.Time, busy string) {
	path := os.Getenv(EnvQuietLog)
	if path == "" || asked.IsZero() {
		return
	}
	unix := func(t time.Time) string { return fmt.Sprintf("%.3f", float64(t.UnixNano())/1e9) }
	pkg := strings.TrimSuffix(filepath.Base(os.Args[0]), ".test")
	_ = record(path, QuietMarkHeld, pkg+"."+name+"\t"+unix(asked)+"\t"+unix(got)+"\t"+unix(done)+"\t"+busy) // a diagnostic only
}

// cpuTimes is the CPU time this test process has used so far, with the child processes it has
// waited for (a real engine it started and stopped), and when it was read.
type cpuTimes struct {
	cpu time.Duration
	at  time.Time
	ok  bool
}

func readCPUTimes() cpuTimes {
	d, ok := ProcessCPU()
	return cpuTimes{cpu: d, at: time.Now(), ok: ok}
}

// coresBusy is how many cores the process kept busy on average from c to d, as a string for the log.
func (c cpuTimes) coresBusy(d cpuTimes) string {
	el := d.at.Sub(c.at)
	if !c.ok || !d.ok || el <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", (d.cpu-c.cpu).Seconds()/el.Seconds())
}

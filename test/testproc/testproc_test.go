package testproc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRepoRootFindsMainModule(t *testing.T) {
	root, ok := RepoRoot()
	if !ok {
		t.Fatal("RepoRoot: main module not found above the package directory")
	}
	if _, err := os.Stat(filepath.Join(root, "test", "testproc", "testproc.go")); err != nil {
		t.Errorf("RepoRoot() = %q, which does not hold test/testproc: %v", root, err)
	}
}

func TestTailBufferKeepsTail(t *testing.T) {
	b := &TailBuffer{Max: 8}
	_, _ = b.Write([]byte("0123456789"))
	_, _ = b.Write([]byte("ab"))
	if got := b.String(); got != "456789ab" {
		t.Errorf("tail = %q, want %q", got, "456789ab")
	}
}

func TestBinaryFromEnv(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nothing")
	t.Setenv("SLAPROBE_TESTPROC_BIN", missing)
	if p, ok := Binary("nothing", "SLAPROBE_TESTPROC_BIN"); ok || p != missing {
		t.Errorf("Binary() = %q, %v; want %q, false", p, ok, missing)
	}
}

// Two processes never hold the lock at once: a child process that asks for it waits until this one
// lets go.
func TestQuietExcludesOtherProcesses(t *testing.T) {
	if os.Getenv(EnvQuietDefer) != "" {
		Quiet(t) // deferred to make test's quiet pass: the lock must be free for the child to get it
	}
	if os.Getenv("SLAPROBE_TESTPROC_CHILD") == "1" {
		Quiet(t)
		return
	}
	var released time.Time
	done := make(chan error, 1)
	var finished time.Time
	t.Run("holder", func(t *testing.T) {
		Quiet(t)
		Quiet(t) // shared within the process, not waited for
		cmd := exec.Command(os.Args[0], "-test.run", "^TestQuietExcludesOtherProcesses$")
		cmd.Env = append(os.Environ(), "SLAPROBE_TESTPROC_CHILD=1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { err := cmd.Wait(); finished = time.Now(); done <- err }()
		select {
		case err := <-done:
			t.Fatalf("the child got the lock while this process held it (exit %v)", err)
		case <-time.After(300 * time.Millisecond):
		}
		released = time.Now() // the subtest's cleanups let go of the lock right after this
	})
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("child: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the child did not get the lock after this process let go")
	}
	if !finished.After(released) {
		t.Errorf("the child finished at %v, before this process let go at %v", finished, released)
	}
}

// Under make test's first pass, Quiet skips the test and lists it with its package directory.
func TestQuietDefers(t *testing.T) {
	list := filepath.Join(t.TempDir(), "deferred.tsv")
	t.Setenv(EnvQuietDefer, list)
	ran := false
	t.Run("timing check", func(t *testing.T) {
		Quiet(t)
		ran = true
	})
	t.Run("light check", func(t *testing.T) {
		QuietLight(t)
		ran = true
	})
	if ran {
		t.Error("the test went on past Quiet instead of being deferred")
	}
	b, err := os.ReadFile(list)
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := os.Getwd()
	if want := dir + "\tTestQuietDefers/timing_check\twhole\n" + dir + "\tTestQuietDefers/light_check\tlight\n"; string(b) != want {
		t.Errorf("listed %q; want %q", b, want)
	}
}

// With EnvQuietDefer "-" (make test's go test -json runs), Quiet prints the line after its mark on the
// test's output instead, where test/testsummary finds it, also in a result go test replays.
func TestQuietDefersOnOutput(t *testing.T) {
	var out strings.Builder
	markOutput = &out
	t.Cleanup(func() { markOutput = os.Stdout })
	t.Setenv(EnvQuietDefer, "-")
	t.Run("light check", func(t *testing.T) {
		QuietLight(t)
		t.Error("the test went on past QuietLight instead of being deferred")
	})
	dir, _ := os.Getwd()
	if want := QuietMarkDefer + "\t" + dir + "\tTestQuietDefersOnOutput/light_check\tlight\n"; out.String() != want {
		t.Errorf("printed %q; want %q", out.String(), want)
	}
}

// In make test's quiet pass (EnvQuietShared), two light checks in two processes hold the lock at
// once; a whole-machine check still waits for them. Elsewhere a light check is a whole-machine one.
func TestQuietLightShares(t *testing.T) {
	if os.Getenv(EnvQuietDefer) != "" {
		Quiet(t) // deferred to make test's quiet pass: the lock must be free for the children
	}
	switch os.Getenv("SLAPROBE_TESTPROC_CHILD") {
	case "light":
		QuietLight(t)
		return
	case "whole":
		Quiet(t)
		return
	}
	child := func(class string, shared bool) chan error {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestQuietLightShares$")
		cmd.Env = append(os.Environ(), "SLAPROBE_TESTPROC_CHILD="+class, EnvQuietShared+"=")
		if shared {
			cmd.Env = append(cmd.Env, EnvQuietShared+"=1")
		}
		done := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
		return done
	}
	for _, tc := range []struct {
		name         string
		shared       bool
		child        string
		wantWaitsFor bool
	}{
		{"light beside light, in the quiet pass", true, "light", false},
		{"whole beside light, in the quiet pass", true, "whole", true},
		{"light beside light, elsewhere", false, "light", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvQuietShared, map[bool]string{true: "1"}[tc.shared])
			var done chan error
			finished := false
			t.Run("holder", func(t *testing.T) {
				QuietLight(t)
				done = child(tc.child, tc.shared)
				if tc.wantWaitsFor {
					// It must still wait a second later (a child is slower to start, never faster).
					select {
					case err := <-done:
						finished = true
						t.Errorf("the %s child got the lock beside a light holder (exit %v); want it to wait", tc.child, err)
					case <-time.After(time.Second):
					}
					return
				}
				// It must end while this process still holds the lock.
				select {
				case err := <-done:
					finished = true
					if err != nil {
						t.Errorf("child: %v", err)
					}
				case <-time.After(20 * time.Second):
					t.Errorf("the %s child still waits for a light holder after 20 s; want it beside it", tc.child)
				}
			})
			if finished {
				return
			}
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("the child did not get the lock after this process let go")
			}
		})
	}
}

// fakeTB records what SkipIfMissing says instead of ending the test.
type fakeTB struct {
	testing.TB
	skipped, failed string
}

func (f *fakeTB) Helper()                        {}
func (f *fakeTB) Skip(args ...any)               { f.skipped = fmt.Sprint(args...) }
func (f *fakeTB) Fatalf(format string, a ...any) { f.failed = fmt.Sprintf(format, a...) }

// A marker left by a failed build wins over an older binary still in .tools/bin, and its text reaches
// the test's message: skipped in a plain go test, failed under make test.
func TestSkipIfMissingNamesTheFailedBuild(t *testing.T) {
	root, ok := RepoRoot()
	if !ok {
		t.Fatal("no repo root")
	}
	bin := filepath.Join(root, ".tools", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("testproc-fake-%d", os.Getpid())
	exe, marker := filepath.Join(bin, name), filepath.Join(bin, name+BuildFailedSuffix)
	t.Cleanup(func() { os.Remove(exe); os.Remove(marker) })
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := "SLAPROBE_TESTPROC_FAKE"
	t.Setenv(env, "")

	t.Setenv(EnvRequire, "")
	if p := SkipIfMissing(&fakeTB{TB: t}, name, env, "fake 1.0"); p != exe {
		t.Fatalf("without a marker: %q, want %q", p, exe)
	}
	why := "stage fake of make test failed (exit 2); its log: /somewhere/fake.log"
	if err := os.WriteFile(marker, []byte(why+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &fakeTB{TB: t}
	if p := SkipIfMissing(f, name, env, "fake 1.0"); p != "" || !strings.Contains(f.skipped, why) || f.failed != "" {
		t.Errorf("with a marker: path %q, skipped %q, failed %q; want a skip naming %q", p, f.skipped, f.failed, why)
	}
	t.Setenv(EnvRequire, "1")
	f = &fakeTB{TB: t}
	SkipIfMissing(f, name, env, "fake 1.0")
	if !strings.Contains(f.failed, why) || !strings.Contains(f.failed, "fake 1.0") {
		t.Errorf("with a marker under %s=1: failed %q; want the stage and its log named", EnvRequire, f.failed)
	}
	// An explicit path in the environment is the user's choice: no marker applies.
	t.Setenv(env, exe)
	if p := SkipIfMissing(&fakeTB{TB: t}, name, env, "fake 1.0"); p != exe {
		t.Errorf("with %s set: %q, want %q", env, p, exe)
	}
}

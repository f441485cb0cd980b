package testproc

import (
	"os"
	"os/exec"
	"path/filepath"
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
	if ran {
		t.Error("the test went on past Quiet instead of being deferred")
	}
	b, err := os.ReadFile(list)
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := os.Getwd()
	if want := dir + "\tTestQuietDefers/timing_check\n"; string(b) != want {
		t.Errorf("listed %q; want %q", b, want)
	}
}

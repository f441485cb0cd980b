package testproc

import (
	"os"
	"path/filepath"
	"testing"
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

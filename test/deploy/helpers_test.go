package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// envRequire turns a missing tool into a failure instead of a skip (set by `make test`).
const envRequire = "SLAPROBE_REQUIRE_DEPS"

// repoRoot is two levels up, where slaprobe's go.mod is.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root: %v", err)
	}
	return root
}

// requireTool finds a program on PATH; without it the test skips, or fails under SLAPROBE_REQUIRE_DEPS=1.
func requireTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	msg := fmt.Sprintf("%s not found: run `make test-deps` (Debian package %s)", name, pkg)
	if os.Getenv(envRequire) == "1" {
		t.Fatalf("%s (%s=1)", msg, envRequire)
	}
	t.Skip(msg)
	return ""
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

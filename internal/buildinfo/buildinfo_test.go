package buildinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"testing"

	"github.com/slaprobe/slaprobe/test/testproc"
)

func info(mainVersion string, settings ...string) *debug.BuildInfo {
	bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/slaprobe/slaprobe", Version: mainVersion}}
	for i := 0; i+1 < len(settings); i += 2 {
		bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
	}
	return bi
}

func TestFrom(t *testing.T) {
	const rev = "c1efdeb2a62edac0421dcf1ccf0f16aca83529a3"
	vcs := []string{"vcs", "git", "vcs.revision", rev, "vcs.time", "2026-11-23T19:55:55Z", "vcs.modified", "false"}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		in   Vars
		want Vars
	}{
		{"go install @version", info("v1.2.3"), Vars{},
			Vars{"v1.2.3", "unknown", "unknown", "unknown", "unknown"}},
		{"go build in a checkout", info("v0.0.0-20261123195555-c1efdeb2a62e", vcs...), Vars{},
			Vars{"v0.0.0-20261123195555-c1efdeb2a62e", rev, "unknown", "unknown", "commit 2026-11-23T19:55:55Z"}},
		{"local changes", info("v0.0.0-20261123195555-c1efdeb2a62e+dirty", "vcs.revision", rev, "vcs.modified", "true"), Vars{},
			Vars{"v0.0.0-20261123195555-c1efdeb2a62e+dirty", rev + "-modified", "unknown", "unknown", "unknown"}},
		{"revision without a module version", info("(devel)", "vcs.revision", rev, "vcs.modified", "true"), Vars{},
			Vars{"devel-c1efdeb2a62e-modified", rev + "-modified", "unknown", "unknown", "unknown"}},
		{"go run, -buildvcs=false", info("(devel)"), Vars{},
			Vars{"devel", "unknown", "unknown", "unknown", "unknown"}},
		{"no build information", nil, Vars{},
			Vars{"devel", "unknown", "unknown", "unknown", "unknown"}},
		{"ldflags win", info("v1.2.3", vcs...), Vars{"1.0.0", "abc", "main", "ci@host", "20261123-19:00:00"},
			Vars{"1.0.0", "abc", "main", "ci@host", "20261123-19:00:00"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := From(tc.bi, tc.in); got != tc.want {
				t.Errorf("From = %+v\nwant   %+v", got, tc.want)
			}
		})
	}
}

// A plain `go build` (no ldflags, -buildvcs=false as in CI) reports a version
// with no empty field.
func TestGoBuildVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds slaprobe")
	}
	bin := filepath.Join(t.TempDir(), "slaprobe")
	// -trimpath changes no version field; it lets this build share the compilation of the other
	// tests that build slaprobe (the image's flags, Dockerfile).
	testproc.SeesTree()
	cmd := exec.Command("go", "build", "-buildvcs=false", "-trimpath", "-o", bin, "./cmd/slaprobe")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	testproc.SeesTree()
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`^slaprobe, version devel \(branch: unknown, revision: unknown\)\n  build user:       unknown\n  build date:       unknown\n`).Match(out) {
		t.Errorf("--version of a plain go build:\n%s", out)
	}
}

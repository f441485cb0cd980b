package deploy

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// dockerfile is the repository's Dockerfile, parsed by BuildKit.
type dockerfile struct {
	stages   []instructions.Stage
	metaArgs []instructions.ArgCommand
}

func parseDockerfile(t *testing.T, path string) dockerfile {
	t.Helper()
	res, err := parser.Parse(bytes.NewReader(readFile(t, path)))
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	for _, w := range res.Warnings {
		t.Errorf("%s: %s", path, w.Short)
	}
	stages, metaArgs, err := instructions.Parse(res.AST, nil)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return dockerfile{stages, metaArgs}
}

func commands[T any](s instructions.Stage) []T {
	var out []T
	for _, c := range s.Commands {
		if x, ok := c.(T); ok {
			out = append(out, x)
		}
	}
	return out
}

// TestDockerfile checks the image's structure: a cgo build stage, a glibc runtime without a shell,
// a non-root user, a health check that needs no shell, and every path it copies.
func TestDockerfile(t *testing.T) {
	root := repoRoot(t)
	df := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	if len(df.stages) != 2 {
		t.Fatalf("%d stages, want 2 (build, runtime)", len(df.stages))
	}
	build, run := df.stages[0], df.stages[1]

	// Same Debian release on both sides: the binary links the builder's glibc dynamically.
	if build.Name != "build" || !regexp.MustCompile(`^golang:[0-9.]+-bookworm$`).MatchString(build.BaseName) {
		t.Errorf("build stage: FROM %s AS %s, want golang:<version>-bookworm AS build", build.BaseName, build.Name)
	}
	if !regexp.MustCompile(`^gcr\.io/distroless/cc-debian12(:nonroot)?(@sha256:[0-9a-f]{64})?$`).MatchString(run.BaseName) {
		t.Errorf("runtime base %s: want gcr.io/distroless/cc-debian12 (glibc, no shell)", run.BaseName)
	}
	if got := commands[*instructions.RunCommand](run); len(got) > 0 {
		t.Errorf("the runtime stage has RUN %v: its base has no shell", got[0].CmdLine)
	}

	// The build: cgo on, the version stamped through prometheus/common/version, output copied out.
	buildCmd := goBuildCommand(t, build)
	for _, want := range []string{"CGO_ENABLED=1", "-X github.com/prometheus/common/version.Version=${VERSION}",
		"-X github.com/prometheus/common/version.Revision=${REVISION}", "./cmd/slaprobe"} {
		if !strings.Contains(buildCmd, want) {
			t.Errorf("build command lacks %q: %s", want, buildCmd)
		}
	}
	out := regexp.MustCompile(`-o (\S+)`).FindStringSubmatch(buildCmd)
	copies := commands[*instructions.CopyCommand](run)
	if out == nil || !slices.ContainsFunc(copies, func(c *instructions.CopyCommand) bool {
		return c.From == "build" && slices.Contains(c.SourcePaths, out[1]) && c.DestPath == "/bin/slaprobe"
	}) {
		t.Errorf("the runtime stage does not COPY --from=build the built binary (%v) to /bin/slaprobe", out)
	}

	// Every path copied from the build context exists and is not excluded by .dockerignore.
	ignored := dockerignore(t, root)
	for _, s := range df.stages {
		for _, c := range commands[*instructions.CopyCommand](s) {
			if c.From != "" {
				continue
			}
			for _, src := range c.SourcePaths {
				if _, err := os.Stat(filepath.Join(root, src)); err != nil {
					t.Errorf("stage %s: COPY %s: %v", s.Name, src, err)
				}
				if src != "." && slices.Contains(ignored, strings.TrimPrefix(src, "./")) {
					t.Errorf("stage %s: COPY %s, which .dockerignore excludes", s.Name, src)
				}
			}
		}
	}

	// Non-root, numerically (Kubernetes' runAsNonRoot can only check a number).
	users := commands[*instructions.UserCommand](run)
	if len(users) == 0 {
		t.Fatal("the runtime stage sets no USER")
	}
	user := users[len(users)-1].User
	if !regexp.MustCompile(`^[1-9][0-9]*(:[1-9][0-9]*)?$`).MatchString(user) {
		t.Errorf("USER %s: want a numeric non-root uid[:gid]", user)
	}

	// Exec forms only: there is no /bin/sh to run a shell form.
	ep := commands[*instructions.EntrypointCommand](run)
	if len(ep) != 1 || ep[0].PrependShell || !slices.Equal(ep[0].CmdLine, []string{"/bin/slaprobe"}) {
		t.Errorf("ENTRYPOINT: want [\"/bin/slaprobe\"] in exec form, got %+v", ep)
	}
	for _, c := range commands[*instructions.CmdCommand](run) {
		if c.PrependShell {
			t.Errorf("CMD %v is in shell form", c.CmdLine)
		}
	}
	hc := commands[*instructions.HealthCheckCommand](run)
	if len(hc) != 1 || !slices.Equal(hc[0].Health.Test, []string{"CMD", "/bin/slaprobe", "healthcheck"}) {
		t.Errorf("HEALTHCHECK: want CMD [\"/bin/slaprobe\", \"healthcheck\"] (exec form, no shell), got %+v", hc)
	} else if hc[0].Health.Timeout <= 0 || hc[0].Health.Timeout > 10*time.Second {
		t.Errorf("HEALTHCHECK --timeout=%s", hc[0].Health.Timeout)
	}
	expose := commands[*instructions.ExposeCommand](run)
	if len(expose) != 1 || !slices.Equal(expose[0].Ports, []string{"9781"}) {
		t.Errorf("EXPOSE: want 9781, got %+v", expose)
	}
	var nvidia bool
	for _, e := range commands[*instructions.EnvCommand](run) {
		for _, kv := range e.Env {
			nvidia = nvidia || (kv.Key == "NVIDIA_DRIVER_CAPABILITIES" && strings.Contains(kv.Value, "utility"))
		}
	}
	if !nvidia {
		t.Error("no ENV NVIDIA_DRIVER_CAPABILITIES=utility: the NVIDIA container toolkit would not mount NVML")
	}
}

// goBuildCommand is the build stage's RUN line with `go build`.
func goBuildCommand(t *testing.T, s instructions.Stage) string {
	t.Helper()
	for _, r := range commands[*instructions.RunCommand](s) {
		line := strings.Join(r.CmdLine, " ")
		if strings.Contains(line, "go build") {
			return line
		}
	}
	t.Fatal("the build stage has no RUN … go build")
	return ""
}

// dockerignore returns the plain paths .dockerignore excludes (patterns are not expanded).
func dockerignore(t *testing.T, root string) []string {
	var out []string
	for _, l := range strings.Split(string(readFile(t, filepath.Join(root, ".dockerignore"))), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, strings.TrimPrefix(l, "/"))
		}
	}
	return out
}

// TestDockerfileBuildCommand runs the build stage's own `go build` line outside Docker, with the
// repository as WORKDIR, the ARGs in its environment as `docker build --build-arg` sets them, and /out/ in a
// temporary directory; the binary must be dynamically linked (cgo) and report the stamped version.
func TestDockerfileBuildCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds slaprobe with -trimpath (a minute or two without a warm cache)")
	}
	root := repoRoot(t)
	df := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	build := df.stages[0]
	dir := t.TempDir()
	args := map[string]string{"VERSION": "v9.9.9-dockerfile-test", "REVISION": "0123abcd", "BRANCH": "test"}
	for _, a := range commands[*instructions.ArgCommand](build) {
		for _, kv := range a.Args {
			if _, ok := args[kv.Key]; !ok && kv.Value != nil {
				args[kv.Key] = *kv.Value
			}
		}
	}
	var env []string
	for k, v := range args {
		env = append(env, k+"="+v)
	}
	// Docker runs a shell-form RUN as sh -c with the build arguments in the environment.
	line := goBuildCommand(t, build)
	line = strings.ReplaceAll(line, "/out/", dir+"/")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	testproc.SeesTree()
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Dir = root // WORKDIR /src, after COPY . .
	cmd.Env = append(os.Environ(), env...)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s\n%v\n%s", line, err, out)
	}
	t.Logf("ran the Dockerfile's build command in %.0fs", time.Since(start).Seconds())
	bin := filepath.Join(dir, "slaprobe")
	testproc.SeesTree()
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "version v9.9.9-dockerfile-test (branch: test, revision: 0123abcd)") ||
		!strings.Contains(string(out), "build user:       docker") {
		t.Errorf("--version of the image's binary:\n%s", out)
	}
	if ldd, err := exec.LookPath("ldd"); err == nil {
		testproc.SeesTree()
		out, err := exec.Command(ldd, bin).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "libc.so.6") {
			t.Errorf("ldd %s: want a dynamically linked binary (cgo): %v\n%s", bin, err, out)
		}
	}
}

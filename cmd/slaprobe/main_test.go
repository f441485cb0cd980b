package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/test/testproc"
)

// binary builds slaprobe once for the whole test binary, into a temporary
// directory TestMain removes, and returns its path. Tests only run it: each
// of them linking its own copy cost a link of a cgo binary per test.
func binary(t *testing.T) string {
	t.Helper()
	testproc.SeesTree() // the binary reads the examples, rules and dashboards of the tree
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "slaprobe-cmd-test-")
		if err != nil {
			built.err = err
			return
		}
		built.dir = dir
		bin := filepath.Join(dir, "slaprobe")
		// -trimpath as the image's build (Dockerfile).
		if out, err := exec.Command("go", "build", "-trimpath", "-o", bin, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		built.path = bin
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

var built struct {
	once      sync.Once
	dir, path string
	err       error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// syncBuffer collects a process's output for reading while it runs.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startProcess starts cmd with its output collected, and returns the output
// and a channel that receives its exit. A process still running when the
// test ends is killed then.
func startProcess(t *testing.T, cmd *exec.Cmd) (*syncBuffer, <-chan error) {
	t.Helper()
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		close(done)
		exited <- err
	}()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return logs, exited
}

var metricsURLRE = regexp.MustCompile(`metrics:\s+(http://127\.0\.0\.1:\d+/metrics)`)

// TestDemoSmoke starts `slaprobe demo`, scrapes it until every default
// scenario has a successful probe, then stops it with SIGTERM.
func TestDemoSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the demo for up to a minute")
	}
	t.Parallel() // mostly waits on its own slaprobe: beside the package's other waiting tests
	bin := binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--web.listen-address=127.0.0.1:0", "--log.level=warn")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	// The demo prints the URLs to open first.
	urlc := make(chan string, 1)
	var printed syncBuffer
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			printed.Write(append(sc.Bytes(), '\n'))
			if m := metricsURLRE.FindStringSubmatch(sc.Text()); m != nil && !sent {
				urlc <- m[1]
				sent = true
			}
		}
		io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	var metricsURL string
	select {
	case metricsURL = <-urlc:
	case err := <-exited:
		t.Fatalf("demo exited before printing its URLs: %v\nstdout:\n%s\nstderr:\n%s", err, printed.String(), stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("demo printed no metrics URL\nstdout:\n%s\nstderr:\n%s", printed.String(), stderr.String())
	}

	scenarios := []string{"chatbot", "rag", "agentic", "tool_calling"}
	deadline := time.Now().Add(60 * time.Second)
	var body string
	for {
		body = scrape(t, metricsURL)
		missing := 0
		for _, s := range scenarios {
			re := regexp.MustCompile(`slaprobe_probes_total\{[^}]*result="success",scenario="` + s + `"[^}]*\} [1-9]`)
			if !re.MatchString(body) {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s, %d of 4 scenarios have no successful probe:\n%s\nstderr:\n%s",
				missing, grepLines(body, "slaprobe_probe"), stderr.String())
		}
		time.Sleep(time.Second)
	}
	for _, want := range []string{"status page:", "engine metrics:"} {
		if !strings.Contains(printed.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, printed.String())
		}
	}
	for _, want := range []string{"slaprobe_ttft_seconds_bucket", "slaprobe_itl_seconds_bucket", "slaprobe_build_info", "slaprobe_scenario_enabled"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("demo exited with %v after SIGTERM\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("demo did not exit within 15 s of SIGTERM")
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grepLines(body, substr string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, substr) && !strings.HasPrefix(l, "#") && !strings.Contains(l, "_bucket") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestCheckConfig(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yml")
	bad := filepath.Join(dir, "bad.yml")
	os.WriteFile(good, []byte("targets:\n  - url: http://vllm:8000\n    http_client_config:\n      basic_auth: {username: u, password: hunter2}\n"), 0o644)
	os.WriteFile(bad, []byte("targets:\n  - url: http://vllm:8000\n    colour: blue\n"), 0o644)
	warm := filepath.Join(dir, "warm.yml") // warm:, the deprecated name of conversation:
	os.WriteFile(warm, []byte("targets:\n  - url: http://vllm:8000\nscenarios:\n  - name: general_chat_followup\n    warm: {turns: 3}\n"), 0o644)

	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string
		wantStderr string
		notStdout  string
		notStderr  string
	}{
		{name: "good", args: []string{"--config.file=" + good}, wantCode: 0,
			wantStdout: []string{"name: vllm:8000", "password: <secret>", "stall_timeout: 30s", "scenarios: [chatbot, rag, agentic, tool_calling]",
				"name: coding_agent", "think_time: 5s-1m"}, notStdout: "hunter2", notStderr: "deprecated"},
		{name: "deprecated key", args: []string{"--config.file=" + warm}, wantCode: 0,
			wantStdout: []string{"conversation:", "turns: 3"}, notStdout: "warm:",
			wantStderr: "config warning: scenarios[0] (general_chat_followup): warm is deprecated, the older name of conversation; rename the key to conversation"},
		{name: "unknown field", args: []string{"--config.file=" + bad}, wantCode: 1,
			wantStderr: `line 3: unknown field "colour" in targets[]`},
		{name: "quick flags", args: []string{"--target.url=http://a:1", "--scenarios=chatbot"}, wantCode: 0,
			wantStdout: []string{"url: http://a:1", "scenarios: [chatbot]"}},
		{name: "unknown scenario flag", args: []string{"--target.url=http://a:1", "--scenarios=chatbot,nope"}, wantCode: 1,
			wantStderr: `--scenarios: unknown scenario "nope"`},
		{name: "nothing", wantCode: 1, wantStderr: "no targets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"check-config"}, tc.args...)...)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d\nstderr: %s", code, tc.wantCode, errb.String())
			}
			for _, w := range tc.wantStdout {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
			if tc.notStdout != "" && strings.Contains(out.String(), tc.notStdout) {
				t.Errorf("stdout shows %q", tc.notStdout)
			}
			if !strings.Contains(errb.String(), tc.wantStderr) {
				t.Errorf("stderr %q lacks %q", errb.String(), tc.wantStderr)
			}
			if tc.notStderr != "" && strings.Contains(errb.String(), tc.notStderr) {
				t.Errorf("stderr shows %q:\n%s", tc.notStderr, errb.String())
			}
		})
	}
}

func TestHelpShowsDefaults(t *testing.T) {
	bin := binary(t)
	for cmd, wants := range map[string][]string{
		"run": {"--web.listen-address=:9781", "--config.file=PATH", "--scenarios=chatbot,rag,agentic,tool_calling", "--log.level=info",
			"coding_agent,", "tool_calling_agent."}, // the built-in list names the agent scenarios
		"demo": {"--web.listen-address=127.0.0.1:9781", "--web.config.file"},
		// bench warns before anyone runs it, and shows a gentler start.
		"bench": {"loads the server on purpose", "up to 32 requests in flight", "bursts of up to 256", "each burst 3 times", "about 30 minutes",
			"--scenarios=chatbot --concurrency=1,2,4 --burst=1,4,16", "--burst=\"1,2,4,8,16,32,64,128,256\""},
		"sim": {"--sim.listen-address=\":8000\"", "--sim.max-num-seqs=256", "--sim.config.file=PATH", "--sim.kv-cache-tokens=1200000",
			"--[no-]sim.enable-prefix-caching", "--[no-]sim.enable-prompt-tokens-details"},
	} {
		out, err := exec.Command(bin, cmd, "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --help: %v", cmd, err)
		}
		// Help text is wrapped at the terminal width: compare words.
		flat := strings.Join(strings.Fields(string(out)), " ")
		for _, w := range wants {
			if !strings.Contains(flat, w) {
				t.Errorf("%s --help lacks %q:\n%s", cmd, w, out)
			}
		}
	}
}

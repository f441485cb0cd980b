package daemon

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/prober"
)

// fakeProbe succeeds at once with plausible timings.
func fakeProbe(ctx context.Context, t prober.Target, model string, s prober.Scenario, _ prober.ThinkFunc) prober.Result {
	now := time.Now()
	return prober.Result{
		API: s.APIOn(t), Target: t.Name, Model: model, Scenario: s.Name, Kind: prober.KindSuccess,
		Start: now, FirstToken: now.Add(100 * time.Millisecond), LastToken: now.Add(time.Second),
		PromptTokens: s.InputTokens, OutputTokens: s.OutputTokens, RequestedTokens: s.OutputTokens,
		FirstChunkTokens: 1, PromptLengthOK: true,
	}
}

func fakeModels(context.Context, prober.Target) ([]prober.ModelInfo, error) {
	return []prober.ModelInfo{{ID: "fake-model", MaxModelLen: 8192}}, nil
}

// fastSleep runs the scheduler 1000× faster than real time.
func fastSleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d / 1000)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func writeConfig(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

const configA = `
targets:
  - name: a
    url: http://127.0.0.1:1
    headers: {Authorization: Bearer hunter2}
global:
  scenarios: [chatbot, rag]
`

const configB = `
targets:
  - name: b
    url: http://127.0.0.1:2
global:
  scenarios: [chatbot]
`

type testDaemon struct {
	*Daemon
	srv    *httptest.Server
	cancel context.CancelFunc
	done   chan error
	file   string
}

func startDaemon(t *testing.T, cfg string, start bool) *testDaemon {
	t.Helper()
	file := filepath.Join(t.TempDir(), "slaprobe.yml")
	writeConfig(t, file, cfg)
	d, err := New(Options{
		ConfigFile: file, Probe: fakeProbe, ListModels: fakeModels, SchedulerSleep: fastSleep,
	})
	if err != nil {
		t.Fatal(err)
	}
	td := &testDaemon{Daemon: d, srv: httptest.NewServer(d.Handler()), done: make(chan error, 1), file: file}
	t.Cleanup(td.srv.Close)
	if start {
		td.start(t)
	}
	return td
}

func (td *testDaemon) start(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	td.cancel = cancel
	go func() { td.done <- td.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-td.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
}

func (td *testDaemon) get(t *testing.T, method, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, td.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitMetrics polls /metrics until it contains every want.
func (td *testDaemon) waitMetrics(t *testing.T, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var body string
	for time.Now().Before(deadline) {
		_, body = td.get(t, http.MethodGet, "/metrics")
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(body, w)
		}
		if ok {
			return body
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("/metrics never contained %q; last:\n%s", want, grep(body, "slaprobe_"))
	return ""
}

func grep(body, substr string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, substr) && !strings.HasPrefix(l, "#") && !strings.Contains(l, "_bucket") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestEndpoints(t *testing.T) {
	td := startDaemon(t, configA, false)

	if code, body := td.get(t, http.MethodGet, "/-/healthy"); code != 200 || !strings.Contains(body, "Healthy") {
		t.Errorf("/-/healthy: %d %q", code, body)
	}
	if code, _ := td.get(t, http.MethodGet, "/-/ready"); code != http.StatusServiceUnavailable {
		t.Errorf("/-/ready before Run: %d, want 503", code)
	}
	td.start(t)
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, _ := td.get(t, http.MethodGet, "/-/ready")
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/-/ready after Run: %d, want 200", code)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code, _ := td.get(t, http.MethodGet, "/-/reload"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /-/reload: %d, want 405", code)
	}
	// The daemon has no page of its own at "/": the composition root
	// mounts the status page there with Handle.
	if code, _ := td.get(t, http.MethodGet, "/"); code != 404 {
		t.Errorf("/ before a page is mounted: %d, want 404", code)
	}
	td.Handle("GET /{$}", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "status page") }))
	if code, body := td.get(t, http.MethodGet, "/"); code != 200 || body != "status page" {
		t.Errorf("/ after Handle: %d %q", code, body)
	}
	if code, _ := td.get(t, http.MethodGet, "/nope"); code != 404 {
		t.Errorf("/nope: %d, want 404", code)
	}
	code, body := td.get(t, http.MethodGet, "/config")
	if code != 200 || strings.Contains(body, "hunter2") || !strings.Contains(body, "<secret>") {
		t.Errorf("/config must show the config with secrets redacted: %d\n%s", code, body)
	}

	td.waitMetrics(t,
		`slaprobe_build_info{`,
		`slaprobe_config_last_reload_successful 1`,
		`slaprobe_config_last_reload_success_timestamp_seconds `,
		`slaprobe_probes_total{api="chat",model="fake-model",result="success",scenario="chatbot",target="a"}`,
		`slaprobe_probes_total{api="chat",model="fake-model",result="success",scenario="rag",target="a"}`,
		`slaprobe_ttft_seconds_bucket{api="chat",model="fake-model",scenario="chatbot",target="a",le="0.1"}`,
		`slaprobe_scenario_enabled{api="chat",model="fake-model",scenario="chatbot",target="a"} 1`,
		`slaprobe_sla_threshold{metric="ttft_seconds",scenario="chatbot"} 3`,
		`slaprobe_prober_planned_tokens_per_hour{target="a"}`,
		`go_goroutines `,
		`process_start_time_seconds `,
	)
}

func TestMetricsNegotiatesOpenMetrics(t *testing.T) {
	td := startDaemon(t, configA, true)
	req, _ := http.NewRequest(http.MethodGet, td.srv.URL+"/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Errorf("Content-Type %q, want OpenMetrics", ct)
	}
}

func TestReload(t *testing.T) {
	td := startDaemon(t, configA, true)
	td.waitMetrics(t, `slaprobe_probes_total{api="chat",model="fake-model",result="success",scenario="chatbot",target="a"}`)

	// Unchanged file.
	if code, body := td.get(t, http.MethodPost, "/-/reload"); code != 200 || !strings.Contains(body, "unchanged") {
		t.Errorf("reload of the same file: %d %q", code, body)
	}

	// A bad file keeps the old config running and says so.
	writeConfig(t, td.file, configA+"bogus_field: 1\n")
	code, body := td.get(t, http.MethodPost, "/-/reload")
	if code != http.StatusInternalServerError || !strings.Contains(body, `unknown field "bogus_field"`) {
		t.Errorf("bad reload: %d %q", code, body)
	}
	td.waitMetrics(t, "slaprobe_config_last_reload_successful 0")
	if got := td.Config().TargetConfigs[0].Name; got != "a" {
		t.Fatalf("running config changed to target %q after a bad reload", got)
	}
	before := probeCount(t, td, "a")
	deadline := time.Now().Add(10 * time.Second)
	for probeCount(t, td, "a") <= before {
		if time.Now().After(deadline) {
			t.Fatal("probes stopped after a bad reload")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A good file replaces it: new target probed, old target's series gone.
	writeConfig(t, td.file, configB)
	if code, body := td.get(t, http.MethodPost, "/-/reload"); code != 200 || !strings.Contains(body, "reloaded") {
		t.Fatalf("good reload: %d %q", code, body)
	}
	body = td.waitMetrics(t,
		"slaprobe_config_last_reload_successful 1",
		`slaprobe_probes_total{api="chat",model="fake-model",result="success",scenario="chatbot",target="b"}`,
	)
	if strings.Contains(body, `target="a"`) {
		t.Errorf("series of the removed target remain:\n%s", grep(body, `target="a"`))
	}
	if strings.Contains(body, `slaprobe_sla_threshold{metric="itl_seconds",scenario="nope"`) {
		t.Error("unexpected threshold")
	}
}

func probeCount(t *testing.T, td *testDaemon, target string) int {
	t.Helper()
	n := 0
	for _, r := range []string{"chatbot", "rag"} {
		n += int(counterValue(t, td, `slaprobe_probes_total{api="chat",model="fake-model",result="success",scenario="`+r+`",target="`+target+`"}`))
	}
	return n
}

func counterValue(t *testing.T, td *testDaemon, series string) float64 {
	t.Helper()
	_, body := td.get(t, http.MethodGet, "/metrics")
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, series+" ") {
			v, _ := strconv.ParseFloat(strings.TrimPrefix(l, series+" "), 64)
			return v
		}
	}
	return 0
}

type countingHook struct{ before, after atomic.Int32 }

func (h *countingHook) BeforeProbe(context.Context, prober.Target, prober.Scenario) { h.before.Add(1) }
func (h *countingHook) AfterProbe(*prober.Result)                                   { h.after.Add(1) }

func TestHooksAndExtensions(t *testing.T) {
	td := startDaemon(t, configA, false)
	h := &countingHook{}
	td.AddHook(h)
	td.Handle("POST /-/custom", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "custom") }))
	var seen atomic.Int32
	td.OnReload(func(c *config.Config) { seen.Add(1) })
	if seen.Load() != 1 {
		t.Errorf("OnReload did not see the current config at once")
	}
	td.start(t)
	deadline := time.Now().Add(10 * time.Second)
	for h.after.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("hook saw no probes")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, body := td.get(t, http.MethodPost, "/-/custom"); code != 200 || body != "custom" {
		t.Errorf("handler added with Handle: %d %q", code, body)
	}
	writeConfig(t, td.file, configB)
	if _, err := td.Reload(); err != nil {
		t.Fatal(err)
	}
	if seen.Load() != 2 {
		t.Errorf("OnReload calls = %d after a reload, want 2", seen.Load())
	}
}

func TestServesOnListener(t *testing.T) {
	file := filepath.Join(t.TempDir(), "slaprobe.yml")
	writeConfig(t, file, configA)
	addrs := []string{"127.0.0.1:0"}
	cfgFile := ""
	d, err := New(Options{
		ConfigFile: file, Probe: fakeProbe, ListModels: fakeModels, SchedulerSleep: fastSleep,
		Web: &web.FlagConfig{WebListenAddresses: &addrs, WebConfigFile: &cfgFile},
	})
	if err != nil {
		t.Fatal(err)
	}
	la, err := d.Listen()
	if err != nil || len(la) != 1 {
		t.Fatalf("Listen: %v %v", la, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	resp, err := http.Get("http://" + la[0].String() + "/-/healthy")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/-/healthy on the listener: %d", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "slaprobe.yml")
	// No targets key at all (`targets: []` is a slaprobe that probes only through /probe).
	writeConfig(t, file, "global: {jitter: 0.1}\n")
	if _, err := New(Options{ConfigFile: file}); err == nil || !strings.Contains(err.Error(), "no targets") {
		t.Errorf("New with no targets: %v", err)
	}
}

package config

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/prober"
)

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFileSDTargets(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "targets"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "targets", "a.yml"), `
- targets: ["10.0.0.1:8000", "10.0.0.2:8000"]
  labels: {team: search}            # ignored
- targets: ["10.0.0.3:8443"]
  labels: {__scheme__: https, target: big, model: llama-70b}
`)
	writeFile(t, filepath.Join(dir, "targets", "b.json"), `[{"targets": ["http://vllm-b:8000/v1"]}]`)
	writeFile(t, filepath.Join(dir, "targets", "ignored.txt"), `not matched`)
	cfg := filepath.Join(dir, "slaprobe.yml")
	writeFile(t, cfg, `
targets:
  - url: http://static:8000
file_sd_configs:
  - files: [targets/*.yml, targets/*.json]
    scenarios: [chatbot]
    http_client_config:
      bearer_token_file: token
`)
	c, err := Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	type want struct{ name, url, model string }
	var got []want
	for _, tc := range c.TargetConfigs {
		got = append(got, want{tc.Name, tc.URL, tc.Model})
	}
	exp := []want{
		{"static:8000", "http://static:8000", ""},
		{"10.0.0.1:8000", "http://10.0.0.1:8000", ""},
		{"10.0.0.2:8000", "http://10.0.0.2:8000", ""},
		{"big", "https://10.0.0.3:8443", "llama-70b"},
		{"vllm-b:8000", "http://vllm-b:8000", ""},
	}
	if len(got) != len(exp) {
		t.Fatalf("targets = %v, want %v", got, exp)
	}
	for i := range exp {
		if got[i] != exp[i] {
			t.Errorf("target %d = %+v, want %+v", i, got[i], exp[i])
		}
	}
	// Discovered targets take the template: its scenarios, and its client
	// config with files relative to the config's directory.
	if s := c.Scenarios("big"); len(s) != 1 || s[0].Name != "chatbot" {
		t.Errorf("scenarios of a discovered target = %v, want [chatbot]", s)
	}
	if s := c.Scenarios("static:8000"); len(s) != len(prober.DefaultScenarios) {
		t.Errorf("the static target lost its scenarios: %v", s)
	}
	hc := c.TargetConfigs[1].HTTPClientConfig
	if hc.Authorization == nil || hc.Authorization.CredentialsFile != filepath.Join(dir, "token") {
		f := ""
		if hc.Authorization != nil {
			f = hc.Authorization.CredentialsFile
		}
		t.Errorf("bearer_token_file = %q, want it relative to the config file", f)
	}
}

func TestFileSDErrors(t *testing.T) {
	for _, tc := range []struct{ name, cfg, file, want string }{
		{"no files", "file_sd_configs: [{}]", "", "file_sd_configs[0].files is empty"},
		{"bad glob", "file_sd_configs: [{files: ['t/[']}]", "", `is not a valid glob`},
		{"short refresh", "file_sd_configs: [{files: [t.yml], refresh_interval: 100ms}]", "", "refresh_interval=100ms; expected at least 1s"},
		{"not a list", "file_sd_configs: [{files: [t.yml]}]", "targets: [a:1]", "expected a list of {targets"},
		{"unknown key", "file_sd_configs: [{files: [t.yml]}]", "- targets: [a:1]\n  lables: {}", `unknown field "lables"`},
		{"bad scheme", "file_sd_configs: [{files: [t.yml]}]", "- targets: [a:1]\n  labels: {__scheme__: ftp}", `label __scheme__="ftp"; expected http or https`},
		{"bad address", "file_sd_configs: [{files: [t.yml]}]", "- targets: ['a:1/x']", `target "a:1/x"; expected host:port`},
		{"named group", "file_sd_configs: [{files: [t.yml]}]", "- targets: [a:1, b:1]\n  labels: {target: x}", "one target per group"},
		{"duplicate", "targets: [{url: 'http://a:1'}]\nfile_sd_configs: [{files: [t.yml]}]", "- targets: ['a:1']", `t.yml: group 0, targets[0] (a:1): name "a:1" is used twice`},
		{"unknown scenario", "file_sd_configs: [{files: [t.yml], scenarios: [nope]}]", "- targets: ['a:1']", `scenarios: unknown scenario "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.file != "" {
				writeFile(t, filepath.Join(dir, "t.yml"), tc.file)
			}
			writeFile(t, filepath.Join(dir, "c.yml"), tc.cfg)
			_, err := Load(filepath.Join(dir, "c.yml"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// An empty or missing target file is no targets, not an error: Prometheus
// reads it the same way, and tooling writes the file after slaprobe starts.
func TestFileSDNoTargetsYet(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "c.yml"), "file_sd_configs: [{files: [targets/*.json]}]")
	c, err := Load(filepath.Join(dir, "c.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.TargetConfigs) != 0 {
		t.Errorf("targets = %v, want none", c.TargetConfigs)
	}
	// `targets: []` is a /probe-only slaprobe; an absent list stays an error.
	if _, err := LoadBytes([]byte("targets: []")); err != nil {
		t.Errorf("targets: [] = %v, want it accepted", err)
	}
	if _, err := LoadBytes([]byte("global: {jitter: 0.1}")); err == nil {
		t.Error("no targets at all was accepted")
	}
}

func TestFileSDReload(t *testing.T) {
	dir := t.TempDir()
	cfg, tf := filepath.Join(dir, "c.yml"), filepath.Join(dir, "t.yml")
	writeFile(t, cfg, "file_sd_configs: [{files: [t.yml], refresh_interval: 1s}]")
	writeFile(t, tf, "- targets: ['a:1']")
	sc := NewSafeConfig(Flags{})
	if changed, err := sc.Reload(cfg); err != nil || !changed {
		t.Fatalf("first load: changed=%v err=%v", changed, err)
	}
	if sc.Get().TargetFilesChanged() {
		t.Error("TargetFilesChanged right after the load")
	}
	if changed, err := sc.Reload(cfg); err != nil || changed {
		t.Errorf("nothing changed: changed=%v err=%v", changed, err)
	}
	writeFile(t, tf, "- targets: ['a:1', 'b:1']")
	if !sc.Get().TargetFilesChanged() {
		t.Error("TargetFilesChanged missed a new target")
	}
	if changed, err := sc.Reload(cfg); err != nil || !changed || len(sc.Get().TargetConfigs) != 2 {
		t.Errorf("target file changed: changed=%v err=%v targets=%d", changed, err, len(sc.Get().TargetConfigs))
	}
	// A broken file keeps the running targets and reports the file.
	writeFile(t, tf, "- targets: [a:1\n")
	if changed, err := sc.Reload(cfg); err == nil || changed || !strings.Contains(err.Error(), "t.yml") {
		t.Errorf("broken target file: changed=%v err=%v", changed, err)
	}
	if n := len(sc.Get().TargetConfigs); n != 2 {
		t.Errorf("after a broken file: %d targets, want the 2 running", n)
	}
	// A new matching file counts too.
	writeFile(t, tf, "- targets: ['a:1', 'b:1']")
	if sc.Get().TargetFilesChanged() {
		t.Error("TargetFilesChanged after restoring the content")
	}
	if got := sc.Get().TargetFilesRefresh(); got != time.Second {
		t.Errorf("TargetFilesRefresh = %s, want 1s", got)
	}
}

func TestWatchTargetFiles(t *testing.T) {
	dir := t.TempDir()
	cfg, tf := filepath.Join(dir, "c.yml"), filepath.Join(dir, "t.yml")
	writeFile(t, cfg, "file_sd_configs: [{files: [t.yml], refresh_interval: 1s}]")
	writeFile(t, tf, "- targets: ['a:1']")
	sc := NewSafeConfig(Flags{})
	if _, err := sc.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	var reloads atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		WatchTargetFiles(ctx, sc.Get, func() {
			if _, err := sc.Reload(cfg); err != nil {
				t.Error(err)
			}
			reloads.Add(1)
		}, nil)
	}()
	writeFile(t, tf, "- targets: ['a:1', 'b:1']")
	deadline := time.Now().Add(10 * time.Second)
	for len(sc.Get().TargetConfigs) != 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	if n := len(sc.Get().TargetConfigs); n != 2 || reloads.Load() != 1 {
		t.Errorf("after a change: %d targets, %d reloads; want 2 and 1", n, reloads.Load())
	}
}

func TestProbeTarget(t *testing.T) {
	c, err := LoadBytes([]byte(`
targets:
  - {name: big, url: 'http://vllm:8000', model: m1, scenarios: [rag]}
probe:
  model: m2
  api: completions
  scenarios: [chatbot, rag]
  headers: {X-Team: search}
  allowed_targets: [10.1.2.0/24, 'h:1', 'https://h:1']
`))
	if err != nil {
		t.Fatal(err)
	}
	tg, s, err := c.ProbeTarget("big", "rag")
	if err != nil || tg.BaseURL != "http://vllm:8000" || tg.Model != "m1" || s.Name != "rag" || tg.API != prober.APIChat {
		t.Errorf("configured target: %+v %s %v", tg, s.Name, err)
	}
	tg, s, err = c.ProbeTarget("10.1.2.3:8000", "chatbot")
	if err != nil || tg.BaseURL != "http://10.1.2.3:8000" || tg.Name != "10.1.2.3:8000" || tg.Model != "m2" ||
		tg.API != prober.APICompletions || tg.Headers["X-Team"] != "search" || s.Name != "chatbot" || tg.Client == nil {
		t.Errorf("address: %+v %s %v", tg, s.Name, err)
	}
	if tg, _, err = c.ProbeTarget("https://h:1/v1", "rag"); err != nil || tg.BaseURL != "https://h:1" {
		t.Errorf("URL: %+v %v", tg, err)
	}
	for _, bad := range []struct{ target, scenario, want string }{
		{"", "rag", "target parameter is missing"},
		{"big", "", "scenario parameter is missing; expected one of: rag"},
		{"big", "chatbot", `scenario="chatbot" is not available for target "big"; expected one of: rag`},
		{"h:1", "agentic", `expected one of: chatbot, rag`},
		{"h:1", "nope", `scenario="nope"`},
		{"ftp://h:1", "rag", `scheme "ftp"; expected http or https`},
		{"10.1.3.1:8000", "rag", `matches no entry of probe.allowed_targets`},
	} {
		if _, _, err := c.ProbeTarget(bad.target, bad.scenario); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ProbeTarget(%q, %q) = %v, want an error containing %q", bad.target, bad.scenario, err, bad.want)
		}
	}
	// Without a probe section: defaults, configured targets only, and
	// only chatbot where an allow-list lets /probe go further.
	d, err := LoadBytes([]byte("targets: []"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Probe.TimeoutOffset != DefaultProbeConfig().TimeoutOffset || d.Probe.MaxConcurrent != DefaultProbeMaxConcurrent ||
		!slices.Equal(d.Probe.Scenarios, []string{"chatbot"}) {
		t.Errorf("probe defaults = %+v", d.Probe)
	}
	if _, _, err := d.ProbeTarget("h:1", "chatbot"); err == nil || !strings.Contains(err.Error(), "allowed_targets") {
		t.Errorf("default probe section: %v", err)
	}
	a, err := LoadBytes([]byte("targets: []\nprobe: {allowed_targets: ['h']}"))
	if err != nil {
		t.Fatal(err)
	}
	if _, s, err := a.ProbeTarget("h:1", "chatbot"); err != nil || s.Name != "chatbot" {
		t.Errorf("allowed, chatbot: %v", err)
	}
	if _, _, err := a.ProbeTarget("h:1", "coding_assistant"); err == nil || !strings.Contains(err.Error(), "expected one of: chatbot (probe.scenarios)") {
		t.Errorf("allowed, a scenario beyond the default set: %v", err)
	}
	if _, err := LoadBytes([]byte("targets: []\nprobe: {api: grpc}")); err == nil || !strings.Contains(err.Error(), `probe.api="grpc"`) {
		t.Errorf("bad probe.api: %v", err)
	}
}

func TestClassicHistogramBuckets(t *testing.T) {
	c, err := LoadBytes([]byte("targets: []"))
	if err != nil || c.Global.ClassicHistogramBuckets != "full" {
		t.Fatalf("default: %v %v", c, err)
	}
	for _, v := range []string{"full", "reduced", "none"} {
		if c, err := LoadBytes([]byte("targets: []\nglobal: {classic_histogram_buckets: " + v + "}")); err != nil || c.Global.ClassicHistogramBuckets != v {
			t.Errorf("%s: %v", v, err)
		}
	}
	if _, err := LoadBytes([]byte("targets: []\nglobal: {classic_histogram_buckets: some}")); err == nil ||
		!strings.Contains(err.Error(), `global.classic_histogram_buckets="some"; expected full, reduced or none`) {
		t.Errorf("bad value: %v", err)
	}
}

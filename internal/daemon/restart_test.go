package daemon

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/prober"
)

// TestReloadReportsStartOnlySettings: a reload that changes a setting read
// only at start says so in /metrics and on /config, and stops saying so once
// the file is back to what the process started with.
func TestReloadReportsStartOnlySettings(t *testing.T) {
	td := startDaemon(t, configA, true)
	td.waitMetrics(t, "\nslaprobe_config_restart_required 0\n")

	writeConfig(t, td.file, configA+"tracing: {join_timeout: 1m}\npower: {nvml: false}\n")
	if code, body := td.get(t, http.MethodPost, "/-/reload"); code != 200 {
		t.Fatalf("reload: %d %s", code, body)
	}
	td.waitMetrics(t, "\nslaprobe_config_restart_required 1\n")
	_, cfg := td.get(t, http.MethodGet, "/config")
	first, _, _ := strings.Cut(cfg, "\n")
	if !strings.HasPrefix(first, "# RESTART REQUIRED") {
		t.Errorf("/config does not start with the restart line:\n%s", cfg[:min(len(cfg), 400)])
	}
	for _, s := range []string{"tracing.join_timeout", "power.nvml"} {
		if !strings.Contains(cfg[:strings.Index(cfg, "global:")], s) {
			t.Errorf("/config's restart line does not name %s:\n%s", s, cfg[:min(len(cfg), 400)])
		}
	}

	// Back to the start: nothing awaits a restart.
	writeConfig(t, td.file, configA)
	if code, body := td.get(t, http.MethodPost, "/-/reload"); code != 200 {
		t.Fatalf("reload: %d %s", code, body)
	}
	td.waitMetrics(t, "\nslaprobe_config_restart_required 0\n")
	if _, cfg := td.get(t, http.MethodGet, "/config"); strings.Contains(cfg, "RESTART") {
		t.Errorf("/config still asks for a restart:\n%s", cfg[:min(len(cfg), 400)])
	}
}

// TestReadyFollowsTheScheduler: when a reload cannot start the probes,
// /-/ready says not ready until a later reload starts them.
func TestReadyFollowsTheScheduler(t *testing.T) {
	td := startDaemon(t, configA, true)
	waitReady := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			code, _ := td.get(t, http.MethodGet, "/-/ready")
			if code == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("/-/ready = %d, want %d", code, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitReady(http.StatusOK)

	buildTargets = func(*config.Config) ([]prober.Target, error) { return nil, errors.New("injected failure") }
	t.Cleanup(func() { buildTargets = (*config.Config).Targets })
	writeConfig(t, td.file, configB)
	if code, body := td.get(t, http.MethodPost, "/-/reload"); code != http.StatusInternalServerError || !strings.Contains(body, "injected failure") {
		t.Errorf("reload whose probes cannot start: %d %q; want 500 with the reason", code, body)
	}
	waitReady(http.StatusServiceUnavailable)
	if td.Ready() {
		t.Error("Ready() is true with no scheduler running")
	}

	// The same file again, once the probes can start: ready again.
	buildTargets = (*config.Config).Targets
	if code, body := td.get(t, http.MethodPost, "/-/reload"); code != 200 {
		t.Errorf("second reload: %d %q", code, body)
	}
	waitReady(http.StatusOK)
	td.waitMetrics(t, `slaprobe_probes_total{api="chat",model="fake-model",result="success",scenario="chatbot",target="b"}`)
}

// TestLoadWarnsDeprecatedKey: a config with warm:, the deprecated name of
// conversation:, starts, and the daemon logs a warning at load naming the
// old key and its replacement; a config without it logs none.
func TestLoadWarnsDeprecatedKey(t *testing.T) {
	for _, tc := range []struct {
		name, key string
		warn      bool
	}{{"warm", "warm", true}, {"conversation", "conversation", false}} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "slaprobe.yml")
			writeConfig(t, file, "targets:\n  - url: http://vllm:8000\nscenarios:\n  - name: general_chat_followup\n    "+tc.key+": {turns: 3}\n")
			var logs bytes.Buffer
			if _, err := New(Options{ConfigFile: file, Probe: fakeProbe, ListModels: fakeModels,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))}); err != nil {
				t.Fatal(err)
			}
			got := strings.Contains(logs.String(), "level=WARN msg=\"config uses a deprecated key\"") &&
				strings.Contains(logs.String(), "warm is deprecated, the older name of conversation; rename the key to conversation")
			if got != tc.warn {
				t.Errorf("deprecation warning logged: %v, want %v:\n%s", got, tc.warn, logs.String())
			}
		})
	}
}

package app

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/prober"
)

// TestDaemonShowsLiveMix wires the daemon against the simulated engine,
// which serves 12 background requests of 300-token prompts: the status
// page shows the target's live mix (all of it in class 1k) beside the
// scenario it probes, and /metrics exports it.
func TestDaemonShowsLiveMix(t *testing.T) {
	cfg := vllmsim.DefaultConfig()
	cfg.DecodeBase = time.Millisecond
	cfg.EOSMeanTokens = 0
	eng, err := vllmsim.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	sim := httptest.NewServer(eng.Handler())
	defer sim.Close()

	cfgPath := filepath.Join(t.TempDir(), "slaprobe.yml")
	if err := os.WriteFile(cfgPath, []byte(`targets:
  - name: sim
    url: `+sim.URL+`
    scenarios: [long]
power: {nvml: false}
scenarios:
  - {name: long, input_tokens: 4000, output_tokens: 8, interval: 1h}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := runApp(t, Options{ConfigFile: cfgPath, LiveMixRefresh: 200 * time.Millisecond})

	p := prober.New(slog.New(slog.DiscardHandler), prober.SystemClock{})
	target := prober.Target{Name: "bg", BaseURL: sim.URL, API: prober.APIChat, Client: sim.Client()}
	bg := prober.Scenario{Name: "bg", Family: prober.FamilyCustom, InputTokens: 300, OutputTokens: 4, Timeout: 30 * time.Second}
	for range 12 {
		if res := p.Probe(t.Context(), target, "", bg); res.Kind != prober.KindSuccess {
			t.Fatalf("background request: %s %v", res.Reason, res.Err)
		}
	}
	get := func(path string) string {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	// The daemon's own probe of long may land in the window too: 12 or 13.
	deadline := time.Now().Add(30 * time.Second)
	for {
		page := get("/")
		if strings.Contains(page, `data-live-requests="12"`) || strings.Contains(page, `data-live-requests="13"`) {
			if !strings.Contains(page, `data-shape="long"`) {
				t.Error("the live mix does not list the scenario long")
			}
			break
		}
		if time.Now().After(deadline) {
			i := strings.Index(page, "Live length mix")
			t.Fatalf("after 30 s the page shows no mix of 12 requests: %.600s", page[max(i, 0):])
		}
		time.Sleep(200 * time.Millisecond)
	}
	metrics := get("/metrics")
	for _, want := range []string{`slaprobe_live_mix_class_ratio{length_class="1k",target="sim"}`, `slaprobe_live_mix_requests{target="sim"}`, `slaprobe_live_mix_window_seconds{target="sim"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

package probehandler

import (
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/prober"
)

// sim is the simulated engine behind an HTTP server that counts the
// calibration requests it sees.
type sim struct {
	srv       *httptest.Server
	tokenizes atomic.Int32
}

func newSim(t *testing.T, mod func(*vllmsim.Config)) *sim {
	t.Helper()
	cfg := vllmsim.DefaultConfig()
	cfg.TimeScale = 0.2
	if mod != nil {
		mod(&cfg)
	}
	e, err := vllmsim.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	s := &sim{}
	h := e.Handler()
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/tokenize" {
			s.tokenizes.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sim) hostPort() string { return strings.TrimPrefix(s.srv.URL, "http://") }

func loadConfig(t *testing.T, yml string) func() *config.Config {
	t.Helper()
	c, err := config.LoadBytes([]byte(yml))
	if err != nil {
		t.Fatal(err)
	}
	return func() *config.Config { return c }
}

const scenarios = `
scenarios:
  - {name: tiny, input_tokens: 200, output_tokens: 20, interval: 1m, timeout: 20s}
  - {name: slow, input_tokens: 200, output_tokens: 2000, interval: 1m, timeout: 20s}
`

// get calls the handler like Prometheus does and parses the answer.
func get(t *testing.T, h http.Handler, params url.Values, timeoutHeader string) (int, string, map[string]*dto.MetricFamily) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/probe?"+params.Encode(), nil)
	if timeoutHeader != "" {
		req.Header.Set(scrapeTimeoutHeader, timeoutHeader)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body := rec.Body.String()
	if rec.Code != http.StatusOK || params.Get("debug") == "true" {
		return rec.Code, body, nil
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse the answer: %v\n%s", err, body)
	}
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
	return rec.Code, body, mfs
}

// value returns the one sample of name (with the given reason, if any).
func value(t *testing.T, mfs map[string]*dto.MetricFamily, name string) (float64, map[string]string) {
	t.Helper()
	mf := mfs[name]
	if mf == nil || len(mf.Metric) != 1 {
		t.Fatalf("%s: want exactly one sample, got %v", name, mf)
	}
	labels := map[string]string{}
	for _, l := range mf.Metric[0].Label {
		labels[l.GetName()] = l.GetValue()
	}
	return mf.Metric[0].GetGauge().GetValue(), labels
}

func TestProbeSuccessAndCachedCalibration(t *testing.T) {
	s := newSim(t, nil)
	h := New(Options{Runner: prober.New(nil, nil), Config: loadConfig(t, `
targets: [{name: vllm-0, url: '`+s.srv.URL+`'}]
probe: {allowed_targets: [127.0.0.1], scenarios: [tiny]}
`+scenarios)})

	params := url.Values{"target": {"vllm-0"}, "scenario": {"tiny"}}
	code, body, mfs := get(t, h, params, "10")
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	if v, l := value(t, mfs, "slaprobe_probe_success"); v != 1 || l["scenario"] != "tiny" || l["model"] != vllmsim.DefaultConfig().ModelName {
		t.Fatalf("slaprobe_probe_success = %v %v\n%s", v, l, body)
	}
	for _, name := range []string{"slaprobe_probe_ttft_seconds", "slaprobe_probe_itl_seconds", "slaprobe_probe_decode_tokens_per_second",
		"slaprobe_probe_e2e_latency_seconds", "slaprobe_probe_duration_seconds", "slaprobe_probe_calibration_seconds"} {
		if v, _ := value(t, mfs, name); !(v > 0) {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	if v, _ := value(t, mfs, "slaprobe_probe_output_tokens"); v != 20 {
		t.Errorf("output tokens = %v, want 20", v)
	}
	if mfs["slaprobe_probe_failure"] != nil {
		t.Errorf("a successful probe reports a failure: %v", mfs["slaprobe_probe_failure"])
	}
	calibrations := s.tokenizes.Load()
	if calibrations == 0 {
		t.Fatal("the first probe did not calibrate through /tokenize")
	}

	// The next request finds the calibration cached.
	_, body, mfs = get(t, h, params, "10")
	if v, _ := value(t, mfs, "slaprobe_probe_success"); v != 1 {
		t.Fatalf("second probe failed:\n%s", body)
	}
	if n := s.tokenizes.Load(); n != calibrations {
		t.Errorf("second probe calibrated again: /tokenize calls %d -> %d", calibrations, n)
	}

	// An address that is not a configured target takes the probe section.
	_, body, mfs = get(t, h, url.Values{"target": {s.hostPort()}, "scenario": {"tiny"}}, "")
	if v, _ := value(t, mfs, "slaprobe_probe_success"); v != 1 {
		t.Fatalf("probe of %s failed:\n%s", s.hostPort(), body)
	}
}

func TestProbeBadRequests(t *testing.T) {
	h := New(Options{Runner: prober.New(nil, nil), Config: loadConfig(t, `
targets: [{name: vllm-0, url: 'http://127.0.0.1:1', scenarios: [tiny]}]
`+scenarios)})
	for _, tc := range []struct {
		params url.Values
		header string
		status int
		want   string
	}{
		{url.Values{"scenario": {"tiny"}}, "", 400, "target parameter is missing"},
		{url.Values{"target": {"vllm-0"}}, "", 400, "scenario parameter is missing; expected one of: tiny"},
		{url.Values{"target": {"vllm-0"}, "scenario": {"slow"}}, "", 403, `scenario="slow" is not available for target "vllm-0"`},
		{url.Values{"target": {"vllm-0"}, "scenario": {"tiny"}}, "soon", 400, `X-Prometheus-Scrape-Timeout-Seconds="soon"`},
		{url.Values{"target": {"vllm-0"}, "scenario": {"tiny"}}, "NaN", 400, `X-Prometheus-Scrape-Timeout-Seconds="NaN"`},
		{url.Values{"target": {"vllm-0"}, "scenario": {"tiny"}}, "1e300", 400, `X-Prometheus-Scrape-Timeout-Seconds="1e300"`},
	} {
		code, body, _ := get(t, h, tc.params, tc.header)
		if code != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%v: %d %q, want %d with %q", tc.params, code, body, tc.status, tc.want)
		}
	}
}

// The scrape timeout, less probe.timeout_offset, bounds the probe.
func TestProbeTimeoutFromHeader(t *testing.T) {
	s := newSim(t, func(c *vllmsim.Config) { c.TimeScale = 1 }) // 2000 tokens: ~12 s
	h := New(Options{Runner: prober.New(nil, nil), Config: loadConfig(t, `
targets: []
probe: {timeout_offset: 250ms, allowed_targets: [127.0.0.1], scenarios: [slow]}
`+scenarios)})
	start := time.Now()
	_, body, mfs := get(t, h, url.Values{"target": {s.srv.URL}, "scenario": {"slow"}}, "1.25")
	took := time.Since(start)
	if v, _ := value(t, mfs, "slaprobe_probe_success"); v != 0 {
		t.Fatalf("a 12 s probe succeeded within 1 s:\n%s", body)
	}
	if _, l := value(t, mfs, "slaprobe_probe_failure"); l["reason"] != string(prober.ReasonTimeout) {
		t.Errorf("failure reason = %q, want timeout\n%s", l["reason"], body)
	}
	if took > 5*time.Second {
		t.Errorf("the request took %s; the header asked for 1.25 s", took)
	}
	if v, _ := value(t, mfs, "slaprobe_probe_duration_seconds"); v < 0.9 || v > 1.5 {
		t.Errorf("probe duration %.2fs, want about 1 s (1.25 s - 250 ms)", v)
	}
}

// ?debug=true shows the probe's log lines and why it failed.
func TestProbeDebug(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	l.Close()
	var daemonLog bytes.Buffer
	h := New(Options{Runner: prober.New(nil, nil), Config: loadConfig(t, "targets: []\nprobe: {allowed_targets: [127.0.0.1], scenarios: [tiny]}\n"+scenarios),
		Logger: newTextLogger(&daemonLog)})
	code, body, _ := get(t, h, url.Values{"target": {down}, "scenario": {"tiny"}, "debug": {"true"}}, "")
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	for _, want := range []string{"Logs for the probe:", "probe starting", "calibration failed", "probe failed",
		"reason=connection_refused", "Metrics that would have been returned:",
		`slaprobe_probe_failure{model="",reason="connection_refused",scenario="tiny"} 1`,
		`slaprobe_probe_success{model="",scenario="tiny"} 0`} {
		if !strings.Contains(body, want) {
			t.Errorf("debug output lacks %q:\n%s", want, body)
		}
	}
	// The daemon's log gets the failure at its own level (info here), not the debug lines.
	if !strings.Contains(daemonLog.String(), "probe failed") || strings.Contains(daemonLog.String(), "probe starting") {
		t.Errorf("daemon log:\n%s", daemonLog.String())
	}
}

// A calibration longer than the scrape timeout goes on, so that the next
// request finds it cached.
func TestProbeCalibrationOutlivesTimeout(t *testing.T) {
	s := newSim(t, nil)
	gate := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/tokenize" {
			<-gate
		}
		s.srv.Config.Handler.ServeHTTP(w, r)
	}))
	defer slow.Close()
	h := New(Options{Runner: prober.New(nil, nil), Config: loadConfig(t, "targets: []\nprobe: {allowed_targets: [127.0.0.1], scenarios: [tiny]}\n"+scenarios)})
	params := url.Values{"target": {slow.URL}, "scenario": {"tiny"}}
	_, body, mfs := get(t, h, params, "0.75")
	if _, l := value(t, mfs, "slaprobe_probe_failure"); l["reason"] != "timeout" {
		t.Fatalf("want a timeout while calibrating:\n%s", body)
	}
	close(gate) // the calibration finishes in the background
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body, mfs = get(t, h, params, "5")
		if v, _ := value(t, mfs, "slaprobe_probe_success"); v == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no successful probe after the calibration finished:\n%s", body)
		}
	}
	if n := s.tokenizes.Load(); n == 0 {
		t.Error("no calibration reached the engine")
	}
}

func newTextLogger(w *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// A warm scenario through /probe: the answer is its last follow-up turn, which
// hit the cache and still reports its TTFT.
func TestProbeWarmScenario(t *testing.T) {
	s := newSim(t, nil)
	h := New(Options{Runner: prober.New(nil, nil), Config: loadConfig(t, `
targets: [{name: vllm-0, url: '`+s.srv.URL+`'}]
scenarios:
  - {name: warm, input_tokens: 2048, output_tokens: 8, interval: 1m, timeout: 20s, conversation: {new_tokens: 256}}
`)})
	code, body, mfs := get(t, h, url.Values{"target": {"vllm-0"}, "scenario": {"warm"}}, "10")
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	if v, _ := value(t, mfs, "slaprobe_probe_success"); v != 1 {
		t.Fatalf("warm probe failed:\n%s", body)
	}
	if v, _ := value(t, mfs, "slaprobe_probe_cache_hit"); v != 1 {
		t.Errorf("slaprobe_probe_cache_hit = %v, want the follow-up's hit", v)
	}
	if v, _ := value(t, mfs, "slaprobe_probe_prompt_tokens"); v < 2048+256-8 {
		t.Errorf("prompt tokens %v, want the follow-up's 2304", v)
	}
	if v, _ := value(t, mfs, "slaprobe_probe_ttft_seconds"); !(v > 0) {
		t.Errorf("slaprobe_probe_ttft_seconds = %v, want the follow-up's TTFT", v)
	}
	if mfs["slaprobe_probe_prefill_tokens_per_second"] != nil {
		t.Errorf("a follow-up reports a prefill speed")
	}
}

package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// The /probe door, against a real `slaprobe run` with `targets: []` and an
// allow-list that names one URL prefix of a simulated engine
// (http://127.0.0.1:PORT/t). A second loopback server stands for every
// host nobody named: it must receive nothing.
//
//	nice go test ./cmd/slaprobe -run 'TestAttackProbe' -v
//
// TestAttackProbeDistinctTargets sends 10,000 /probe calls (or
// SLAPROBE_ATTACK_PROBE_TARGETS) with distinct allowed targets of about
// 2 KiB each, every one calibrated and probed, and reads slaprobe's RSS
// from /proc (about 40 s on a busy 2-core machine):
//
//	nice go test ./cmd/slaprobe -run 'TestAttackProbeDistinctTargets' -v

// probeRSSCeilingMiB is how much slaprobe's RSS may grow over distinct
// /probe targets: the prober keeps at most 512 calibrations, 1,024 base
// URLs' models and 64 templates per calibration, the status page nothing
// of targets it does not probe itself.
const probeRSSCeilingMiB = 50

// probeEngine is a simulated engine behind /t…/: /t<anything>/v1/… is its
// /v1/…, so that every such prefix is a base URL of its own. It counts the
// requests it sees and the most at once.
type probeEngine struct {
	srv               *httptest.Server
	requests, running atomic.Int64
	maxRunning        atomic.Int64
}

func newProbeEngine(t *testing.T, timeScale float64) *probeEngine {
	t.Helper()
	cfg := vllmsim.DefaultConfig()
	cfg.TimeScale = timeScale
	cfg.Seed = 1
	e, err := vllmsim.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	h := e.Handler()
	pe := &probeEngine{}
	pe.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pe.requests.Add(1)
		n := pe.running.Add(1)
		for m := pe.maxRunning.Load(); n > m && !pe.maxRunning.CompareAndSwap(m, n); m = pe.maxRunning.Load() {
		}
		// A request stops counting just before its last bytes are written
		// (a stream's [DONE], or another answer's first write), so that the
		// next one, which slaprobe sends only once it has read them, is
		// never counted with it.
		ew := &endWriter{ResponseWriter: w, stream: strings.HasSuffix(r.URL.Path, "completions"), end: func() { pe.running.Add(-1) }}
		defer ew.finish()
		w = ew
		if rest, ok := strings.CutPrefix(r.URL.Path, "/t"); ok {
			if i := strings.Index(rest, "/v1/"); i >= 0 {
				r.URL.Path = rest[i:]
			} else if i := strings.Index(rest, "/tokenize"); i >= 0 {
				r.URL.Path = rest[i:]
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(pe.srv.Close)
	return pe
}

// endWriter calls end once, before the write that ends the answer: the
// first write, or for a stream the one that carries [DONE].
type endWriter struct {
	http.ResponseWriter
	stream bool
	once   sync.Once
	end    func()
}

func (w *endWriter) finish() { w.once.Do(w.end) }

func (w *endWriter) Write(p []byte) (int, error) {
	if !w.stream || bytes.Contains(p, []byte("[DONE]")) {
		w.finish()
	}
	return w.ResponseWriter.Write(p)
}

func (w *endWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (pe *probeEngine) hostPort() string { return strings.TrimPrefix(pe.srv.URL, "http://") }

// probeDaemon is a running `slaprobe run` for the /probe attacks.
type probeDaemon struct {
	base string
	pid  int
	logs *syncBuffer
}

func startProbeDaemon(t *testing.T, conf string) *probeDaemon {
	t.Helper()
	web := testproc.FreeAddr(t)
	cfgPath := filepath.Join(t.TempDir(), "slaprobe.yml")
	if err := os.WriteFile(cfgPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(t), "run", "--config.file="+cfgPath, "--web.listen-address="+web, "--log.level=error")
	logs, exited := startProcess(t, cmd)
	d := &probeDaemon{base: "http://" + web, pid: cmd.Process.Pid, logs: logs}
	waitFor(t, exited, logs, func() bool { _, err := scrapeAll(d.base + "/metrics"); return err == nil })
	return d
}

var probeClient = &http.Client{Timeout: 60 * time.Second}

// probe calls /probe with target and scenario, as Prometheus would (a
// 10 s scrape timeout), and returns the status, Retry-After and body.
func (d *probeDaemon) probe(target, scenario string) (int, string, string, error) {
	q := url.Values{"target": {target}, "scenario": {scenario}}
	req, _ := http.NewRequest(http.MethodGet, d.base+"/probe?"+q.Encode(), nil)
	req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", "10")
	resp, err := probeClient.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(b), nil
}

// refusals reads slaprobe_probe_requests_refused_total by reason.
func (d *probeDaemon) refusals(t *testing.T) map[string]float64 {
	t.Helper()
	lines, err := scrapeAll(d.base + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v\n%s", err, d.logs.String())
	}
	return labelled(lines, "slaprobe_probe_requests_refused_total", "reason")
}

func probeAttackConfig(engine string, maxConcurrent int) string {
	return fmt.Sprintf(`targets: []
power: {nvml: false}
scenarios:
  - {name: tiny, input_tokens: 64, output_tokens: 4, interval: 1h, timeout: 10s}
probe:
  allowed_targets: ['http://%s/t']
  scenarios: [chatbot, tiny]
  max_concurrent: %d
`, engine, maxConcurrent)
}

// otherHost is a loopback server that stands for a host nobody named.
func otherHost(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte("secret admin page"))
	}))
	t.Cleanup(s.Close)
	return s, &hits
}

// TestAttackProbeRefusals: every way of sending /probe somewhere nobody
// named is refused with its status and reason, counted exactly once, and
// reaches neither the other host nor the engine.
func TestAttackProbeRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("runs slaprobe")
	}
	eng := newProbeEngine(t, 0.01)
	other, otherHits := otherHost(t)
	otherHP := strings.TrimPrefix(other.URL, "http://")
	d := startProbeDaemon(t, probeAttackConfig(eng.hostPort(), 8))
	e := eng.hostPort()

	long := "http://" + e + "/t/" + strings.Repeat("a", 2048)
	cases := []struct {
		name, target, scenario string
		status                 int
		reason                 string
	}{
		// The trick: %23 in the URL becomes '#' in the parameter, and the
		// path before it was the one requested.
		{"fragment to another host (%23)", "http://" + otherHP + "/admin#", "chatbot", 400, "fragment"},
		{"fragment on the engine (%23)", "http://" + e + "/t/admin#", "chatbot", 400, "fragment"},
		{"escaped fragment to another host (%2523)", "http://" + otherHP + "/admin%23", "chatbot", 403, "not_allowed"},
		{"query (%3F)", "http://" + e + "/t/x?y=1", "chatbot", 400, "query"},
		{"another host", otherHP, "chatbot", 403, "not_allowed"},
		{"another host as URL", other.URL + "/t", "chatbot", 403, "not_allowed"},
		{"the engine outside the prefix", "http://" + e + "/admin", "chatbot", 403, "not_allowed"},
		{"the engine, prefix of another segment", "http://" + e + "/tt", "chatbot", 403, "not_allowed"},
		{"the engine as host:port", e, "chatbot", 403, "not_allowed"},
		{"another loopback address", "http://127.0.0.2:" + strings.Split(e, ":")[1] + "/t", "chatbot", 403, "not_allowed"},
		{"userinfo", "http://user:pw@" + e + "/t", "chatbot", 400, "userinfo"},
		{"userinfo to another host", "http://x@" + otherHP, "chatbot", 400, "userinfo"},
		{"scheme ftp", "ftp://" + e + "/t", "chatbot", 400, "scheme"},
		{"scheme file", "file:///etc/passwd", "chatbot", 400, "scheme"},
		{"scheme gopher", "gopher://" + otherHP + "/", "chatbot", 400, "scheme"},
		{"too long", long, "chatbot", 400, "too_long"},
		{"malformed port", "127.0.0.1:99999", "chatbot", 400, "malformed"},
		{"missing target", "", "chatbot", 400, "missing"},
		{"unknown scenario", "http://" + e + "/t", "nope", 400, "unknown_scenario"},
		{"a 96K scenario beyond probe.scenarios", "http://" + e + "/t", "coding_assistant", 403, "scenario_not_allowed"},
	}
	engineBefore := eng.requests.Load()
	before := d.refusals(t)
	want := map[string]float64{}
	for _, c := range cases {
		status, _, body, err := d.probe(c.target, c.scenario)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if status != c.status {
			t.Errorf("%s: %d %.200q; want %d (%s)", c.name, status, body, c.status, c.reason)
		}
		if strings.Contains(body, "secret admin page") {
			t.Errorf("%s: the answer carries the other host's page", c.name)
		}
		want[c.reason]++
	}
	after := d.refusals(t)
	for reason, n := range want {
		if got := after[reason] - before[reason]; got != n {
			t.Errorf("slaprobe_probe_requests_refused_total{reason=%q} grew by %v; want %v", reason, got, n)
		}
	}
	for reason := range after {
		if _, ok := want[reason]; !ok && after[reason] != before[reason] {
			t.Errorf("slaprobe_probe_requests_refused_total{reason=%q} grew by %v; want 0", reason, after[reason]-before[reason])
		}
	}
	if n := otherHits.Load(); n != 0 {
		t.Errorf("the host nobody named received %d requests", n)
	}
	if n := eng.requests.Load() - engineBefore; n != 0 {
		t.Errorf("the engine received %d requests from refused calls", n)
	}
	// The allowed prefix does probe.
	if status, _, body, err := d.probe("http://"+e+"/t/ok", "tiny"); err != nil || status != 200 ||
		!strings.Contains(body, `slaprobe_probe_success{model="`) || !strings.Contains(body, `",scenario="tiny"} 1`) {
		t.Errorf("the allowed prefix: %d %v\n%s\n%s", status, err, body, d.logs.String())
	}
	// Nothing of a refused target is kept: the status page never names one.
	resp, err := probeClient.Get(d.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(page), otherHP) || strings.Contains(string(page), "/t/ok") {
		t.Error("the status page names a target /probe was asked for")
	}
}

// TestAttackProbeParallel: 500 /probe calls at once are held to
// probe.max_concurrent (429 with Retry-After beyond it) and to the
// target's in-flight limit (one request at a time on the engine).
func TestAttackProbeParallel(t *testing.T) {
	if testing.Short() {
		t.Skip("runs slaprobe")
	}
	eng := newProbeEngine(t, 0.05)
	const maxConcurrent = 4
	d := startProbeDaemon(t, probeAttackConfig(eng.hostPort(), maxConcurrent))
	target := "http://" + eng.hostPort() + "/t/parallel"
	// Calibrate first, so that the 500 find it cached, as after a first scrape.
	if status, _, body, err := d.probe(target, "chatbot"); err != nil || status != 200 {
		t.Fatalf("first probe: %d %v %s", status, err, body)
	}
	eng.maxRunning.Store(0)
	before := d.refusals(t)
	const n = 500
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	noRetryAfter := 0
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			status, retry, _, err := d.probe(target, "chatbot")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				statuses[-1]++
				return
			}
			statuses[status]++
			if status == http.StatusTooManyRequests {
				if s, err := strconv.Atoi(retry); err != nil || s < 1 {
					noRetryAfter++
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	after := d.refusals(t)
	refused := after["concurrency"] - before["concurrency"] + after["target_busy"] - before["target_busy"]
	t.Logf("500 parallel /probe calls: %v (status: calls); refused: concurrency %v, target_busy %v; most requests at once on the engine: %d",
		statuses, after["concurrency"]-before["concurrency"], after["target_busy"]-before["target_busy"], eng.maxRunning.Load())
	if statuses[200]+statuses[429] != n {
		t.Errorf("answers %v; want only 200 and 429", statuses)
	}
	if statuses[429] == 0 || float64(statuses[429]) != refused {
		t.Errorf("%d answers 429, %v counted refused; want the cap to refuse some, each counted", statuses[429], refused)
	}
	if statuses[200] == 0 {
		t.Error("no call probed")
	}
	if noRetryAfter > 0 {
		t.Errorf("%d answers 429 without a Retry-After", noRetryAfter)
	}
	// global.max_in_flight_per_target is 1: the engine never saw two of them at once.
	if m := eng.maxRunning.Load(); m > 1 {
		t.Errorf("the engine served %d requests at once; the target's in-flight limit is 1", m)
	}
}

// TestAttackProbeDistinctTargets: /probe calls with distinct allowed
// targets of about 2 KiB grow slaprobe's RSS by at most
// probeRSSCeilingMiB, and the prober's state stops growing.
func TestAttackProbeDistinctTargets(t *testing.T) {
	if testing.Short() {
		t.Skip("runs slaprobe")
	}
	n := 10000
	if v := os.Getenv("SLAPROBE_ATTACK_PROBE_TARGETS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("SLAPROBE_ATTACK_PROBE_TARGETS=%q; expected a positive count", v)
		}
	}
	eng := newProbeEngine(t, 0.001)
	const workers = 4
	d := startProbeDaemon(t, probeAttackConfig(eng.hostPort(), workers))
	prefix := "http://" + eng.hostPort() + "/t"
	pad := strings.Repeat("p", 1900)
	run := func(from, to int) (ok int) {
		var wg sync.WaitGroup
		var okN atomic.Int64
		next := atomic.Int64{}
		next.Store(int64(from))
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1) - 1; i < int64(to); i = next.Add(1) - 1 {
					status, _, body, err := d.probe(fmt.Sprintf("%s/%d-%s/x", prefix, i, pad), "tiny")
					if err == nil && status == 200 && strings.Contains(body, `",scenario="tiny"} 1`) {
						okN.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		return int(okN.Load())
	}
	rss := func() float64 { return procStatusMiB(t, d.pid, "VmRSS") }
	// Warm up: the code paths' own allocations are not what is measured.
	run(-100, 0)
	time.Sleep(2 * time.Second)
	base := rss()
	peak := base
	start := time.Now()
	ok := 0
	for from := 0; from < n; from += 100 {
		ok += run(from, min(from+100, n))
		peak = max(peak, rss())
	}
	took := time.Since(start)
	// After the calls: what the bounded state holds, the rest collected
	// (the state itself goes after an hour unused); poll for up to 60 s.
	var settled float64
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(2 * time.Second) {
		settled = rss()
		if settled-base <= probeRSSCeilingMiB/2 || time.Now().After(deadline) {
			break
		}
	}
	hwm := procStatusMiB(t, d.pid, "VmHWM")
	t.Logf("%d /probe calls with distinct ~2 KiB targets in %s (%d probed successfully): RSS %.1f MiB before, peak %.1f MiB (+%.1f), %.1f MiB after (+%.1f); VmHWM %.1f MiB",
		n, took.Round(time.Second), ok, base, peak, peak-base, settled, settled-base, hwm)
	if ok < n*9/10 {
		t.Errorf("only %d of %d probes succeeded\n%s", ok, n, d.logs.String())
	}
	if peak-base > probeRSSCeilingMiB {
		t.Errorf("RSS grew by %.1f MiB over %d distinct targets; the ceiling is %d MiB", peak-base, n, probeRSSCeilingMiB)
	}
	if settled-base > probeRSSCeilingMiB/2 {
		t.Errorf("RSS stayed %.1f MiB above its start 60 s after the calls; want at most %d", settled-base, probeRSSCeilingMiB/2)
	}
}

package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/test/hostile"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// hostileCeilingMiB is the most slaprobe's peak RSS (VmHWM) may reach while
// it probes and scrapes every target of the hostile server at once: each
// answer is bounded (a conversation keeps at most global.max_answer_bytes,
// 1 MiB; a line at most max_line_bytes, 1 MiB; response headers 10 MiB, Go's
// transport limit; an engine page 4 MiB, of which only the families slaprobe
// reads are parsed).
const hostileCeilingMiB = 300

// hostileRun is a `slaprobe run` probing targets of one hostile server.
type hostileRun struct {
	srv        *hostile.Server
	base       string // the hostile server's URL
	webAddr    string
	logs       *syncBuffer
	exited     <-chan error
	pid        int
	metricsURL string
}

// startHostile starts the hostile server (redirecting to elsewhere) and
// slaprobe with targets (YAML list items, %[1]s standing for the hostile
// server's URL as {URL}).
func startHostile(t *testing.T, elsewhere string, targets string) *hostileRun {
	t.Helper()
	srv := &hostile.Server{Elsewhere: elsewhere}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	webAddr := testproc.FreeAddr(t)
	conf := `global:
  scenarios: [hostile_chat]
  stall_timeout: 5s
power: {nvml: false}
engine:
  enabled: true
  scrape_interval: 2s
  scrape_timeout: 2s
scenarios:
  - {name: hostile_chat, input_tokens: 32, output_tokens: 64, interval: 3s, timeout: 5s}
  - {name: hostile_conv, input_tokens: 32, output_tokens: 400, interval: 3s, timeout: 20s,
     conversation: {turns: 2, new_tokens: 16}}
targets:
` + strings.ReplaceAll(targets, "{URL}", hs.URL)
	cfgPath := filepath.Join(t.TempDir(), "hostile.yml")
	if err := os.WriteFile(cfgPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(t), "run", "--config.file="+cfgPath, "--web.listen-address="+webAddr, "--log.level=warn")
	logs, exited := startProcess(t, cmd)
	r := &hostileRun{srv: srv, base: hs.URL, webAddr: webAddr, logs: logs, exited: exited, pid: cmd.Process.Pid,
		metricsURL: "http://" + webAddr + "/metrics"}
	waitFor(t, exited, logs, func() bool { _, err := scrapeValues(r.metricsURL); return err == nil })
	return r
}

// watch samples slaprobe's RSS until d has passed, and returns the sampled
// peak and VmHWM in MiB; it stops early past guard MiB.
func (r *hostileRun) watch(t *testing.T, d time.Duration, guard float64) (peak, hwm float64) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); {
		select {
		case err := <-r.exited:
			t.Fatalf("slaprobe exited: %v\n%s", err, r.logs.String())
		case <-time.After(200 * time.Millisecond):
		}
		rss := procStatusMiB(t, r.pid, "VmRSS")
		peak = max(peak, rss)
		if rss > guard {
			t.Logf("stopped early: RSS %.0f MiB passed the guard of %.0f MiB", rss, guard)
			break
		}
	}
	return peak, procStatusMiB(t, r.pid, "VmHWM")
}

// byTarget sums metric's samples by target, then by label.
func hostileByTarget(lines []string, metric, label string) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for _, l := range lines {
		if !strings.HasPrefix(l, metric+"{") {
			continue
		}
		target, lv := hostileLabel(l, "target"), hostileLabel(l, label)
		if out[target] == nil {
			out[target] = map[string]float64{}
		}
		_, v := soakValue(l)
		out[target][lv] += v
	}
	return out
}

func hostileLabel(line, label string) string {
	i := strings.Index(line, label+`="`)
	if i < 0 {
		return ""
	}
	rest := line[i+len(label)+2:]
	return rest[:strings.IndexByte(rest, '"')]
}

// TestAttackHostile points `slaprobe run` at the worst engine (test/hostile):
// multi-MB content chunks in a conversation, a 4 MiB line, a line that never
// ends, headers that never end, a drip of one byte a second, a gzip bomb as
// the stream, and /metrics pages of a gibibyte, a never-ending line and a
// gzip bomb, all at once. Its peak RSS stays under hostileCeilingMiB and
// each probe fails with its own reason.
func TestAttackHostile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs slaprobe against a hostile server for 25 s")
	}
	t.Parallel() // mostly waits on its own slaprobe: beside the package's other waiting tests
	r := startHostile(t, "http://127.0.0.1:1", `  - {name: bigchunks, url: "{URL}/bigchunks", scenarios: [hostile_conv]}
  - {name: hugeline, url: "{URL}/hugeline"}
  - {name: noline, url: "{URL}/noline"}
  - {name: headers, url: "{URL}/headers"}
  - {name: drip, url: "{URL}/drip"}
  - {name: gzip, url: "{URL}/gzip"}
  - {name: ok, url: "{URL}/ok"}
`)
	before := procStatusMiB(t, r.pid, "VmRSS")
	peak, hwm := r.watch(t, 25*time.Second, 4*hostileCeilingMiB)
	lines, err := scrapeAll(r.metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	errs := hostileByTarget(lines, "slaprobe_probe_errors_total", "reason")
	results := hostileByTarget(lines, "slaprobe_probes_total", "result")
	scrapeErrs := hostileByTarget(lines, "slaprobe_engine_scrape_errors_total", "target")
	t.Logf("RSS: %.1f MiB when ready, %.1f MiB sampled peak, VmHWM %.1f MiB (ceiling %d MiB)", before, peak, hwm, hostileCeilingMiB)
	t.Logf("hostile server hits: %v", r.srv.Hits())

	if hwm > hostileCeilingMiB {
		t.Errorf("VmHWM %.0f MiB is over the ceiling of %d MiB", hwm, hostileCeilingMiB)
	}
	for _, tc := range []struct {
		target string
		want   string   // the reason its probes fail with
		also   []string // reasons a loaded machine may give instead of want on some probes
		scrape bool     // its /metrics is hostile: scrapes fail
	}{
		{target: "bigchunks", want: "answer_too_large", scrape: true},
		{target: "hugeline", want: "oversized_line", scrape: true},
		{target: "noline", want: "oversized_line", scrape: true},
		{target: "headers", want: "connection_error", also: []string{"timeout"}},
		{target: "drip", want: "timeout"},
		{target: "gzip", want: "malformed_chunk", scrape: true},
	} {
		got := hostileNonZero(errs[tc.target])
		t.Logf("%s: probes %v, errors %v, engine scrape errors %v", tc.target, hostileNonZero(results[tc.target]), got, scrapeErrs[tc.target][tc.target])
		if got[tc.want] == 0 {
			t.Errorf("%s: no probe failed with reason %s; errors by reason: %v", tc.target, tc.want, got)
		}
		for reason := range got {
			if reason != tc.want && !hostileContains(tc.also, reason) {
				t.Errorf("%s: probes failed with reason %s; expected %s only", tc.target, reason, tc.want)
			}
		}
		if tc.scrape && scrapeErrs[tc.target][tc.target] == 0 {
			t.Errorf("%s: no engine scrape failed on its hostile /metrics", tc.target)
		}
	}
	// The control: the same server's valid stream, so the failures above are
	// the hostile answers', not the set-up's.
	if results["ok"]["success"] == 0 || len(hostileNonZero(errs["ok"])) > 0 {
		t.Errorf("control target ok: probes %v, errors %v; want successes only", hostileNonZero(results["ok"]), hostileNonZero(errs["ok"]))
	}
	if t.Failed() {
		t.Logf("slaprobe's log:\n%s", r.logs.String())
	}
}

// TestAttackRedirect: a target answering 307 to a second loopback server,
// on /v1/models, /tokenize, /props, the probe's own request (and through
// /probe) and the engine's /metrics, with every kind of credential
// configured (authorization, basic auth with follow_redirects: true,
// http_client_config http_headers, target headers). The second server
// must receive no request at all, so no credential; each probe fails with
// reason redirect.
func TestAttackRedirect(t *testing.T) {
	if testing.Short() {
		t.Skip("runs slaprobe against redirecting targets for 12 s")
	}
	t.Parallel() // mostly waits on its own slaprobe: beside the package's other waiting tests
	secrets := []string{"bearer-s3cr3t-41", "basic-pa55-41", "api-key-s3cr3t-41", "custom-s3cr3t-41", "prom-header-s3cr3t-41"}
	var mu sync.Mutex
	var got []string // what reached the second server
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		_ = r.Header.Write(&b)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+"\n"+b.String())
		mu.Unlock()
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(elsewhere.Close)

	var targets strings.Builder
	whats := []string{"models", "tokenize", "props", "chat", "metrics"}
	for _, what := range whats {
		targets.WriteString(strings.NewReplacer("WHAT", what, "BEARER", secrets[0], "BASIC", secrets[1], "APIKEY", secrets[2],
			"CUSTOM", secrets[3], "PROMHDR", secrets[4]).Replace(`  - name: r-WHAT-bearer
    url: "{URL}/redirect-WHAT"
    headers: {X-Api-Key: APIKEY, X-Custom-Token: CUSTOM}
    http_client_config: {authorization: {credentials: BEARER}}
  - name: r-WHAT-basic
    url: "{URL}/redirect-WHAT"
    http_client_config:
      follow_redirects: true
      basic_auth: {username: probe, password: BASIC}
      http_headers: {X-Prom-Secret: {secrets: [PROMHDR]}}
`))
	}
	r := startHostile(t, elsewhere.URL, targets.String())
	// /probe on a configured target uses the same client.
	if resp, err := http.Get("http://" + r.webAddr + "/probe?target=r-chat-bearer&scenario=hostile_chat"); err == nil {
		t.Logf("/probe?target=r-chat-bearer: %s", resp.Status)
		resp.Body.Close()
	} else {
		t.Logf("/probe?target=r-chat-bearer: %v", err)
	}
	r.watch(t, 12*time.Second, 1<<20)
	lines, err := scrapeAll(r.metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	errs := hostileByTarget(lines, "slaprobe_probe_errors_total", "reason")
	scrapeErrs := hostileByTarget(lines, "slaprobe_engine_scrape_errors_total", "target")
	hits := r.srv.Hits()
	t.Logf("hostile server hits: %v", hits)

	// Every path was asked, and redirected.
	for what, path := range map[string]string{"models": "/v1/models", "tokenize": "/tokenize", "props": "/props",
		"chat": "/v1/chat/completions", "metrics": "/metrics"} {
		if hits["redirect-"+what+" "+path] == 0 {
			t.Errorf("redirect-%s: %s was never asked: the test did not exercise it", what, path)
		}
	}
	// The probe fails with reason redirect where the redirect stops it (a
	// /props redirect only loses the context size; a /metrics one fails the scrape).
	for _, what := range []string{"models", "tokenize", "chat"} {
		for _, cred := range []string{"bearer", "basic"} {
			name := "r-" + what + "-" + cred
			if e := hostileNonZero(errs[name]); e["redirect"] == 0 || len(e) != 1 {
				t.Errorf("%s: probe errors %v; want reason redirect only", name, e)
			}
		}
	}
	for _, cred := range []string{"bearer", "basic"} {
		if name := "r-metrics-" + cred; scrapeErrs[name][name] == 0 {
			t.Errorf("%s: no engine scrape failed", name)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	withSecret := 0
	for _, req := range got {
		carries := strings.Contains(req, "\nAuthorization:") || strings.Contains(req, "\nX-Api-Key:")
		for _, s := range secrets {
			carries = carries || strings.Contains(req, s)
		}
		if carries {
			withSecret++
		}
	}
	t.Logf("the second server received %d requests, %d carrying a credential", len(got), withSecret)
	if len(got) > 0 {
		t.Errorf("the second server received %d requests (%d carrying a credential); want none. First:\n%s", len(got), withSecret, got[0])
	}
	if t.Failed() {
		t.Logf("slaprobe's log:\n%s", r.logs.String())
	}
}

// nonZero drops the zero entries of m.
func hostileNonZero(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if m[k] != 0 {
			out[k] = m[k]
		}
	}
	return out
}

func hostileContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

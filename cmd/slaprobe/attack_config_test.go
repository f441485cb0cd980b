package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// The attack tests of the config's doors: secrets in clear (issue 41 point
// 6), numbers that are not numbers (point 9) and reloads that do not say
// what they did (point 10), each against a running `slaprobe run`.

// headerRecorder notes every header value that reaches a server, so that a
// test can tell the planted secrets were really in use.
type headerRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (h *headerRecorder) record(r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, vs := range r.Header {
		h.seen = append(h.seen, vs...)
	}
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/token") {
		if err := r.ParseForm(); err == nil {
			for _, vs := range r.PostForm {
				h.seen = append(h.seen, vs...)
			}
		}
	}
}

func (h *headerRecorder) saw(secret string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, v := range h.seen {
		if strings.Contains(v, secret) {
			return true
		}
	}
	return false
}

// attackGet is a GET with a timeout that fails the test on a transport error.
func attackGet(t *testing.T, rawURL string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func attackPost(t *testing.T, rawURL string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Post(rawURL, "", nil)
	if err != nil {
		t.Fatalf("POST %s: %v", rawURL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitBody polls url until ok(body) or the deadline, and returns the body.
func waitBody(t *testing.T, rawURL string, within time.Duration, exited <-chan error, logs fmt.Stringer, ok func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(within)
	var body string
	for {
		req, _ := http.NewRequest(http.MethodGet, rawURL, nil)
		if resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			if resp.StatusCode == 200 && ok(body) {
				return body
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("slaprobe exited: %v\n%s", err, logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: condition not met within %s; last body:\n%.3000s\nlogs:\n%s", rawURL, within, body, logs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestAttackSecrets plants a distinct secret in every config field that can
// hold one, runs slaprobe with probes that succeed and probes that fail,
// and greps every output surface for each secret: /config, check-config's
// stdout and stderr, the debug log of `slaprobe run`, /metrics, the status
// page, /probes of every target (with the failing probes' error text) and
// /probe?debug=true. Fields that cannot be printed safely (a URL's
// user:password@) must be refused at load, without echoing the secret.
func TestAttackSecrets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs slaprobe")
	}
	sec := func(field string) string { return "sEcReT-" + field + "-4f1d93ab" }
	secrets := map[string]string{}
	plant := func(field string) string { secrets[field] = sec(field); return secrets[field] }

	// A simulated engine that answers, and a server that fails everything
	// (it is also the proxy and the OAuth2 token endpoint of two targets).
	var simSeen, failSeen headerRecorder
	eng, err := vllmsim.New(vllmsim.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)
	simH := eng.Handler()
	sim := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		simSeen.record(r)
		simH.ServeHTTP(w, r)
	}))
	t.Cleanup(sim.Close)
	fail := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		failSeen.record(r)
		http.Error(w, `{"error":{"message":"upstream exploded"}}`, http.StatusInternalServerError)
	}))
	t.Cleanup(fail.Close)
	// A gateway that echoes the credentials it got into its error, as
	// some do ("invalid key sk-…"): slaprobe shows that error.
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, fmt.Sprintf(`{"error":{"message":"invalid credentials: %s / %s"}}`,
			r.Header.Get("Authorization"), r.Header.Get("X-Api-Key")), http.StatusUnauthorized)
	}))
	t.Cleanup(echo.Close)
	failURL, _ := url.Parse(fail.URL)
	simURL, _ := url.Parse(sim.URL)

	dir := t.TempDir()
	sdFile := filepath.Join(dir, "targets.yml")
	if err := os.WriteFile(sdFile, []byte(fmt.Sprintf("- targets: [%q]\n  labels: {target: sdsim}\n", simURL.Host)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global: {scenarios: [chatbot]}
scenarios: [{name: chatbot, interval: 1s}]
engine: {enabled: true}
power: {nvml: false}
targets:
  - name: sim
    url: %[1]s
    headers: {X-Api-Key: %[3]s, X-Tenant: %[4]s}
    http_client_config:
      authorization: {credentials: %[5]s}
      http_headers:
        X-Extra: {values: [%[6]s], secrets: [%[7]s]}
  - name: failing
    url: %[2]s
    http_client_config:
      basic_auth: {username: probe, password: %[8]s}
  - name: proxied
    url: http://127.0.0.2:9
    http_client_config:
      proxy_url: http://proxyuser:%[9]s@%[10]s
      proxy_connect_header: {X-Proxy-Key: [%[11]s]}
  - name: echo
    url: %[19]s
    headers: {X-Api-Key: %[20]s}
    http_client_config:
      authorization: {credentials: %[21]s}
  - name: oauth
    url: %[2]s
    http_client_config:
      oauth2:
        client_id: slaprobe
        client_secret: %[12]s
        token_url: %[2]s/token
        endpoint_params: {audience: %[13]s}
probe:
  headers: {X-Probe-Key: %[14]s}
  http_client_config:
    authorization: {credentials: %[15]s}
file_sd_configs:
  - files: [%[16]s]
    headers: {X-SD-Key: %[17]s}
    http_client_config:
      authorization: {credentials: %[18]s}
`, sim.URL, fail.URL,
		plant("targets.headers.secret_name"), plant("targets.headers.plain_name"),
		plant("authorization.credentials"), plant("http_headers.values"), plant("http_headers.secrets"),
		plant("basic_auth.password"),
		plant("proxy_url.password"), failURL.Host, plant("proxy_connect_header"),
		plant("oauth2.client_secret"), plant("oauth2.endpoint_params"),
		plant("probe.headers"), plant("probe.authorization"),
		sdFile, plant("file_sd_configs.headers"), plant("file_sd_configs.authorization"),
		echo.URL, plant("echoed.headers"), plant("echoed.authorization"))
	cfgPath := filepath.Join(dir, "slaprobe.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	bin := binary(t)
	outputs := map[string]string{}

	// check-config prints the effective config and a summary.
	cc := exec.Command(bin, "check-config", "--config.file="+cfgPath, "--log.level=debug")
	ccOut, err := cc.CombinedOutput()
	if err != nil {
		t.Fatalf("check-config: %v\n%s", err, ccOut)
	}
	outputs["check-config"] = string(ccOut)

	addr := testproc.FreeAddr(t)
	base := "http://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--config.file="+cfgPath, "--web.listen-address="+addr, "--log.level=debug")
	logs, exited := startProcess(t, cmd)

	// Probes ran: successes on the simulated engine (directly and through
	// file_sd), failures on the three failing targets.
	waitBody(t, base+"/metrics", 90*time.Second, exited, logs, func(b string) bool {
		for _, re := range []string{
			`slaprobe_probes_total\{[^}]*result="success"[^}]*target="sim"[^}]*\} [1-9]`,
			`slaprobe_probes_total\{[^}]*result="success"[^}]*target="sdsim"[^}]*\} [1-9]`,
			`slaprobe_probes_total\{[^}]*result="[a-z_]*error[a-z_]*"[^}]*target="failing"[^}]*\} [1-9]`,
			`slaprobe_probes_total\{[^}]*result="[a-z_]*error[a-z_]*"[^}]*target="proxied"[^}]*\} [1-9]`,
			`slaprobe_probes_total\{[^}]*result="[a-z_]*error[a-z_]*"[^}]*target="oauth"[^}]*\} [1-9]`,
			`slaprobe_probes_total\{[^}]*result="[a-z_]*error[a-z_]*"[^}]*target="echo"[^}]*\} [1-9]`,
		} {
			if !regexp.MustCompile(re).MatchString(b) {
				return false
			}
		}
		return true
	})

	// Every surface an operator, a scraper or a caller can see.
	for _, p := range []string{"/metrics", "/config", "/",
		"/probes?target=sim", "/probes?target=sdsim", "/probes?target=failing", "/probes?target=proxied", "/probes?target=oauth", "/probes?target=echo",
		"/probe?target=sim&scenario=chatbot&debug=true",
		"/probe?target=failing&scenario=chatbot&debug=true",
		"/probe?target=echo&scenario=chatbot&debug=true",
		// An address that is no configured target takes probe.headers and
		// probe.http_client_config (or is refused).
		"/probe?target=" + url.QueryEscape(failURL.Host) + "&scenario=chatbot&debug=true",
	} {
		_, outputs[p] = attackGet(t, base+p, nil)
	}
	// A caller's URL with user:password@ in /probe: refused or probed, the
	// log must not keep it.
	attackGet(t, base+"/probe?scenario=chatbot&target="+url.QueryEscape("http://caller:"+plant("probe.target.userinfo")+"@"+failURL.Host), nil)
	if !strings.Contains(outputs["/probes?target=failing"], "500") {
		t.Errorf("/probes?target=failing shows no failing probe's error; the test would prove nothing:\n%.2000s", outputs["/probes?target=failing"])
	}
	// The echoed error is shown, with the credentials hidden.
	if !strings.Contains(outputs["/probes?target=echo"], "invalid credentials: Bearer &lt;secret&gt; / &lt;secret&gt;") {
		t.Errorf("/probes?target=echo does not show the echoed error with its credentials hidden:\n%.3000s", outputs["/probes?target=echo"])
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("no exit within 30 s of SIGTERM")
	}
	outputs["run log"] = logs.String()
	if !strings.Contains(outputs["run log"], "level=DEBUG") {
		t.Fatalf("the log has no debug lines; the test would prove nothing:\n%s", outputs["run log"])
	}

	// The secrets were in use: they reached the servers.
	for _, f := range []string{"targets.headers.secret_name", "targets.headers.plain_name", "authorization.credentials",
		"http_headers.values", "http_headers.secrets", "file_sd_configs.headers", "file_sd_configs.authorization"} {
		if !simSeen.saw(secrets[f]) {
			t.Errorf("the simulated engine never received the %s secret; the config did not plant it", f)
		}
	}
	for _, f := range []string{"oauth2.client_secret", "oauth2.endpoint_params"} {
		if !failSeen.saw(secrets[f]) {
			t.Errorf("the failing server never received the %s secret; the config did not plant it", f)
		}
	}
	// Names stay visible; every value is hidden.
	for _, want := range []string{"X-Tenant: <secret>", "X-Probe-Key: <secret>", "X-SD-Key: <secret>", "client_secret: <secret>", "audience: <secret>"} {
		if !strings.Contains(outputs["/config"], want) {
			t.Errorf("/config lacks %q", want)
		}
	}

	var leaks []string
	for surface, out := range outputs {
		for field, s := range secrets {
			if strings.Contains(out, s) {
				leaks = append(leaks, fmt.Sprintf("%s shows the %s secret", surface, field))
			}
		}
	}
	sort.Strings(leaks)
	for _, l := range leaks {
		t.Error(l)
	}
	t.Logf("%d secrets planted, %d surfaces checked, %d leaks", len(secrets), len(outputs), len(leaks))
}

// TestAttackSecretsRefusedAtLoad: a URL with user:password@ would be printed
// by /config and logged with every failure, so each place that takes one
// refuses it at load, and the error does not echo the secret, also when
// the URL does not parse.
func TestAttackSecretsRefusedAtLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs slaprobe")
	}
	bin := binary(t)
	dir := t.TempDir()
	sdFile := filepath.Join(dir, "targets.yml")
	const secret = "sEcReT-userinfo-77ac01"
	if err := os.WriteFile(sdFile, []byte("- targets: [\"probe:"+secret+"@127.0.0.1:1\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, yaml string
		flags      []string
		want       string
	}{
		{"targets[].url", `targets: [{url: "http://probe:` + secret + `@127.0.0.1:1"}]`, nil, "carries credentials"},
		{"targets[].url, a token as user", `targets: [{url: "http://` + secret + `@127.0.0.1:1"}]`, nil, "carries credentials"},
		{"targets[].url that does not parse", `targets: [{url: "http://probe:` + secret + `@[::1"}]`, nil, "expected an absolute"},
		{"targets[].metrics_url", `targets: [{url: "http://127.0.0.1:1", metrics_url: "http://probe:` + secret + `@127.0.0.1:1/metrics"}]`, nil, "carries credentials"},
		{"tracing.export_endpoint", `targets: [{url: "http://127.0.0.1:1"}]
tracing: {export_endpoint: "http://probe:` + secret + `@127.0.0.1:4317"}`, nil, "carries credentials"},
		{"file_sd entry", `file_sd_configs: [{files: [` + sdFile + `]}]`, nil, "carries credentials"},
		{"--target.url", "", []string{"--target.url=http://probe:" + secret + "@127.0.0.1:1"}, "carries credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"check-config"}
			if tc.yaml != "" {
				p := filepath.Join(t.TempDir(), "slaprobe.yml")
				if err := os.WriteFile(p, []byte(tc.yaml+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config.file="+p)
			}
			out, err := exec.Command(bin, append(args, tc.flags...)...).CombinedOutput()
			if err == nil {
				t.Fatalf("check-config accepted it:\n%s", out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("error lacks %q:\n%s", tc.want, out)
			}
			if strings.Contains(string(out), secret) {
				t.Errorf("the error echoes the secret:\n%s", out)
			}
		})
	}
}

// TestAttackConfigNumbers feeds check-config, a reload and /probe numbers
// that are not numbers or are out of any real range: each is refused with
// an error naming the field, and the running config keeps probing.
func TestAttackConfigNumbers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs slaprobe")
	}
	bin := binary(t)
	const tgt = "targets: [{url: \"http://127.0.0.1:1\"}]\n"
	cases := []struct{ yaml, want string }{
		{"global: {jitter: .nan}", "global.jitter: NaN is not a number"},
		{"global: {jitter: .inf}", "global.jitter"},
		{"global: {max_line_bytes: 1073741824}", "global.max_line_bytes=1073741824; expected from 4096 to 67108864"},
		{"sweep: {pause: {max_waiting: .nan}}", "sweep.pause.max_waiting: NaN"},
		{"sweep: {pause: {max_kv_cache_usage: .nan}}", "sweep.pause.max_kv_cache_usage: NaN"},
		{"sweep: {early_stop: {factor: .inf}}", "sweep.early_stop.factor"},
		{"sweep: {early_stop: {min_success_ratio: .nan}}", "sweep.early_stop.min_success_ratio: NaN"},
		{"sweep: {drain: {max_running: .nan}}", "sweep.drain.max_running: NaN"},
		{"sweep: {capacity: {min_success_ratio: .nan}}", "sweep.capacity.min_success_ratio: NaN"},
		{"sweep: {capacity: {conversation_hit_share: .nan}}", "sweep.capacity.conversation_hit_share"},
		{"power: {price_per_kwh: .nan}", "power.price_per_kwh: NaN"},
		{"power: {price_per_kwh: .inf}", "power.price_per_kwh"},
		{"tracing: {sweep_export_ratio: .nan}", "tracing.sweep_export_ratio"},
		{"scenarios: [{name: chatbot, thresholds: {min_decode_tokens_per_second: .nan}}]", "scenarios[0].thresholds.min_decode_tokens_per_second: NaN"},
		{"scenarios: [{name: huge, input_tokens: 2000000000, output_tokens: 16}]", "input_tokens=2000000000; expected at most 10000000"},
		{"scenarios: [{name: huge, input_tokens: 16, output_tokens: 2000000000}]", "output_tokens=2000000000; expected at most 1000000"},
		{"scenarios: [{name: huge, input_tokens: 16, output_tokens: 16, conversation: {new_tokens: 2000000000}}]", "conversation.new_tokens=2000000000; expected at most 10000000"},
	}
	dir := t.TempDir()
	for i, tc := range cases {
		p := filepath.Join(dir, fmt.Sprintf("c%d.yml", i))
		if err := os.WriteFile(p, []byte(tc.yaml+"\n"+tgt), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "check-config", "--config.file="+p).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("check-config with %s: err=%v; want an error with %q:\n%s", tc.yaml, err, tc.want, out)
		}
	}

	// A running slaprobe: a reload to NaN is refused and the probes go on;
	// /probe refuses a scrape timeout that is not a finite number.
	eng, err := vllmsim.New(vllmsim.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)
	sim := httptest.NewServer(eng.Handler())
	t.Cleanup(sim.Close)
	good := "global: {scenarios: [chatbot]}\nscenarios: [{name: chatbot, interval: 1s}]\npower: {nvml: false}\ntargets: [{name: sim, url: " + sim.URL + "}]\n"
	cfgPath := filepath.Join(dir, "slaprobe.yml")
	if err := os.WriteFile(cfgPath, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testproc.FreeAddr(t)
	base := "http://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--config.file="+cfgPath, "--web.listen-address="+addr)
	logs, exited := startProcess(t, cmd)
	successes := regexp.MustCompile(`slaprobe_probes_total\{[^}]*result="success"[^}]*target="sim"[^}]*\} (\d+)`)
	waitBody(t, base+"/metrics", 60*time.Second, exited, logs, successes.MatchString)

	if err := os.WriteFile(cfgPath, []byte(strings.Replace(good, "global: {", "global: {jitter: .nan, ", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, body := attackPost(t, base+"/-/reload"); code != http.StatusInternalServerError || !strings.Contains(body, "global.jitter: NaN is not a number") {
		t.Errorf("reload to jitter NaN: %d %q; want 500 naming global.jitter", code, body)
	}
	if _, cfg := attackGet(t, base+"/config", nil); !strings.Contains(cfg, "jitter: 0.2") {
		t.Errorf("the running config changed after a refused reload:\n%.600s", cfg)
	}
	for _, v := range []string{"NaN", "+Inf", "-Inf", "1e300", "0", "-5", "ten"} {
		code, body := attackGet(t, base+"/probe?target=sim&scenario=chatbot", http.Header{"X-Prometheus-Scrape-Timeout-Seconds": {v}})
		if code != http.StatusBadRequest || !strings.Contains(body, "X-Prometheus-Scrape-Timeout-Seconds") {
			t.Errorf("/probe with scrape timeout %q: %d %.300q; want 400 naming the header", v, code, body)
		}
	}
	if code, body := attackGet(t, base+"/probe?target=sim&scenario=chatbot", http.Header{"X-Prometheus-Scrape-Timeout-Seconds": {"10"}}); code != 200 {
		t.Errorf("/probe with a 10 s scrape timeout: %d %.300q", code, body)
	}
	// The probes still run on the old config.
	n := func(b string) int {
		var v int
		if m := successes.FindStringSubmatch(b); m != nil {
			fmt.Sscan(m[1], &v)
		}
		return v
	}
	_, now := attackGet(t, base+"/metrics", nil)
	before := n(now)
	waitBody(t, base+"/metrics", 30*time.Second, exited, logs, func(b string) bool { return n(b) > before })
}

// TestAttackReload changes start-only settings (a receiver and its web
// config) and reloads: the reload must say the change awaits a restart (a
// warning naming the setting, slaprobe_config_restart_required 1, a line on
// /config), and stop saying so once the file is back. /-/ready stays true
// while the probes run.
func TestAttackReload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs slaprobe")
	}
	bin := binary(t)
	eng, err := vllmsim.New(vllmsim.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)
	sim := httptest.NewServer(eng.Handler())
	t.Cleanup(sim.Close)
	dir := t.TempDir()
	webCfg := filepath.Join(dir, "receiver-web.yml")
	hash, err := bcrypt.GenerateFromPassword([]byte("spans-password"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(webCfg, []byte("basic_auth_users:\n  spans: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := "global: {scenarios: [chatbot]}\nscenarios: [{name: chatbot, interval: 1s}]\npower: {nvml: false}\ntargets: [{name: sim, url: " + sim.URL + "}]\n"
	cfgPath := filepath.Join(dir, "slaprobe.yml")
	if err := os.WriteFile(cfgPath, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testproc.FreeAddr(t)
	base := "http://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--config.file="+cfgPath, "--web.listen-address="+addr)
	logs, exited := startProcess(t, cmd)
	waitBody(t, base+"/metrics", 60*time.Second, exited, logs, func(b string) bool {
		return strings.Contains(b, "\nslaprobe_config_restart_required 0\n")
	})

	recv := testproc.FreeAddr(t)
	changed := good + "tracing: {otlp_http_listen_address: \"" + recv + "\", receiver_web_config_file: " + webCfg + "}\nengine: {scrape_interval: 20s}\n"
	if err := os.WriteFile(cfgPath, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, body := attackPost(t, base+"/-/reload"); code != 200 {
		t.Fatalf("reload: %d %q", code, body)
	}
	waitBody(t, base+"/metrics", 10*time.Second, exited, logs, func(b string) bool {
		return strings.Contains(b, "\nslaprobe_config_restart_required 1\n")
	})
	_, cfg := attackGet(t, base+"/config", nil)
	first, _, _ := strings.Cut(cfg, "\n")
	head := cfg[:strings.Index(cfg, "\nglobal:")]
	if !strings.HasPrefix(first, "# RESTART REQUIRED") {
		t.Errorf("/config does not say a restart is required:\n%.800s", cfg)
	}
	for _, s := range []string{"tracing.otlp_http_listen_address", "tracing.receiver_web_config_file", "engine.scrape_interval"} {
		if !strings.Contains(head, s) {
			t.Errorf("/config's restart line does not name %s:\n%s", s, head)
		}
		if !regexp.MustCompile(`level=WARN .*setting=` + regexp.QuoteMeta(s)).MatchString(logs.String()) {
			t.Errorf("no warning names %s:\n%s", s, logs)
		}
	}
	if code, _ := attackGet(t, base+"/-/ready", nil); code != 200 {
		t.Errorf("/-/ready = %d after a reload whose probes run; want 200", code)
	}

	// Back to the file the process started with: nothing awaits a restart.
	if err := os.WriteFile(cfgPath, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, body := attackPost(t, base+"/-/reload"); code != 200 {
		t.Fatalf("reload: %d %q", code, body)
	}
	waitBody(t, base+"/metrics", 10*time.Second, exited, logs, func(b string) bool {
		return strings.Contains(b, "\nslaprobe_config_restart_required 0\n")
	})
	if _, cfg := attackGet(t, base+"/config", nil); strings.Contains(cfg, "RESTART REQUIRED") {
		t.Errorf("/config still asks for a restart:\n%.800s", cfg)
	}
}

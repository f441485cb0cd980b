package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/slaprobe/slaprobe/internal/daemon"
	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/internal/webguard"
	"github.com/slaprobe/slaprobe/test/testproc"
)

const (
	attackUser = "prometheus"
	lateUser   = "prometheus-restarted"
	attackPass = "listener-attack-PASSWORD-9e1f"
)

// listenerUnderAttack is a running `slaprobe run` against the simulated
// engine, with the web config file and sweep section the attacks need.
type listenerUnderAttack struct {
	addr string
	logs *syncBuffer
}

// startListener starts slaprobe with basic auth on its main listener (a
// bcrypt hash of cost 10, the usual) when basicAuth is set, and waits until
// it answers.
func startListener(t *testing.T, basicAuth bool) *listenerUnderAttack {
	t.Helper()
	bin := binary(t)
	eng, err := vllmsim.New(vllmsim.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	engURL, _ := testproc.Serve(t, eng.Handler())
	t.Cleanup(eng.Close)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "slaprobe.yml")
	cfg := `global: {scenarios: [chatbot]}
targets:
  - {name: sim, url: ` + engURL + `}
scenarios:
  - {name: chatbot, interval: 5s}
sweep:
  enabled: true
  scenarios: [chatbot]
  closed_loop: {concurrency: [1], warmup: 100ms, duration: 300ms}
  burst: {concurrency: [1], repeat: 1}
  state_file: ` + filepath.Join(dir, "state.json") + `
`
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testproc.FreeAddr(t)
	args := []string{"run", "--config.file=" + cfgPath, "--web.listen-address=" + addr}
	if basicAuth {
		hash, err := bcrypt.GenerateFromPassword([]byte(attackPass), bcrypt.DefaultCost)
		if err != nil {
			t.Fatal(err)
		}
		webCfg := filepath.Join(dir, "web.yml")
		// lateUser has the same password: a client that first comes during
		// the flood (Prometheus after a restart of slaprobe).
		if err := os.WriteFile(webCfg, fmt.Appendf(nil, "basic_auth_users:\n  %s: %s\n  %s: %s\n", attackUser, hash, lateUser, hash), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--web.config.file="+webCfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	l := &listenerUnderAttack{addr: addr}
	var exited <-chan error
	l.logs, exited = startProcess(t, exec.CommandContext(ctx, bin, args...))
	deadline := time.Now().Add(60 * time.Second)
	for {
		// /-/ready needs no credentials (Kubernetes probes).
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return l
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("slaprobe exited: %v\n%s", err, l.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("slaprobe not ready within 60 s\n%s", l.logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// do sends one request with the given credentials ("" user: none) and
// headers and returns the status and body.
func (l *listenerUnderAttack) do(t *testing.T, client *http.Client, method, path, user, pass string, headers map[string]string, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, "http://"+l.addr+path, rd)
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAttackListener drives the main web listener's limits against a
// running slaprobe with basic auth: a client that drips its headers is cut
// off, an oversized header block is refused, the connection cap holds, and
// 16 clients sending wrong passwords neither burn more CPU on bcrypt than
// the budget allows nor keep an authenticated scrape of /metrics from
// answering. SLAPROBE_ATTACK_LISTENER_LONG=1 runs the password flood for
// 60 s and asserts a scrape p99 of at most 200 ms (docs/reliability.md).
func TestAttackListener(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs slaprobe")
	}
	t.Parallel() // mostly waits on its own slaprobe: beside the package's other waiting tests
	l := startListener(t, true)
	client := &http.Client{Timeout: 10 * time.Second}

	t.Run("slowloris", func(t *testing.T) {
		t.Parallel()
		c, err := net.Dial("tcp", l.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: "+l.addr+"\r\n"); err != nil {
			t.Fatal(err)
		}
		// One header line a second, never the blank line that ends them.
		closed := make(chan error, 1)
		go func() {
			_, err := c.Read(make([]byte, 1))
			closed <- err
		}()
		limit := daemon.WebReadHeaderTimeout + 5*time.Second
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case err := <-closed:
				t.Logf("cut off after %s (%v)", time.Since(start).Round(100*time.Millisecond), err)
				return
			case <-tick.C:
				_, _ = fmt.Fprintf(c, "X-Drip-%d: a\r\n", i)
			}
			if time.Since(start) > limit {
				t.Fatalf("a client dripping headers still held its connection after %s (limit %s)", time.Since(start).Round(time.Second), daemon.WebReadHeaderTimeout)
			}
		}
	})

	t.Run("oversized header", func(t *testing.T) {
		for _, tc := range []struct {
			size int
			want int
		}{
			{8 << 10, http.StatusOK},
			{daemon.MaxHeaderBytes + 8<<10, http.StatusRequestHeaderFieldsTooLarge},
			{900 << 10, http.StatusRequestHeaderFieldsTooLarge},
		} {
			code, _ := l.do(t, client, "GET", "/-/healthy", "", "", map[string]string{"X-Big": strings.Repeat("a", tc.size)}, "")
			if code != tc.want {
				t.Errorf("a %d KiB header: %d, want %d", tc.size>>10, code, tc.want)
			}
		}
	})

	t.Run("connection cap", func(t *testing.T) {
		// MaxConns connections that send nothing hold every slot until the
		// header timeout cuts them; one more request waits in the
		// kernel's queue, and is answered once a slot frees.
		conns := make([]net.Conn, 0, daemon.MaxConns)
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for range daemon.MaxConns {
			c, err := net.Dial("tcp", l.addr)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		time.Sleep(300 * time.Millisecond) // let the server accept them
		extra := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		if resp, err := extra.Get("http://" + l.addr + "/-/healthy"); err == nil {
			resp.Body.Close()
			t.Fatalf("with %d connections open, one more was answered (%s): no cap", daemon.MaxConns, resp.Status)
		}
		conns[0].Close()
		conns = conns[1:]
		if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + l.addr + "/-/healthy"); err != nil {
			t.Fatalf("a connection freed, a new one still not answered: %v", err)
		} else {
			resp.Body.Close()
		}
	})

	t.Run("password flood", func(t *testing.T) {
		duration := 8 * time.Second
		long := os.Getenv("SLAPROBE_ATTACK_LISTENER_LONG") == "1"
		if long {
			duration = 60 * time.Second
		}
		// Prometheus scraped before the flood began: its credentials are
		// known good.
		code, body := l.do(t, client, "GET", "/metrics", attackUser, attackPass, nil, "")
		if code != http.StatusOK {
			t.Fatalf("authenticated scrape: %d %s", code, body)
		}
		spentBefore := metricSum(body, "slaprobe_web_password_check_seconds_total", "")
		floodStart := time.Now()
		ctx, stop := context.WithTimeout(context.Background(), duration)
		defer stop()
		var wrong, throttled atomic.Int64
		var wg sync.WaitGroup
		// The flood comes from 127.0.0.2, Prometheus from 127.0.0.1: two
		// hosts, as in a cluster.
		floodDialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
		for i := range 16 {
			wg.Go(func() {
				c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: floodDialer.DialContext}}
				for n := 0; ctx.Err() == nil; n++ {
					req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+l.addr+"/metrics", nil)
					req.SetBasicAuth(attackUser, fmt.Sprintf("wrong-%d-%d", i, n))
					resp, err := c.Do(req)
					if err != nil {
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					wrong.Add(1)
					if resp.StatusCode == http.StatusServiceUnavailable {
						throttled.Add(1)
					} else if resp.StatusCode != http.StatusUnauthorized {
						t.Errorf("a wrong password got %s", resp.Status)
					}
				}
			})
		}
		// A client whose credentials are not known yet comes once the
		// flood has spent the budget (its wrong passwords are throttled):
		// it is checked on the reserve, within a few tries a second apart
		// (Retry-After: 1) while the flood goes on, not throttled for as long
		// as the flood lasts.
		lateDone := make(chan string, 1)
		go func() {
			for throttled.Load() == 0 && ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond)
			}
			for try := 1; ctx.Err() == nil; try++ {
				req, _ := http.NewRequest("GET", "http://"+l.addr+"/metrics", nil)
				req.SetBasicAuth(lateUser, attackPass)
				resp, err := client.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK && ctx.Err() == nil {
						lateDone <- fmt.Sprintf("at try %d, %s into the flood", try, time.Since(floodStart).Round(10*time.Millisecond))
						return
					}
				}
				time.Sleep(time.Second)
			}
			lateDone <- ""
		}()
		var lat []time.Duration
		failed := 0
		tick := time.NewTicker(100 * time.Millisecond)
		for ctx.Err() == nil {
			<-tick.C
			t0 := time.Now()
			code, _ := l.do(t, client, "GET", "/metrics", attackUser, attackPass, nil, "")
			lat = append(lat, time.Since(t0))
			if code != http.StatusOK {
				failed++
			}
		}
		tick.Stop()
		wg.Wait()
		elapsed := time.Since(floodStart)

		_, body = l.do(t, client, "GET", "/metrics", attackUser, attackPass, nil, "")
		spent := metricSum(body, "slaprobe_web_password_check_seconds_total", "") - spentBefore
		slices.Sort(lat)
		p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
		t.Logf("%d wrong passwords (%d throttled) in %s; %d authenticated scrapes: p50 %s, p99 %s, max %s; bcrypt %.2f s in the %.1f s of the flood",
			wrong.Load(), throttled.Load(), duration, len(lat), p(0.5), p(0.99), lat[len(lat)-1], spent, elapsed.Seconds())
		if failed > 0 {
			t.Errorf("%d of %d authenticated scrapes failed under the flood", failed, len(lat))
		}
		if late := <-lateDone; late == "" {
			t.Errorf("a client first coming during the flood, with the right password, was refused until the flood ended")
		} else {
			t.Logf("a client first coming during the flood was let in %s", late)
		}
		if throttled.Load() == 0 {
			t.Errorf("no wrong password was throttled: every one cost a bcrypt comparison")
		}
		// The budget and the reserve: at most Burst and ReserveBurst when
		// the flood starts, refilled at Share and ReserveShare per second,
		// and one comparison that may start on the last of either (cost 10:
		// well under half a second on any machine that runs this).
		if limit := (webguard.Burst + webguard.ReserveBurst).Seconds() + (webguard.Share+webguard.ReserveShare)*elapsed.Seconds() + 1; spent > limit {
			t.Errorf("password checks spent %.2f s of bcrypt in %.1f s; the budget allows %.2f s", spent, elapsed.Seconds(), limit)
		}
		if refused := metricSum(body, "slaprobe_web_requests_refused_total", `reason="throttled"`); refused < float64(throttled.Load()) {
			t.Errorf("slaprobe_web_requests_refused_total{reason=\"throttled\"} = %v, want at least %d", refused, throttled.Load())
		}
		if long && p(0.99) > 200*time.Millisecond {
			t.Errorf("authenticated scrape p99 %s under the flood; want at most 200ms", p(0.99))
		}
	})
}

// TestAttackCrossSite: what a web page open in a colleague's browser can
// send to /-/reload and /-/sweep (a form post, a fetch marked cross-site,
// a foreign Origin) is refused with 403 and its reason, and changes
// nothing; what curl, Prometheus and Kubernetes hooks send still works.
func TestAttackCrossSite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs slaprobe")
	}
	l := startListener(t, false)
	client := &http.Client{Timeout: 10 * time.Second}
	reloadedAt := func() float64 {
		_, body := l.do(t, client, "GET", "/metrics", "", "", nil, "")
		return metricSum(body, "slaprobe_config_last_reload_success_timestamp_seconds", "")
	}
	sweepState := func() string {
		_, body := l.do(t, client, "GET", "/-/sweep", "", "", nil, "")
		return body
	}
	before, stateBefore := reloadedAt(), sweepState()

	browser := []struct {
		name    string
		headers map[string]string
		body    string
		reason  string
	}{
		{"form post", map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://127.0.0.2:8080"}, "target=sim", webguard.ForeignOrigin},
		{"form post, no Origin", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "target=sim", webguard.FormContentType},
		{"multipart", map[string]string{"Content-Type": "multipart/form-data; boundary=b"}, "--b--\r\n", webguard.FormContentType},
		{"text/plain", map[string]string{"Content-Type": "text/plain"}, "x", webguard.FormContentType},
		{"fetch, cross-site", map[string]string{"Sec-Fetch-Site": "cross-site"}, "", webguard.CrossSite},
		{"fetch, same-site", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:1"}, "", webguard.CrossSite},
		{"foreign Origin", map[string]string{"Origin": "http://127.0.0.2:9781"}, "", webguard.ForeignOrigin},
		{"null Origin", map[string]string{"Origin": "null"}, "", webguard.ForeignOrigin},
	}
	for _, ep := range []struct{ method, path string }{
		{"POST", "/-/reload"}, {"PUT", "/-/reload"}, {"POST", "/-/sweep"}, {"DELETE", "/-/sweep"},
	} {
		for _, b := range browser {
			code, body := l.do(t, client, ep.method, ep.path, "", "", b.headers, b.body)
			if code != http.StatusForbidden || !strings.Contains(body, "refused") {
				t.Errorf("%s %s, %s: %d %q; want 403 with the reason", ep.method, ep.path, b.name, code, body)
			}
			if ep.path == "/-/sweep" && !strings.Contains(body, b.reason) {
				t.Errorf("%s %s, %s: %q; want reason %s", ep.method, ep.path, b.name, body, b.reason)
			}
		}
	}
	if after := reloadedAt(); after != before {
		t.Errorf("a refused request reloaded the config (timestamp %v → %v)", before, after)
	}
	if after := sweepState(); after != stateBefore {
		t.Errorf("a refused request changed the sweeper's state:\nbefore %s\nafter  %s", stateBefore, after)
	}

	// curl -X POST, Prometheus, a Kubernetes hook; and a page of the
	// listener's own origin.
	for _, tc := range []struct {
		name, method, path string
		headers            map[string]string
		want               int
	}{
		{"curl reload", "POST", "/-/reload", map[string]string{"User-Agent": "curl/8.5.0", "Accept": "*/*"}, http.StatusOK},
		{"PUT reload", "PUT", "/-/reload", nil, http.StatusOK},
		{"same-origin reload", "POST", "/-/reload", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://" + l.addr}, http.StatusOK},
		{"curl sweep", "POST", "/-/sweep?target=sim", map[string]string{"User-Agent": "curl/8.5.0"}, http.StatusAccepted},
		{"curl stop", "DELETE", "/-/sweep", nil, http.StatusAccepted},
	} {
		code, body := l.do(t, client, tc.method, tc.path, "", "", tc.headers, "")
		if code != tc.want {
			t.Errorf("%s: %s %s = %d %q, want %d", tc.name, tc.method, tc.path, code, body, tc.want)
		}
	}
	if reloadedAt() == before {
		t.Error("the accepted reloads did not reload")
	}
}

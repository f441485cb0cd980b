package daemon

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/crypto/bcrypt"

	"github.com/slaprobe/slaprobe/internal/webguard"
)

// TestWebGuard: with basic_auth_users in --web.config.file every endpoint
// asks for credentials but the liveness and readiness checks; a spent
// budget answers 503 with Retry-After to unknown credentials only; the
// file's response headers are set; /probe gets a write deadline past its
// longest scenario timeout.
func TestWebGuard(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(path, fmt.Appendf(nil, "basic_auth_users: {prom: %s}\nhttp_server_config: {headers: {X-Frame-Options: deny}}\n", hash), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := newWebGuard(&web.FlagConfig{WebConfigFile: &path})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	srv := httptest.NewServer(g.wrap(mux, func() time.Duration { return time.Hour }))
	defer srv.Close()
	get := func(method, p, user, pass string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+p, nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct {
		method, path, user, pass string
		want                     int
	}{
		{"GET", "/metrics", "", "", 401},
		{"GET", "/metrics", "prom", "wrong", 401},
		{"GET", "/metrics", "prom", "pw", 200},
		{"GET", "/-/healthy", "", "", 200},
		{"HEAD", "/-/ready", "", "", 200},
		{"POST", "/-/ready", "", "", 401},
		{"GET", "/-/healthy/x", "", "", 401},
		{"GET", "/probe", "prom", "pw", 200},
	} {
		resp := get(tc.method, tc.path, tc.user, tc.pass)
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s as %q: %d, want %d", tc.method, tc.path, tc.user, resp.StatusCode, tc.want)
		}
		if resp.Header.Get("X-Frame-Options") != "deny" {
			t.Errorf("%s %s: no X-Frame-Options from http_server_config", tc.method, tc.path)
		}
	}
	frozen := time.Now() // no refill
	g.basic.SetHooks(webguard.Hooks{Now: func() time.Time { return frozen }})
	g.basic.Drain()
	if resp := get("GET", "/metrics", "prom", "other"); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("unknown credentials, budget spent: %d (Retry-After %q), want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp := get("GET", "/metrics", "prom", "pw"); resp.StatusCode != 200 {
		t.Errorf("known-good credentials, budget spent: %d, want 200", resp.StatusCode)
	}
	for reason, want := range map[string]float64{webguard.Unauthenticated: 4, webguard.Throttled: 1} {
		if got := testutil.ToFloat64(g.refused.WithLabelValues(reason)); got != want {
			t.Errorf("refused{reason=%q} = %v, want %v", reason, got, want)
		}
	}
}

// TestReloadRefusesCrossSite: a form post or a cross-site fetch reloads
// nothing; a bare POST (curl) does.
func TestReloadRefusesCrossSite(t *testing.T) {
	td := startDaemon(t, configA, false)
	for _, h := range []map[string]string{
		{"Content-Type": "application/x-www-form-urlencoded"},
		{"Sec-Fetch-Site": "cross-site"},
		{"Origin": "http://127.0.0.2"},
	} {
		req, _ := http.NewRequest(http.MethodPost, td.srv.URL+"/-/reload", strings.NewReader(""))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST /-/reload with %v: %d, want 403", h, resp.StatusCode)
		}
	}
	if code, body := td.get(t, http.MethodPost, "/-/reload"); code != 200 {
		t.Errorf("bare POST /-/reload: %d %s, want 200", code, body)
	}
}

// TestProbeWriteDeadline: /probe answers past the server's write timeout,
// up to its own deadline; any other path is cut off at the write timeout.
func TestProbeWriteDeadline(t *testing.T) {
	g, err := newWebGuard(nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(300 * time.Millisecond) // a probe, longer than the write timeout
		fmt.Fprint(w, "done")
	})
	srv := httptest.NewUnstartedServer(g.wrap(mux, func() time.Duration { return 5 * time.Second }))
	srv.Config.WriteTimeout = 100 * time.Millisecond
	srv.Start()
	defer srv.Close()
	for path, wantOK := range map[string]bool{"/probe": true, "/metrics": false} {
		resp, err := srv.Client().Get(srv.URL + path)
		ok := err == nil && resp.StatusCode == 200
		if err == nil {
			resp.Body.Close()
		}
		if ok != wantOK {
			t.Errorf("GET %s after 300 ms with a 100 ms write timeout: answered %t (%v), want %t", path, ok, err, wantOK)
		}
	}
}

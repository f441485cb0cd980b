package healthcheck

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNormalizeURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                              DefaultURL,
		":9781":                         "http://127.0.0.1:9781/-/healthy",
		"0.0.0.0:9000":                  "http://127.0.0.1:9000/-/healthy",
		"[::]:9000":                     "http://127.0.0.1:9000/-/healthy",
		"slaprobe:9781":                 "http://slaprobe:9781/-/healthy",
		"https://slaprobe:9781/-/ready": "https://slaprobe:9781/-/ready",
	} {
		if got := NormalizeURL(in); got != want {
			t.Errorf("NormalizeURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "hc" || p != "pw" {
			w.Header().Set("WWW-Authenticate", "Basic")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/-/healthy":
			w.Write([]byte("Healthy\n"))
		default:
			http.Error(w, "Not ready", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "http.yml")
	if err := os.WriteFile(cfg, []byte("basic_auth: {username: hc, password: pw}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	if err := Check(ctx, Options{URL: host, HTTPConfigFile: cfg}); err != nil {
		t.Errorf("healthy: %v", err)
	}
	if err := Check(ctx, Options{URL: host}); err == nil || !strings.Contains(err.Error(), "401 Unauthorized") {
		t.Errorf("without credentials: %v", err)
	}
	if err := Check(ctx, Options{URL: srv.URL + "/-/ready", HTTPConfigFile: cfg}); err == nil || !strings.Contains(err.Error(), "503 Service Unavailable: Not ready") {
		t.Errorf("not ready: %v", err)
	}
	if err := Check(ctx, Options{URL: host, HTTPConfigFile: filepath.Join(dir, "missing.yml")}); err == nil || !strings.Contains(err.Error(), "missing.yml") {
		t.Errorf("missing http config: %v", err)
	}
	srv.Close()
	if err := Check(ctx, Options{URL: host, Timeout: time.Second}); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("nothing listening: %v", err)
	}
}

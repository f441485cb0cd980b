package app

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/slaprobe/slaprobe/internal/tracing"
)

// TestWarnOpenReceiver: a receiver on every interface that authenticates
// no one gets a warning at start; on loopback, or with basic auth, none
// (basic auth without TLS gets its own).
func TestWarnOpenReceiver(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(path, []byte("basic_auth_users: {vllm: "+string(hash)+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	basic, err := tracing.LoadReceiverAuth(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr string
		auth *tracing.ReceiverAuth
		want string // "" for no warning
	}{
		{"[::]:4317", nil, "listens on every interface without authentication"},
		{"0.0.0.0:4318", nil, "listens on every interface without authentication"},
		{"127.0.0.1:4317", nil, ""},
		{"[::1]:4318", nil, ""},
		{"[::]:4317", basic, "with basic auth but without TLS"},
		{"127.0.0.1:4317", basic, ""},
	} {
		var buf bytes.Buffer
		warnOpenReceiver(slog.New(slog.NewTextHandler(&buf, nil)), tc.addr, tc.auth)
		out := buf.String()
		switch {
		case tc.want == "" && out != "":
			t.Errorf("%s, auth %t: %s; want no warning", tc.addr, tc.auth != nil, out)
		case tc.want != "" && (!strings.Contains(out, "level=WARN") || !strings.Contains(out, tc.want)):
			t.Errorf("%s, auth %t: %q; want a warning with %q", tc.addr, tc.auth != nil, out, tc.want)
		}
	}
}

// TestTrustAnyParentFollowsAuth: the joiner accepts an engine span under
// any parent exactly when the receivers authenticate their clients; a
// receiver without a web configuration joins only the children of the
// probe's span.
func TestTrustAnyParentFollowsAuth(t *testing.T) {
	dir := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "web.yml"), []byte("basic_auth_users: {vllm: "+string(hash)+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tracing string
		want    bool
	}{
		{"tracing: {otlp_http_listen_address: '127.0.0.1:0'}\n", false},
		{"tracing: {otlp_http_listen_address: '127.0.0.1:0', receiver_web_config_file: web.yml}\n", true},
	} {
		cfg := filepath.Join(dir, "slaprobe.yml")
		body := "targets: [{name: sim, url: 'http://127.0.0.1:1'}]\nengine: {enabled: false}\npower: {nvml: false}\n" + tc.tracing
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		a, err := New(Options{ConfigFile: cfg})
		if err != nil {
			t.Fatalf("%s: %v", tc.tracing, err)
		}
		if a.Joiner == nil || a.Joiner.TrustsAnyParent() != tc.want {
			t.Errorf("%s: joiner trusts any parent = %v, want %v", strings.TrimSpace(tc.tracing), a.Joiner != nil && a.Joiner.TrustsAnyParent(), tc.want)
		}
		a.close()
	}
}

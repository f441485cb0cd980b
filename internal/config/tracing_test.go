package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// TestTracingReceiverWebConfigFile: the file is resolved against the
// config file's directory and validated at load; a bad one is an error
// naming the field, the file and what was expected.
func TestTracingReceiverWebConfigFile(t *testing.T) {
	dir := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "otlp-web.yml"), []byte("basic_auth_users: {vllm: "+string(hash)+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad-web.yml"), []byte("basic_auth_users: {vllm: in-clear}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	load := func(tracing string) (*Config, error) {
		path := filepath.Join(dir, "slaprobe.yml")
		if err := os.WriteFile(path, []byte(powerEngineTarget+tracing), 0o600); err != nil {
			t.Fatal(err)
		}
		return Load(path)
	}
	c, err := load("tracing: {otlp_grpc_listen_address: ':4317', receiver_web_config_file: otlp-web.yml}\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "otlp-web.yml"); c.Tracing.ReceiverWebConfigFile != want {
		t.Errorf("receiver_web_config_file = %q, want %q", c.Tracing.ReceiverWebConfigFile, want)
	}
	for _, tc := range []struct{ tracing, want string }{
		{"tracing: {otlp_http_listen_address: '127.0.0.1:4318', receiver_web_config_file: bad-web.yml}\n",
			`tracing.receiver_web_config_file="` + filepath.Join(dir, "bad-web.yml") + `": basic_auth_users: user "vllm": not a bcrypt hash`},
		{"tracing: {otlp_http_listen_address: '127.0.0.1:4318', receiver_web_config_file: absent.yml}\n",
			"no such file or directory; expected an exporter-toolkit web configuration file"},
		{"tracing: {receiver_web_config_file: otlp-web.yml}\n",
			"but no receiver is configured; expected otlp_grpc_listen_address or otlp_http_listen_address too"},
	} {
		if _, err := load(tc.tracing); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant an error with %q", strings.TrimSpace(tc.tracing), err, tc.want)
		}
	}
}

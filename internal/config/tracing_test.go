package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
	"gopkg.in/yaml.v3"
)

// TestTracingSweepExportRatio: the share of sweep and /probe spans sampled
// defaults to 0.01 and must lie in [0, 1].
func TestTracingSweepExportRatio(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		err  string
	}{
		{"join_timeout: 10s", 0.01, ""},
		{"sweep_export_ratio: 0", 0, ""},
		{"sweep_export_ratio: 1", 1, ""},
		{"sweep_export_ratio: 0.25", 0.25, ""},
		{"sweep_export_ratio: 1.5", 0, "tracing.sweep_export_ratio=1.5; expected a number from 0 to 1"},
		{"sweep_export_ratio: -0.1", 0, "tracing.sweep_export_ratio=-0.1; expected a number from 0 to 1"},
		{"sweep_export_ratio: .nan", 0, "tracing.sweep_export_ratio=NaN"},
	} {
		var tc2 TracingConfig
		err := yaml.Unmarshal([]byte(tc.in), &tc2)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || tc2.SweepExportRatio != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.in, tc2.SweepExportRatio, err, tc.want)
		}
	}
	if d := DefaultTracingConfig().SweepExportRatio; d != 0.01 {
		t.Errorf("default sweep_export_ratio = %v, want 0.01", d)
	}
}

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

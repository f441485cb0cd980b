package config

import (
	"reflect"
	"testing"
)

func TestStartOnlyChanges(t *testing.T) {
	load := func(y string) *Config {
		t.Helper()
		c, err := LoadBytes([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	start := load("targets: [{url: \"http://127.0.0.1:8000\"}]\n")
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"nothing", "targets: [{url: \"http://127.0.0.1:8000\"}]\n", nil},
		{"targets follow reloads", "targets: [{url: \"http://127.0.0.1:9000\"}]\nglobal: {jitter: 0.1}\n", nil},
		{"start-only settings", `targets: [{url: "http://127.0.0.1:8000"}]
global: {classic_histogram_buckets: none}
engine: {live: {queue_depth_samples: 50}}
power: {devices: ["0"]}
tracing: {otlp_http_listen_address: "127.0.0.1:4318", export_endpoint: "http://127.0.0.1:4317"}
`, []string{"global.classic_histogram_buckets", "engine.live.queue_depth_samples", "power.devices",
			"tracing.otlp_http_listen_address", "tracing.export_endpoint"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := StartOnlyChanges(start, load(tc.yaml))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("StartOnlyChanges = %q, want %q", got, tc.want)
			}
		})
	}
}

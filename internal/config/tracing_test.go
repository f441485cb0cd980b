package config

import (
	"strings"
	"testing"

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

// Package dashgen generates slaprobe's Grafana dashboards (dashboards/*.json) from Go: one source for
// every panel, query, unit and threshold, so the JSON never drifts from the metrics. `make dashboards`
// writes the files; `make lint` and the tests in test/e2e fail when the committed files differ from
// what this package generates.
//
// The dashboards hold no SLA numbers: configured thresholds are drawn from slaprobe_sla_threshold. The
// only numbers are the experience bands (internal/slo/bands.go) and the reports' reference lines
// (20 ms and 70 ms ITL, 3.0 s TTFT), see builder.go.
package dashgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// Dashboards returns every dashboard, in file name order.
func Dashboards() []*Dashboard {
	ds := []*Dashboard{overview(), capacity(), live()}
	sort.Slice(ds, func(i, j int) bool { return ds[i].file < ds[j].file })
	return ds
}

// File is the dashboard's file name under dashboards/.
func (d *Dashboard) File() string { return d.file }

// Render returns every dashboard file's content, by file name: indented JSON with a final newline.
func Render() (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, d := range Dashboards() {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // keep "<", ">" and "&" readable in PromQL and descriptions
		enc.SetIndent("", "  ")
		if err := enc.Encode(d); err != nil {
			return nil, fmt.Errorf("encode %s: %w", d.file, err)
		}
		out[d.file] = buf.Bytes()
	}
	return out, nil
}

// Write renders every dashboard into dir, creating it if needed.
func Write(dir string) error {
	files, err := Render()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

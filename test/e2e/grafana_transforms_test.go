package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/slaprobe/slaprobe/test/testproc"
)

// grafanaTransforms is test/grafana/transforms/check.mjs: it runs a panel's transformations with
// Grafana's own code (@grafana/data, pinned in its package-lock.json) on Prometheus results. It needs
// node and `npm ci` in that directory, which `make test-deps` does.
func grafanaTransforms(t *testing.T, root string) (node, script string) {
	t.Helper()
	dir := filepath.Join(root, "test", "grafana", "transforms")
	node, err := exec.LookPath("node")
	msg := ""
	switch {
	case err != nil:
		msg = "node not found: run `make test-deps` (Debian packages nodejs and npm)"
	default:
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "@grafana", "data")); err != nil {
			msg = "@grafana/data not installed: run `make test-deps` (npm ci in test/grafana/transforms)"
		}
	}
	if msg != "" {
		missingTool(t, msg)
	}
	return node, filepath.Join(dir, "check.mjs")
}

// lineNameRE finds the reference lines a query draws: the series it names "line: …" or "SLA …"
// (not "SLA $1", named after each scenario).
var lineNameRE = regexp.MustCompile(`"((?:line: |SLA )[^"$]+)"`)

// missingLines are reference lines that have no series in TestDashboardQueriesAfterSweep, with why.
// None today: the demo's slaprobe exports every built-in scenario's thresholds (code_completion's E2E
// limit too), and the queries run with $scenario as .*.
var missingLines = map[string]string{}

// checkPanelTransforms runs every panel that transforms its data (the trend curves, bar charts and
// merged tables) through Grafana's own transformations, on what its queries return from p now, and
// requires what the panel draws from: a numeric, ascending x field for a trend panel, the x field of a
// bar chart, every field its overrides name (the shaded bands' fillBelowTo included). A panel whose
// queries all return nothing now is left out (Grafana shows "No data"; TestDashboardQueriesAfterSweep
// has already required data of every query not in noData). It also requires a series for each
// reference line a query names, but those in missingLines.
func checkPanelTransforms(t *testing.T, ctx context.Context, p *prometheus, root string) {
	t.Helper()
	node, script := grafanaTransforms(t, root)
	type result struct {
		RefID  string          `json:"refId"`
		Series json.RawMessage `json:"series"`
	}
	type panel struct {
		Where           string   `json:"where"`
		Type            string   `json:"type"`
		Options         any      `json:"options"`
		FieldConfig     any      `json:"fieldConfig"`
		Transformations any      `json:"transformations"`
		Results         []result `json:"results"`
	}
	var in struct {
		Panels []panel `json:"panels"`
	}
	lines := 0
	for _, d := range loadDashboards(t, root) {
		for _, pm := range d.panels {
			tr, _ := pm["transformations"].([]any)
			if len(tr) == 0 {
				continue
			}
			pn := panel{Where: fmt.Sprintf("%s: panel %q", d.file, pm["title"]), Type: fmt.Sprint(pm["type"]),
				Options: pm["options"], FieldConfig: pm["fieldConfig"], Transformations: tr}
			targets, _ := pm["targets"].([]any)
			for _, raw := range targets {
				tg, _ := raw.(map[string]any)
				expr, _ := tg["expr"].(string)
				var data struct {
					Result json.RawMessage `json:"result"`
				}
				if err := p.apiGet(ctx, "/api/v1/query", map[string][]string{"query": {grafanaVars.Replace(expr)}}, &data); err != nil {
					t.Fatalf("%s: %v", pn.Where, err)
				}
				pn.Results = append(pn.Results, result{RefID: fmt.Sprint(tg["refId"]), Series: data.Result})
				for _, m := range lineNameRE.FindAllStringSubmatch(expr, -1) {
					name := m[1]
					_, excused := missingLines[name]
					has := strings.Contains(string(data.Result), fmt.Sprintf("%q", name))
					switch {
					case has && excused:
						t.Errorf("%s: line %q has data: remove it from missingLines", pn.Where, name)
					case !has && !excused:
						t.Errorf("%s: line %q has no series", pn.Where, name)
					case has:
						lines++
					}
				}
			}
			empty := true
			for _, r := range pn.Results {
				if s := strings.TrimSpace(string(r.Series)); s != "[]" && s != "null" && s != "" {
					empty = false
				}
			}
			if empty {
				t.Logf("%s: no data now, not checked", pn.Where)
				continue
			}
			in.Panels = append(in.Panels, pn)
		}
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "panels.json")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	testproc.SeesTree()
	out, err := exec.CommandContext(ctx, node, script, file).CombinedOutput()
	if err != nil {
		t.Errorf("Grafana's transformations on the dashboards' panels (node %s %s): %v\n%s", script, file, err, out)
		return
	}
	t.Logf("%d panels through Grafana's transformations, %d reference lines with data:\n%s", len(in.Panels), lines, out)
}

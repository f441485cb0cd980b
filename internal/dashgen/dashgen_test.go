package dashgen

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/slaprobe/slaprobe/internal/slo"
	"github.com/slaprobe/slaprobe/test/promql"
)

func TestRenderIsDeterministicJSON(t *testing.T) {
	a, err := Render()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Render()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"slaprobe-capacity.json", "slaprobe-live.json", "slaprobe-overview.json"}
	var got []string
	for name, content := range a {
		got = append(got, name)
		if !bytes.Equal(content, b[name]) {
			t.Errorf("%s: two renders differ", name)
		}
		if !json.Valid(content) {
			t.Errorf("%s: invalid JSON", name)
		}
		if !bytes.HasSuffix(content, []byte("}\n")) {
			t.Errorf("%s: does not end in a newline", name)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("files %v, want %v", got, want)
	}
}

func TestLayout(t *testing.T) {
	uids := map[string]bool{}
	for _, d := range Dashboards() {
		if d.UID == "" || uids[d.UID] {
			t.Errorf("%s: uid %q empty or taken", d.file, d.UID)
		}
		uids[d.UID] = true
		if d.SchemaVersion != SchemaVersion || !slices.Contains(d.Tags, "slaprobe") {
			t.Errorf("%s: schemaVersion %d, tags %v", d.file, d.SchemaVersion, d.Tags)
		}
		ids := map[int]bool{}
		var cells = map[[2]int]int{} // (x, y) → panel id, to find overlaps
		for _, p := range d.Panels {
			if p.ID <= 0 || ids[p.ID] {
				t.Errorf("%s: panel %q: id %d not positive or not unique", d.file, p.Title, p.ID)
			}
			ids[p.ID] = true
			g := p.GridPos
			if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
				t.Errorf("%s: panel %q: gridPos %+v off the 24-column grid", d.file, p.Title, g)
			}
			for x := g.X; x < g.X+g.W; x++ {
				for y := g.Y; y < g.Y+g.H; y++ {
					if other, ok := cells[[2]int{x, y}]; ok {
						t.Errorf("%s: panel %q (id %d) overlaps panel id %d at %d,%d", d.file, p.Title, p.ID, other, x, y)
					}
					cells[[2]int{x, y}] = p.ID
				}
			}
			if p.Type == "row" {
				continue
			}
			if p.Title == "" || p.Description == "" {
				t.Errorf("%s: panel id %d: needs a title and a description", d.file, p.ID)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q: no query", d.file, p.Title)
			}
			refs := map[string]bool{}
			for _, q := range p.Targets {
				if refs[q.RefID] || q.Datasource == nil || q.Datasource.UID != "${datasource}" {
					t.Errorf("%s: panel %q: query %q: refId repeated or data source not ${datasource}", d.file, p.Title, q.RefID)
				}
				refs[q.RefID] = true
			}
		}
	}
}

// The panels mirror report.html's charts (docs/report.md says so): every chart has one.
func TestReportChartsMirrored(t *testing.T) {
	got := reportCharts()
	for _, c := range slo.Charts {
		if len(got[c]) == 0 {
			t.Errorf("report chart %q has no panel", c)
		}
	}
	if len(got[slo.ChartCapacity]) == 0 {
		t.Errorf("report chart %q has no panel", slo.ChartCapacity)
	}
}

// Every query and variable uses the ${datasource} variable and the target variable, so that one
// dashboard serves every Prometheus and every target.
func TestVariables(t *testing.T) {
	for _, d := range Dashboards() {
		var names []string
		for _, v := range d.Templating.List {
			names = append(names, v.Name)
			if v.Type == "query" && (v.Datasource == nil || v.Datasource.UID != "${datasource}" || !strings.HasPrefix(v.Query, "label_values(")) {
				t.Errorf("%s: variable %s: %+v", d.file, v.Name, v)
			}
		}
		want := []string{"datasource", "target", "model", "scenario"}
		if d.file != "slaprobe-live.json" { // the overview and capacity dashboards compare with an earlier time
			want = append(want, "compare_offset")
		}
		if !slices.Equal(names, want) {
			t.Errorf("%s: variables %v, want %v", d.file, names, want)
		}
	}
}

// An "earlier" query moves every selector back by $compare_offset, and only those queries read it.
func TestCompareOffset(t *testing.T) {
	got := earlier(`max by (s) (rate(a{x="1"}[15m])) or b{y=~"$target"} / c{z="2"}[1h:]`)
	want := `max by (s) (rate(a{x="1"}[15m] offset $compare_offset)) or b{y=~"$target"} offset $compare_offset / c{z="2"}[1h:] offset $compare_offset`
	if got != want {
		t.Errorf("earlier:\n got %s\nwant %s", got, want)
	}
	n := 0
	for _, d := range Dashboards() {
		for _, p := range d.Panels {
			for _, q := range p.Targets {
				uses := strings.Contains(q.Expr, compareVarName)
				if uses != strings.HasPrefix(q.LegendFormat, earlierLegend) {
					t.Errorf("%s: panel %q: legend %q, expr %s", d.file, p.Title, q.LegendFormat, q.Expr)
				}
				if !uses {
					continue
				}
				n++
				if strings.Count(q.Expr, "}") != strings.Count(q.Expr, " offset "+compareVarName) {
					t.Errorf("%s: panel %q: a selector without the offset: %s", d.file, p.Title, q.Expr)
				}
			}
		}
	}
	if n < 7 {
		t.Errorf("%d earlier queries; want the overview's four latency panels and the capacity headline", n)
	}
}

// No configured SLA number is written into an expression: thresholds come from slaprobe_sla_threshold.
// The numbers that may appear are quantiles (0.99: TTFT by length class), the 3600 of tokens per hour, the 1000 of W to kW, 1
// (boolean gauges, and 1 / decode speed for the ITL it allows) and 0 (a reference line is data × 0 + the
// threshold).
func TestNoThresholdNumbersInQueries(t *testing.T) {
	allowed := map[string]bool{"0.5": true, "0.95": true, "0.99": true, "0.10": true, "3600": true, "1000": true, "1": true, "0": true}
	for _, d := range Dashboards() {
		for _, p := range d.Panels {
			for _, q := range p.Targets {
				for _, num := range promql.Numbers(q.Expr) {
					if !allowed[num] {
						t.Errorf("%s: panel %q: number %s in %s", d.file, p.Title, num, q.Expr)
					}
				}
			}
		}
	}
}

// No graph draws a line from a number typed into the dashboard: Grafana's threshold lines are off on
// every graph, and every "line: …" or "SLA …" series a graph draws is a query of an exported gauge.
func TestNoTypedThresholdLines(t *testing.T) {
	lines := 0
	for _, d := range Dashboards() {
		for _, p := range d.Panels {
			if p.FieldConfig == nil {
				continue
			}
			if c := p.FieldConfig.Defaults.Custom; c != nil && c.ThresholdsStyle != nil && c.ThresholdsStyle.Mode != "off" {
				t.Errorf("%s: panel %q draws its thresholds as %q lines", d.file, p.Title, c.ThresholdsStyle.Mode)
			}
			for _, o := range p.FieldConfig.Overrides {
				for _, prop := range o.Properties {
					if prop.ID == "custom.thresholdsStyle" {
						t.Errorf("%s: panel %q: an override draws thresholds", d.file, p.Title)
					}
				}
			}
			for _, q := range p.Targets {
				for _, g := range []string{"slaprobe_sla_threshold", "slaprobe_experience_band_", "slaprobe_capacity_max_safe_ttft_seconds"} {
					if strings.Contains(q.Expr, g) && (strings.Contains(q.Expr, `"line: `) || strings.Contains(q.Expr, `"SLA `) ||
						strings.HasPrefix(q.LegendFormat, "line: ") || strings.HasPrefix(q.LegendFormat, "SLA ")) {
						lines++
						break
					}
				}
			}
		}
	}
	// The ITL, decode, efficiency, TTFT and use-case charts draw their lines from gauges.
	if lines < 12 {
		t.Errorf("%d queries draw reference lines from exported gauges, want at least 12", lines)
	}
}

// ReportCharts maps each report.html chart (internal/slo.Charts) that a panel mirrors to
// "file: panel title".
func reportCharts() map[string][]string {
	m := map[string][]string{}
	for _, d := range Dashboards() {
		for _, p := range d.Panels {
			if p.reportChart != "" {
				m[p.reportChart] = append(m[p.reportChart], d.file+": "+p.Title)
			}
		}
	}
	return m
}

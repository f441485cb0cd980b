package dashgen

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/slaprobe/slaprobe/internal/slo"
)

// The one data source every panel, query and variable reads: the ${datasource} variable.
var promDS = &DataSourceRef{Type: "prometheus", UID: "${datasource}"}

// Colours. The experience bands use report.html's colours (internal/report/render), so a band looks the same
// in the report and in Grafana; the reference lines use the report's line colours.
const (
	colorExcellent  = "#1a9850"
	colorGood       = "#91cf60"
	colorAcceptable = "#fdae61"
	colorPoor       = "#d73027"

	colorThreshold  = "#c0392b" // reference lines ("SLA …", "line: …") unless a chart colours one itself
	colorITLInstant = "#1b7f3b"
	colorITLCeiling = "#b03a2e"
	colorNeutral    = "#0072B2"
)

// unitTokS is a custom Grafana unit: Grafana has none for tokens per second.
const unitTokS = "suffix: tok/s"

func num(v float64) *float64 { return &v }

// steps builds threshold steps from a base colour and (value, colour) pairs: steps(c0, v1, c1, v2, c2).
func steps(base string, rest ...any) *Thresholds {
	t := &Thresholds{Mode: "absolute", Steps: []Step{{Color: base}}}
	for i := 0; i+1 < len(rest); i += 2 {
		t.Steps = append(t.Steps, Step{Color: rest[i+1].(string), Value: num(rest[i].(float64))})
	}
	return t
}

// The experience bands, as threshold steps (excellent, good, acceptable, poor) in base units. They
// are report.html's bands (slo.ITLBands and the others), so a colour means the same in both.
// Stats and tables colour their values by them. Graphs draw no line from these numbers: a line is a
// series read from an exported gauge (see "Reference lines" below).
var (
	bandsITL        = bandSteps(slo.ITLBands)
	bandsTTFT       = bandSteps(slo.TTFTBands)
	bandsDecode     = bandSteps(slo.DecodeBands)
	bandsEfficiency = bandSteps(slo.EfficiencyBands)

	plainSteps = steps(colorNeutral)
)

// bandSteps colours b's four levels, the worst first for a higher-is-better metric.
func bandSteps(b slo.Bands) *Thresholds {
	e := b.Edges
	if b.HigherIsBetter {
		return steps(colorPoor, e[2], colorAcceptable, e[1], colorGood, e[0], colorExcellent)
	}
	return steps(colorExcellent, e[0], colorGood, e[1], colorAcceptable, e[2], colorPoor)
}

// board lays panels out on Grafana's 24-column grid, left to right and top to bottom, and numbers them.
type board struct {
	d            *Dashboard
	nextID       int
	x, y, lineH  int
	refIDLetters string
}

func newBoard(file, uid, title, description string, vars ...*Variable) *board {
	return &board{
		d: &Dashboard{
			Annotations: Annotations{List: []Annotation{{
				BuiltIn:    1,
				Datasource: &DataSourceRef{Type: "grafana", UID: "-- Grafana --"},
				Enable:     true,
				Hide:       true,
				IconColor:  "rgba(0, 211, 255, 1)",
				Name:       "Annotations & Alerts",
				Type:       "dashboard",
			}}},
			Description:  description,
			Editable:     true,
			GraphTooltip: 1,
			Links: []Link{{
				AsDropdown: true, IncludeVars: true, KeepTime: true,
				Tags: []string{"slaprobe"}, Title: "slaprobe dashboards", Type: "dashboards",
			}},
			Refresh:       "1m",
			SchemaVersion: SchemaVersion,
			Tags:          []string{"slaprobe"},
			Templating:    Templating{List: vars},
			Time:          TimeRange{From: "now-6h", To: "now"},
			Title:         title,
			UID:           uid,
			Version:       1,
			file:          file,
		},
		nextID:       1,
		refIDLetters: "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
	}
}

// annotate adds a Prometheus annotation: Grafana marks the time ranges where expr has a sample on
// every time-series panel.
func (b *board) annotate(name, color, expr, title, text string) {
	b.d.Annotations.List = append(b.d.Annotations.List, Annotation{
		Datasource: promDS, Enable: true, IconColor: color, Name: name,
		Expr: expr, Step: "1m", TitleFormat: title, TextFormat: text,
	})
}

// newline moves the cursor below the current line of panels.
func (b *board) newline() {
	if b.x > 0 {
		b.y += b.lineH
		b.x, b.lineH = 0, 0
	}
}

// row starts a full-width row header.
func (b *board) row(title string) {
	b.newline()
	collapsed := false
	b.d.Panels = append(b.d.Panels, &Panel{
		Type: "row", Title: title, ID: b.nextID, Collapsed: &collapsed,
		GridPos: GridPos{H: 1, W: 24, X: 0, Y: b.y},
	})
	b.nextID++
	b.y++
}

// add places p, w columns wide and h high, after the previous panel or on a new line when it does not
// fit. It gives p its id, the data source and its queries' refIds.
func (b *board) add(w, h int, p *Panel) *Panel {
	if b.x+w > 24 {
		b.newline()
	}
	p.ID = b.nextID
	b.nextID++
	p.GridPos = GridPos{H: h, W: w, X: b.x, Y: b.y}
	p.Datasource = promDS
	for i, t := range p.Targets {
		t.RefID = b.refIDLetters[i : i+1]
		t.Datasource = promDS
	}
	b.x += w
	b.lineH = max(b.lineH, h)
	b.d.Panels = append(b.d.Panels, p)
	return p
}

// ---------------------------------------------------------------------------------------------------
// Variables

func datasourceVar() *Variable {
	return &Variable{Name: "datasource", Label: "Data source", Type: "datasource", Query: "prometheus", Refresh: 1, Options: []struct{}{}}
}

// labelVar is a multi-value variable over the values of label in the series of selector, with "All"
// as the regex .* (every panel matches it with =~).
func labelVar(name, label, selector, description string) *Variable {
	q := fmt.Sprintf("label_values(%s, %s)", selector, name)
	return &Variable{
		Name: name, Label: label, Type: "query", Datasource: promDS,
		Query: q, Refresh: 2, Sort: 1,
		IncludeAll: true, AllValue: ".*", Multi: true, Description: description, Options: []struct{}{},
	}
}

// singleLabelVar is labelVar with one value at a time and no "All".
func singleLabelVar(name, label, selector, description string) *Variable {
	v := labelVar(name, label, selector, description)
	v.IncludeAll, v.AllValue, v.Multi = false, "", false
	return v
}

// compareVar is the "compare with" variable of the overview and capacity dashboards: the panels that
// read it add the same series that long ago, dashed, so a live change shows without waiting for a sweep.
// "off" is an offset of 100 years: the earlier series are then empty and Grafana draws nothing for them.
func compareVar() *Variable {
	return &Variable{
		Name: "compare_offset", Label: "Compare with", Type: "custom",
		Query: "off : 100y, a day earlier : 1d, a week earlier : 1w", Options: []struct{}{},
		Description: "Adds the same series this long ago to the main panels, dashed and named \"earlier …\" (a week " +
			"before an upgrade, say). Off by default.",
	}
}

// compareVarName is the PromQL offset the compare_offset variable gives.
const compareVarName = "$compare_offset"

// selectorEnd finds the end of a selector: its closing brace and, for a range selector, the range.
var selectorEnd = regexp.MustCompile(`\}(\[[^\]]+\])?`)

// earlier moves every selector of expr back by the compare_offset variable: the series that long ago.
// The expressions built here write every selector with matchers (sel), so each ends in a brace.
func earlier(expr string) string {
	return selectorEnd.ReplaceAllString(expr, "}${1} offset "+strings.ReplaceAll(compareVarName, "$", "$$"))
}

// earlierLegend names an earlier series; dashedEarlier draws them.
const earlierLegend = "earlier "

// dashedEarlier draws the compare_offset series dashed and light, in the same colour as their twin
// where Grafana keeps colours by name order.
func (p *Panel) dashedEarlier() *Panel {
	p.FieldConfig.Overrides = append(p.FieldConfig.Overrides, Override{
		Matcher: Matcher{ID: "byRegexp", Options: "^" + earlierLegend + ".*"},
		Properties: []Property{
			{ID: "custom.lineStyle", Value: map[string]any{"fill": "dash", "dash": []int{6, 4}}},
			{ID: "custom.lineWidth", Value: 1},
		},
	})
	return p
}

// ---------------------------------------------------------------------------------------------------
// Queries

// sel writes metric{matchers}.
func sel(metric string, matchers ...string) string {
	if len(matchers) == 0 {
		return metric
	}
	return metric + "{" + strings.Join(matchers, ", ") + "}"
}

// Matchers for the template variables.
const (
	mTarget   = `target=~"$target"`
	mModel    = `model=~"$model"`
	mScenario = `scenario=~"$scenario"`
)

// probeSel selects a probe series of the chosen targets, models and scenarios.
func probeSel(metric string, extra ...string) string {
	return sel(metric, append([]string{mTarget, mModel, mScenario}, extra...)...)
}

// ruleBy is the grouping of the recording rules in alerts/slaprobe.rules.yml: a query grouped the same
// way can be or-ed with a rule without duplicating series.
const ruleBy = "job, instance, target, model, scenario, api"

// probeWindow is the window of probe quantiles and ratios: 15 minutes, as in the alerts. Probes run
// every 30 s to 5 min, so $__rate_interval (four scrapes) would hold one probe of a slow scenario or none.
const probeWindow = "15m"

// histQuantile is the q-quantile of a probe histogram over window, from the classic buckets, or from
// the native histogram where only that is ingested (the same two branches as the recording rules).
func histQuantile(q, metric, by, window string, extra ...string) string {
	return fmt.Sprintf("histogram_quantile(%s, sum by (%s, le) (rate(%s[%s])))\nor\nhistogram_quantile(%s, sum by (%s) (rate(%s[%s])))",
		q, by, probeSel(metric+"_bucket", extra...), window, q, by, probeSel(metric, extra...), window)
}

// histMean is the mean of a probe histogram over window: _sum / _count, or the native histogram's.
func histMean(metric, by, window string) string {
	cls := fmt.Sprintf("sum by (%s) (rate(%s[%s]))\n/\nsum by (%s) (rate(%s[%s]))",
		by, probeSel(metric+"_sum"), window, by, probeSel(metric+"_count"), window)
	nat := fmt.Sprintf("sum by (%s) (rate(%s[%s]))", by, probeSel(metric), window)
	return fmt.Sprintf("(\n%s\n)\nor\n(\nhistogram_sum(%s)\n/\nhistogram_count(%s)\n)", cls, nat, nat)
}

// orRule reads a recording rule, and computes the same series where the rules are not loaded.
func orRule(rule, expr string) string {
	return probeSel(rule) + "\nor\n" + expr
}

// threshold is the configured SLA threshold of metric per scenario, from slaprobe_sla_threshold.
func threshold(metric string) string {
	return fmt.Sprintf(`max by (scenario) (slaprobe_sla_threshold{metric=%q, %s})`, metric, mScenario)
}

// rangeQ is a graph query.
func rangeQ(expr, legend string) *Target {
	return &Target{Expr: expr, LegendFormat: legend, Range: true}
}

// tableQ is an instant query in table format (one row per series, labels as columns).
func tableQ(expr string) *Target {
	return &Target{Expr: expr, Format: "table", Instant: true}
}

// instantQ is an instant query for stats.
func instantQ(expr, legend string) *Target {
	return &Target{Expr: expr, LegendFormat: legend, Instant: true}
}

// ---------------------------------------------------------------------------------------------------
// Reference lines
//
// A chart draws a threshold as a series of its own, read from a gauge slaprobe exports, never as a
// number typed into the dashboard: the configured SLAs from slaprobe_sla_threshold, the experience bands'
// edges from slaprobe_experience_band_* (collector.BandCollector), and the TTFT limit of the max safe
// queue depth from slaprobe_capacity_max_safe_ttft_seconds. Change slaprobe, and the line moves with it.
// Such a series is named "SLA …" or "line: …" and drawn dashed (refLine).

// bandEdge is one edge of an experience band: bandEdge("itl_seconds", "good") is the 20 ms "instant"
// line, the edge between good and acceptable.
func bandEdge(metric, band string) string {
	return fmt.Sprintf("max(slaprobe_experience_band_%s{band=%q})", metric, band)
}

// The reports' reference lines, as queries of the band gauges.
var (
	lineITLInstant = bandEdge("itl_seconds", "good")       // 20 ms: streaming stops feeling instant
	lineITLCeiling = bandEdge("itl_seconds", "acceptable") // 70 ms: memory-bandwidth ceiling of large MoE models
	lineReadPace   = bandEdge("decode_tokens_per_second", "acceptable")
)

// labelled tags an expression's series with label=value, so several can share one chart.
func labelled(expr, label, value string) string {
	return fmt.Sprintf(`label_replace(%s, %q, %q, "", "")`, expr, label, value)
}

// lineAt is a horizontal line for a chart whose x axis is xLabel: the value of th (an expression with
// one series) at every x where data has a point, as series named name in seriesLabel.
func lineAt(data, xLabel, th, seriesLabel, name string) string {
	return labelled(fmt.Sprintf("max by (%s) (%s) * 0\n+ on () group_left ()\n%s", xLabel, data, th), seriesLabel, name)
}

// ---------------------------------------------------------------------------------------------------
// Panels

func bottomLegend(calcs ...string) Legend {
	if calcs == nil {
		calcs = []string{}
	}
	mode := "list"
	if len(calcs) > 0 {
		mode = "table"
	}
	return Legend{Calcs: calcs, DisplayMode: mode, Placement: "bottom", ShowLegend: true}
}

// timeseries is a line graph. th colours nothing on the graph itself; a line is a series of its own
// (see refLine and thresholdLines).
func timeseries(title, description, unit string, th *Thresholds, targets ...*Target) *Panel {
	if th == nil {
		th = plainSteps
	}
	span := true
	return &Panel{
		Type: "timeseries", Title: title, Description: description, Targets: targets,
		FieldConfig: &FieldConfig{
			Defaults: FieldDefaults{
				Unit: unit, Min: num(0), Color: &FieldColor{Mode: "palette-classic"},
				Thresholds: th, Mappings: []ValueMapping{},
				Custom: &Custom{
					DrawStyle: "line", LineWidth: 1, FillOpacity: 0, ShowPoints: "never", SpanNulls: &span,
					AxisPlacement: "auto", ScaleDistribution: &ScaleDist{Type: "linear"},
					Stacking:        &Stacking{Group: "A", Mode: "none"},
					ThresholdsStyle: &ThresholdsStyle{Mode: "off"},
				},
			},
			Overrides: []Override{},
		},
		Options: TimeseriesOptions{Legend: bottomLegend("lastNotNull", "max"), Tooltip: Tooltip{Mode: "multi", Sort: "desc"}},
	}
}

// thresholdLines draws the series whose legend starts with "SLA " (configured thresholds) as dashed
// red lines.
func (p *Panel) thresholdLines() *Panel { return p.refLine("^SLA .*", colorThreshold) }

// refLine draws the series whose display name matches re as dashed reference lines of color, without
// points or fill.
func (p *Panel) refLine(re, color string) *Panel {
	p.FieldConfig.Overrides = append(p.FieldConfig.Overrides, Override{
		Matcher: Matcher{ID: "byRegexp", Options: re},
		Properties: []Property{
			{ID: "custom.lineStyle", Value: map[string]any{"fill": "dash", "dash": []int{10, 10}}},
			{ID: "custom.lineWidth", Value: 2},
			{ID: "custom.showPoints", Value: "never"},
			{ID: "custom.fillOpacity", Value: 0},
			{ID: "color", Value: FieldColor{Mode: "fixed", FixedColor: color}},
		},
	})
	return p
}

// override sets properties of the field named name.
func (p *Panel) override(name string, props ...Property) *Panel {
	p.FieldConfig.Overrides = append(p.FieldConfig.Overrides, Override{Matcher: Matcher{ID: "byName", Options: name}, Properties: props})
	return p
}

// shade fills the area between the series named upper and the one named lower: a band, as the reports
// draw a range.
func (p *Panel) shade(upper, lower, color string) *Panel {
	fixed := Property{ID: "color", Value: FieldColor{Mode: "fixed", FixedColor: color}}
	p.override(upper, Property{ID: "custom.fillBelowTo", Value: lower}, Property{ID: "custom.fillOpacity", Value: 25}, fixed)
	return p.override(lower, fixed)
}

// dotted draws the series whose display name matches re as thin dotted lines.
func (p *Panel) dotted(re string) *Panel {
	p.FieldConfig.Overrides = append(p.FieldConfig.Overrides, Override{
		Matcher: Matcher{ID: "byRegexp", Options: re},
		Properties: []Property{
			{ID: "custom.lineStyle", Value: map[string]any{"fill": "dot", "dash": []int{0, 10}}},
		},
	})
	return p
}

// bars turns a timeseries into bars of counts per interval, at least minInterval apart.
func (p *Panel) bars(minInterval string) *Panel {
	c := p.FieldConfig.Defaults.Custom
	c.DrawStyle, c.FillOpacity, c.Stacking = "bars", 80, &Stacking{Group: "A", Mode: "normal"}
	p.Interval = minInterval
	p.Options = TimeseriesOptions{Legend: bottomLegend("sum"), Tooltip: Tooltip{Mode: "multi", Sort: "desc"}}
	return p
}

// stat shows one value per series, coloured by th.
func stat(title, description, unit string, th *Thresholds, targets ...*Target) *Panel {
	if th == nil {
		th = plainSteps
	}
	return &Panel{
		Type: "stat", Title: title, Description: description, Targets: targets,
		FieldConfig: &FieldConfig{
			Defaults:  FieldDefaults{Unit: unit, Color: &FieldColor{Mode: "thresholds"}, Thresholds: th, Mappings: []ValueMapping{}},
			Overrides: []Override{},
		},
		Options: StatOptions{
			ReduceOptions: ReduceOptions{Calcs: []string{"lastNotNull"}, Fields: ""},
			ColorMode:     "value", GraphMode: "none", JustifyMode: "auto", Orientation: "auto",
			TextMode: "value_and_name", WideLayout: true,
		},
	}
}

// mapValues adds value mappings ("1" → text/colour).
func (p *Panel) mapValues(m map[string]MappingValue) *Panel {
	p.FieldConfig.Defaults.Mappings = append(p.FieldConfig.Defaults.Mappings, ValueMapping{Type: "value", Options: m})
	return p
}

// bargauge shows one horizontal bar per series, coloured by th.
func bargauge(title, description, unit string, th *Thresholds, targets ...*Target) *Panel {
	if th == nil {
		th = plainSteps
	}
	return &Panel{
		Type: "bargauge", Title: title, Description: description, Targets: targets,
		FieldConfig: &FieldConfig{
			Defaults: FieldDefaults{
				Unit: unit, Min: num(0), Color: &FieldColor{Mode: "thresholds"}, Thresholds: th, Mappings: []ValueMapping{},
			},
			Overrides: []Override{},
		},
		Options: BarGaugeOptions{
			ReduceOptions: ReduceOptions{Calcs: []string{"lastNotNull"}, Fields: ""},
			DisplayMode:   "gradient", Orientation: "horizontal", ShowUnfilled: true, ValueMode: "color",
			NamePlacement: "auto", Sizing: "auto", MinVizHeight: 16, MinVizWidth: 8, MaxVizHeight: 300,
		},
	}
}

// table shows instant queries as rows; several queries are merged into one row per label set.
func table(title, description string, transformations []Transformation, targets ...*Target) *Panel {
	return &Panel{
		Type: "table", Title: title, Description: description, Targets: targets,
		FieldConfig: &FieldConfig{
			Defaults: FieldDefaults{
				Color: &FieldColor{Mode: "thresholds"}, Thresholds: plainSteps, Mappings: []ValueMapping{},
				Custom: &Custom{Align: "auto", CellOptions: &CellOptions{Type: "auto"}},
			},
			Overrides: []Override{},
		},
		Options: TableOptions{
			ShowHeader: true, CellHeight: "sm",
			Footer: TableFooter{Reducer: []string{"sum"}, Fields: []string{}},
		},
		Transformations: transformations,
	}
}

// column overrides one table column: display name, unit, colouring by thresholds, value mappings.
func (p *Panel) column(name, display, unit string, th *Thresholds, mappings []ValueMapping) *Panel {
	props := []Property{{ID: "displayName", Value: display}}
	if unit != "" {
		props = append(props, Property{ID: "unit", Value: unit})
	}
	if th != nil {
		props = append(props, Property{ID: "thresholds", Value: th})
	}
	if mappings != nil {
		props = append(props, Property{ID: "mappings", Value: mappings})
	}
	if th != nil || mappings != nil {
		props = append(props, Property{ID: "custom.cellOptions", Value: CellOptions{Type: "color-text"}})
	}
	p.FieldConfig.Overrides = append(p.FieldConfig.Overrides, Override{Matcher: Matcher{ID: "byName", Options: name}, Properties: props})
	return p
}

// Transformations.

// merge joins the tables of several instant queries into one row per label set.
func merge() Transformation { return Transformation{ID: "merge", Options: map[string]any{}} }

// organize hides and renames columns, and orders the ones named in order.
func organize(exclude []string, rename map[string]string, order []string) Transformation {
	ex := map[string]bool{}
	for _, e := range exclude {
		ex[e] = true
	}
	idx := map[string]int{}
	for i, o := range order {
		idx[o] = i
	}
	if rename == nil {
		rename = map[string]string{}
	}
	return Transformation{ID: "organize", Options: map[string]any{
		"excludeByName": ex, "indexByName": idx, "renameByName": rename,
	}}
}

// matrixBy turns an instant table (one row per series) into one row per value of the rowLabel and
// one numeric column per value of colLabel: the shape a bar chart with categories on the x axis needs.
// Rows are first sorted by sortLabel as a number, so the x axis runs 1, 2, 4, … 256 and not
// 1, 128, 16, … as strings would sort.
func matrixBy(rowLabel, colLabel, sortLabel string) []Transformation {
	return []Transformation{
		toNumber(sortLabel), sortAsc(sortLabel),
		{ID: "groupingToMatrix", Options: map[string]string{
			"columnField": colLabel, "rowField": rowLabel, "valueField": "Value", "emptyValue": "null",
		}},
	}
}

// matrixField is the name groupingToMatrix gives its first column.
func matrixField(rowLabel, colLabel string) string { return rowLabel + `\` + colLabel }

// barchart draws an instant query as grouped bars: rowLabel's values on the x axis (categories, in
// numeric order of sortLabel), one bar per value of colLabel. It is for counts per bucket; a curve
// against a number uses curve.
func barchart(title, description, unit string, rowLabel, colLabel, sortLabel string, target *Target) *Panel {
	th := plainSteps
	return &Panel{
		Type: "barchart", Title: title, Description: description, Targets: []*Target{target},
		FieldConfig: &FieldConfig{
			Defaults: FieldDefaults{
				Unit: unit, Min: num(0), Color: &FieldColor{Mode: "palette-classic"}, Thresholds: th,
				Mappings: []ValueMapping{},
				Custom: &Custom{
					LineWidth: 1, FillOpacity: 80, AxisPlacement: "auto", AxisLabel: "",
					ScaleDistribution: &ScaleDist{Type: "linear"},
					ThresholdsStyle:   &ThresholdsStyle{Mode: "off"},
				},
			},
			// The categories on the x axis are counts or depth ranges: no unit.
			Overrides: []Override{{
				Matcher:    Matcher{ID: "byName", Options: matrixField(rowLabel, colLabel)},
				Properties: []Property{{ID: "unit", Value: "none"}, {ID: "decimals", Value: 0}},
			}},
		},
		Options: BarChartOptions{
			XField: matrixField(rowLabel, colLabel), Orientation: "vertical",
			GroupWidth: 0.75, BarWidth: 0.95, ShowValue: "never", Stacking: "none",
			Legend: bottomLegend(), Tooltip: Tooltip{Mode: "multi", Sort: "none"},
		},
		Transformations: matrixBy(rowLabel, colLabel, sortLabel),
	}
}

// curve draws a table-format instant query as lines over a numeric x axis, in Grafana's trend panel
// (a graph whose x is an increasing number, not time and not a category): the values of xLabel,
// converted to numbers and sorted, are the x axis, titled xTitle; each value of seriesLabel is one line.
// Series named "line: …" or "SLA …" are drawn dashed (see refLine). When orderBy is set, lines are
// listed in the numeric order of that label (N=1, N=2, … N=16 and not N=1, N=16, N=2).
//
// The transformations: groupingToMatrix turns the table (one row per series) into one row per x and
// one column per line; the x column, still text, becomes a number and the rows are sorted by it, as the
// trend panel requires; it is renamed xTitle, which the x axis shows.
func curve(title, description, unit, xLabel, xTitle, seriesLabel, orderBy string, target *Target) *Panel {
	span := true
	x := matrixField(xLabel, seriesLabel)
	var tr []Transformation
	if orderBy != "" {
		tr = append(tr, toNumber(orderBy), sortAsc(orderBy))
	}
	tr = append(tr,
		Transformation{ID: "groupingToMatrix", Options: map[string]string{
			"columnField": seriesLabel, "rowField": xLabel, "valueField": "Value", "emptyValue": "null",
		}},
		toNumber(x), sortAsc(x),
		organize(nil, map[string]string{x: xTitle}, nil),
	)
	p := &Panel{
		Type: "trend", Title: title, Description: description, Targets: []*Target{target},
		FieldConfig: &FieldConfig{
			Defaults: FieldDefaults{
				Unit: unit, Min: num(0), Color: &FieldColor{Mode: "palette-classic"},
				Thresholds: plainSteps, Mappings: []ValueMapping{},
				Custom: &Custom{
					DrawStyle: "line", LineWidth: 2, FillOpacity: 0, ShowPoints: "always", PointSize: 6, SpanNulls: &span,
					AxisPlacement: "auto", ScaleDistribution: &ScaleDist{Type: "linear"},
					Stacking:        &Stacking{Group: "A", Mode: "none"},
					ThresholdsStyle: &ThresholdsStyle{Mode: "off"},
				},
			},
			Overrides: []Override{},
		},
		Options:         TrendOptions{XField: xTitle, Legend: bottomLegend(), Tooltip: Tooltip{Mode: "multi", Sort: "desc"}},
		Transformations: tr,
	}
	// The x axis: counts or token lengths, with its title.
	p.override(xTitle, Property{ID: "unit", Value: "none"}, Property{ID: "decimals", Value: 0},
		Property{ID: "custom.axisLabel", Value: xTitle})
	return p.refLine("^line: .*", colorThreshold).thresholdLines()
}

// toNumber converts a text field (a label) to a number.
func toNumber(field string) Transformation {
	return Transformation{ID: "convertFieldType", Options: map[string]any{
		"conversions": []map[string]string{{"targetField": field, "destinationType": "number"}},
		"fields":      map[string]any{},
	}}
}

// sortAsc sorts rows by field, ascending.
func sortAsc(field string) Transformation {
	return Transformation{ID: "sortBy", Options: map[string]any{
		"fields": map[string]any{},
		"sort":   []map[string]any{{"field": field, "desc": false}},
	}}
}

// mirrors records which report.html chart the panel stands for.
func (p *Panel) mirrors(chart string) *Panel { p.reportChart = chart; return p }

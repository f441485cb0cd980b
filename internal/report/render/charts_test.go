package render

import (
	"fmt"
	"html"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/svgchart"
)

func TestExplicitTicksAndOverlap(t *testing.T) {
	c := svgchart.Chart{ID: "t", Title: "t", X: nAxis("N", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}),
		Y:      svgchart.Axis{Label: "y", FromZero: true, Fmt: svgchart.TickPlain},
		Series: []svgchart.Series{{Name: "s", Color: "#000", Points: []svgchart.Point{{X: 1, Y: 1}, {X: 16, Y: 2}}}}}
	svg := string(c.SVG())
	// On a log axis 15 and 16 sit a few pixels apart: the later label is dropped.
	if strings.Contains(svg, `text-anchor="middle">15</text>`) && strings.Contains(svg, `text-anchor="middle">16</text>`) {
		t.Error("overlapping x tick labels were both drawn")
	}
	if !strings.Contains(svg, `text-anchor="middle">1</text>`) {
		t.Error("first tick label missing")
	}
}

func TestEmptyChart(t *testing.T) {
	c := svgchart.Chart{ID: "e", Title: "e", X: nAxis("N", nil), Y: svgchart.Axis{Label: "y"}, Empty: "nothing here"}
	if svg := string(c.SVG()); !strings.Contains(svg, "nothing here") {
		t.Error("empty chart has no message")
	}
	if c.LegendHTML() != "" {
		t.Error("empty chart has a legend")
	}
}

func TestLabelsAvoidLines(t *testing.T) {
	// A line hugging the right end of a threshold: its label must move.
	c := svgchart.Chart{ID: "l", Title: "l", X: nAxis("N", []float64{1, 32}), Y: svgchart.Axis{Label: "y", FromZero: true, Fmt: svgchart.TickPlain},
		Series: []svgchart.Series{{Name: "s", Color: "#000", Points: []svgchart.Point{{X: 1, Y: 5}, {X: 16, Y: 12}, {X: 32, Y: 21}}}},
		Refs:   []svgchart.RefLine{{Value: 20, Label: "20 ms instant", Color: "#080"}}}
	svg := string(c.SVG())
	m := regexp.MustCompile(`<text class="ref-label" x="([0-9.]+)" y="[0-9.]+" text-anchor="(\w+)"`).FindStringSubmatch(svg)
	if m == nil {
		t.Fatal("no reference label")
	}
	if m[2] == "end" {
		t.Errorf("label kept its default spot at the right end, across the line: %s", m[0])
	}
}

func TestNoFloatNoiseInHTML(t *testing.T) {
	html := renderHTML(t, Sample())
	if m := regexp.MustCompile(`>[^<]*\d\.\d{7,}[^<]*<`).FindString(html); m != "" {
		t.Errorf("unrounded number in the page: %s", m)
	}
}

func TestNColor(t *testing.T) {
	if a, b := nColor(0, 6), nColor(5, 6); a == b || !strings.HasPrefix(a, "#") || len(b) != 7 {
		t.Errorf("nColor = %s, %s", a, b)
	}
	if nColor(0, 1) == "" {
		t.Error("single level has no colour")
	}
}

var (
	refLabelRe = regexp.MustCompile(`<text class="ref-label" x="([0-9.-]+)" y="([0-9.-]+)" text-anchor="(\w+)" fill="[^"]*">([^<]*)</text>`)
	refLineRe  = regexp.MustCompile(`<line class="ref" x1="([0-9.-]+)" x2="([0-9.-]+)" y1="([0-9.-]+)" y2="([0-9.-]+)" stroke="([^"]*)"/>`)
	plotRe     = regexp.MustCompile(`(?s)<svg class="plot".*?</svg>`)
)

type svgLabel struct {
	text string
	b    svgchart.Box
}

type svgRef struct {
	x1, x2, y1, y2 float64
	color          string
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// parseRefs reads the reference labels (as the boxes the builder assumes
// for them) and the reference lines out of one SVG.
func parseRefs(t *testing.T, svg string) ([]svgLabel, []svgRef) {
	var labels []svgLabel
	for _, m := range refLabelRe.FindAllStringSubmatch(svg, -1) {
		text := html.UnescapeString(m[4])
		labels = append(labels, svgLabel{text, svgchart.LabelBox(num(t, m[1]), num(t, m[2]), m[3], text)})
	}
	var refs []svgRef
	for _, m := range refLineRe.FindAllStringSubmatch(svg, -1) {
		refs = append(refs, svgRef{num(t, m[1]), num(t, m[2]), num(t, m[3]), num(t, m[4]), m[5]})
	}
	return labels, refs
}

// labelProblems lists what a reader would trip over: two reference labels
// that overlap, a label across a reference line (a threshold or the
// capacity marker), and an ITL threshold within minRefGap of a TTFT/E2E one.
func labelProblems(t *testing.T, svg string) []string {
	var out []string
	labels, refs := parseRefs(t, svg)
	for i, a := range labels {
		for _, b := range labels[i+1:] {
			if a.b.Overlaps(b.b) {
				out = append(out, fmt.Sprintf("label %q overlaps label %q", a.text, b.text))
			}
		}
		for _, r := range refs {
			x0, x1 := math.Min(r.x1, r.x2), math.Max(r.x1, r.x2)
			y0, y1 := math.Min(r.y1, r.y2), math.Max(r.y1, r.y2)
			if x0 < a.b.X1 && a.b.X0 < x1 || x0 == x1 && x0 > a.b.X0 && x0 < a.b.X1 {
				if y0 < a.b.Y1 && a.b.Y0 < y1 || y0 == y1 && y0 > a.b.Y0 && y0 < a.b.Y1 {
					out = append(out, fmt.Sprintf("label %q lies across the %s line at x=%g..%g y=%g..%g", a.text, r.color, r.x1, r.x2, r.y1, r.y2))
				}
			}
		}
	}
	for i, a := range refs {
		for _, b := range refs[i+1:] {
			horizontal := a.y1 == a.y2 && b.y1 == b.y2
			if horizontal && (a.color == colorCapITL) != (b.color == colorCapITL) && math.Abs(a.y1-b.y1) < svgchart.MinRefGap {
				out = append(out, fmt.Sprintf("the %s and %s threshold lines are %.1f px apart", a.color, b.color, math.Abs(a.y1-b.y1)))
			}
		}
	}
	return out
}

func checkLabels(t *testing.T, name, svg string) {
	t.Helper()
	for _, p := range labelProblems(t, svg) {
		t.Errorf("%s: %s", name, p)
	}
}
func TestReportLabelsDoNotOverlap(t *testing.T) {
	page := renderHTML(t, Sample())
	svgs := plotRe.FindAllString(page, -1)
	if len(svgs) < 10 {
		t.Fatalf("only %d plots", len(svgs))
	}
	labelled := 0
	for _, svg := range svgs {
		id := regexp.MustCompile(`aria-labelledby="([^"]+)"`).FindStringSubmatch(svg)[1]
		if l, _ := parseRefs(t, svg); len(l) > 0 {
			labelled++
		}
		checkLabels(t, id, svg)
	}
	if labelled < 6 {
		t.Errorf("only %d plots have reference labels: the parser misses them", labelled)
	}
}

// Every capacity chart, under many threshold combinations: no label on a
// label or a line, and the ITL and TTFT thresholds never on one another.
func TestCapacityChartsReadTheSameWay(t *testing.T) {
	r := Sample()
	charts := 0
	for _, u := range r.Capacity.UseCases {
		base := *r.ScenarioNamed(u.Scenario)
		for _, ttft := range []float64{0, 2, 5, 8, 10, 12, 20, 30} {
			for _, dec := range []float64{0, 5, 10, 15, 20, 30, 50} {
				for _, itl := range []float64{0, 0.05} {
					s := base
					s.Thresholds.TTFT = time.Duration(ttft * float64(time.Second))
					s.Thresholds.MinDecode = dec
					s.Thresholds.ITL = time.Duration(itl * float64(time.Second))
					if ttft == 0 && s.Thresholds.E2E == 0 {
						continue
					}
					name := fmt.Sprintf("%s ttft=%g decode=%g itl=%g", u.Scenario, ttft, dec, itl)
					svg, _ := capacityChart("c", &s, u, nil)
					checkLabels(t, name, string(svg))
					charts++
					// One rule: the time axis is log on every capacity chart.
					if !strings.Contains(string(svg), "(log scale)</text>") {
						t.Errorf("%s: right axis is not the log scale", name)
					}
				}
			}
		}
	}
	t.Logf("%d capacity charts checked", charts)
}

// The check itself must see each problem when it is there.
func TestLabelProblemsAreSeen(t *testing.T) {
	svg := `<svg class="plot"><line class="ref" x1="64.0" x2="576.0" y1="100.0" y2="100.0" stroke="#0072B2"/>` +
		`<line class="ref" x1="64.0" x2="576.0" y1="108.0" y2="108.0" stroke="#D55E00"/>` +
		`<line class="ref" x1="300.0" x2="300.0" y1="280.0" y2="14.0" stroke="#3d3d3d"/>` +
		`<text class="ref-label" x="570.0" y="95.0" text-anchor="end" fill="#0072B2">decode ≥ 10 tok/s</text>` +
		`<text class="ref-label" x="570.0" y="103.0" text-anchor="end" fill="#D55E00">TTFT ≤ 10 s</text>` +
		`<text class="ref-label" x="250.0" y="60.0" text-anchor="start" fill="#3d3d3d">capacity 256+</text></svg>`
	got := strings.Join(labelProblems(t, svg), "\n")
	for _, want := range []string{
		`label "decode ≥ 10 tok/s" overlaps label "TTFT ≤ 10 s"`,
		`label "TTFT ≤ 10 s" lies across the #0072B2 line`,
		`label "capacity 256+" lies across the #3d3d3d line`,
		`the #0072B2 and #D55E00 threshold lines are 8.0 px apart`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q; got:\n%s", want, got)
		}
	}
}

package render

import (
	"fmt"
	"html/template"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/slo"
	"github.com/slaprobe/slaprobe/internal/svgchart"
	"github.com/slaprobe/slaprobe/internal/sweep"
)

// Okabe–Ito colours (safe for colour-blind readers), darkest first, plus
// markers so lines stay apart in grey print.
var scenarioColors = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#3d3d3d", "#8c564b"}

const (
	colorTTFTLine    = "#c0392b"
	colorITLInstant  = "#1b7f3b"
	colorITLCeiling  = "#b03a2e"
	colorRange       = "#0072B2"
	colorCapITL      = "#0072B2"
	colorCapTTFT     = "#D55E00"
	colorCapE2E      = "#8e44ad"
	colorCapacityMrk = "#3d3d3d"
)

// nColor picks a sequential colour for the i-th of n concurrency levels
// (light to dark reads as "more users"), from a dark slice of viridis.
func nColor(i, n int) string {
	stops := [][3]float64{{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}}
	t := 0.0
	if n > 1 {
		t = float64(i) / float64(n-1)
	}
	t = 1 - t // N=1 green, largest N dark purple
	pos := t * float64(len(stops)-1)
	k := int(math.Floor(pos))
	if k >= len(stops)-1 {
		k = len(stops) - 2
	}
	f := pos - float64(k)
	var c [3]int
	for j := range c {
		c[j] = int(math.Round(stops[k][j] + f*(stops[k+1][j]-stops[k][j])))
	}
	return fmt.Sprintf("#%02x%02x%02x", c[0], c[1], c[2])
}

// The experience bands (bands.go) in the units each chart plots.
var (
	bandsDecode = scaled(slo.DecodeBands, 1)
	bandsITLms  = scaled(slo.ITLBands, 1000)
	bandsTTFT   = scaled(slo.TTFTBands, 1)
	bandsEffPct = scaled(slo.EfficiencyBands, 100)
)

// figure is one panel of the page.
type figure struct {
	Chart       string // data-chart value
	DOMID       string // element id
	Title       string
	How         string // "how to read" note
	Legend      template.HTML
	SVG         template.HTML
	Findings    []string
	Tiles       []tile
	Table       *table
	Placeholder string // set when the data was not measured
	Scenario    string // capacity figures: the use case
	Wide        bool   // spans both grid columns
	TileClass   string // "compact", "pair": tile layout inside the figure
	Split       bool   // wide, with the text beside the chart (fills an odd row)
}

type tile struct {
	// Change is the tile's change against a comparison's baseline;
	// ChangeClass "worse" or "better" when it is significant.
	Change, ChangeClass            string
	Label, Value, Unit, Sub, Extra string
	Level                          string // experience level class, optional
}

type table struct {
	Class    string
	Caption  string
	Groups   []colGroup // optional first header row
	Head     []string
	MDHead   []string // Markdown header when it differs from Head
	Rows     [][]string
	RowClass []string // optional class per row ("busy")
	Numeric  []bool   // right-align column
}

// groupStart reports whether column i opens a new header group.
func (t *table) groupStart(i int) bool {
	n := 0
	for _, g := range t.Groups {
		if n == i {
			return true
		}
		n += g.Span
	}
	return false
}

type colGroup struct {
	Label string
	Span  int
}

// slugify keeps [a-z0-9-] so a scenario name can be part of an id.
func slugify(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
			dash = false
		default:
			if !dash && b.Len() > 0 {
				b.WriteByte('-')
				dash = true
			}
		}
	}
	out := strings.Trim(b.String(), "-")
	if out == "" {
		out = "scenario"
	}
	return out
}

func sortedSteps(steps []report.Step) []report.Step {
	out := append([]report.Step(nil), steps...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Concurrency < out[j].Concurrency })
	return out
}

// okSteps drops steps with no successful request: their statistics are empty.
func okSteps(steps []report.Step) []report.Step {
	var out []report.Step
	for _, s := range sortedSteps(steps) {
		if s.RequestsOK > 0 {
			out = append(out, s)
		}
	}
	return out
}

// chartScenarios are the scenarios drawn on the sweep charts: everything
// but the use-case family, which has its own capacity figures (all of them
// when nothing else has data).
func chartScenarios(r *report.Report) []int {
	var idx, all []int
	for i, s := range r.Scenarios {
		if len(s.ClosedLoop) == 0 && len(s.Burst) == 0 {
			continue
		}
		all = append(all, i)
		if s.Family != report.FamilyUseCase {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return all
	}
	return idx
}

func scenarioSeries(r *report.Report, i int) svgchart.Series {
	n := len(scenarioColors)
	return svgchart.Series{Name: r.Scenarios[i].Name, Color: scenarioColors[i%n], Marker: i % 4, Dashed: i >= n}
}

func fmtN(v float64) string { return strconv.Itoa(int(math.Round(v))) }

func nAxis(label string, ns []float64) svgchart.Axis {
	return svgchart.Axis{Label: label, Log: true, Ticks: ns, Fmt: fmtN}
}

// ladderOf collects the N values measured in a mode across the scenarios.
func ladderOf(r *report.Report, idx []int, m sweep.Mode) []float64 {
	seen := map[int]bool{}
	var out []float64
	add := func(s *report.Scenario) {
		if s == nil {
			return
		}
		for _, st := range s.Steps(m) {
			if !seen[st.Concurrency] {
				seen[st.Concurrency] = true
				out = append(out, float64(st.Concurrency))
			}
		}
	}
	for _, i := range idx {
		add(&r.Scenarios[i])
		add(baseScenario(r, &r.Scenarios[i]))
	}
	sort.Float64s(out)
	return out
}

// autoLog picks a log axis when the values span more than 40×.
func autoLog(vals []float64) bool { return spread(vals) > 40 }

func spread(vals []float64) float64 {
	lo, hi := math.Inf(1), 0.0
	for _, v := range vals {
		if v > 0 {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if hi == 0 {
		return 1
	}
	return hi / lo
}

// metricSeries builds one line per scenario from a step metric.
func metricSeries(r *report.Report, idx []int, m sweep.Mode, get func(report.Step) (float64, bool), tip func(float64) string) ([]svgchart.Series, []float64) {
	var out []svgchart.Series
	var vals []float64
	for _, i := range idx {
		s := scenarioSeries(r, i)
		for _, st := range okSteps(r.Scenarios[i].Steps(m)) {
			v, ok := get(st)
			if !ok || !finite(v) {
				continue
			}
			vals = append(vals, v)
			s.Points = append(s.Points, svgchart.Point{X: float64(st.Concurrency), Y: v, Suspect: st.StartedBusy(),
				Tip: fmt.Sprintf("%s · %s N=%d · %s%s", r.Scenarios[i].Name, modeLabel(m), st.Concurrency, tip(v), suspectTip(st))})
		}
		if len(s.Points) > 0 {
			out = append(out, s)
		}
		// A comparison draws the baseline of the same scenario beside it.
		if b := baseScenario(r, &r.Scenarios[i]); b != nil {
			bs := baseOf(scenarioSeries(r, i))
			for _, st := range okSteps(b.Steps(m)) {
				v, ok := get(st)
				if !ok || !finite(v) {
					continue
				}
				vals = append(vals, v)
				bs.Points = append(bs.Points, svgchart.Point{X: float64(st.Concurrency), Y: v, Suspect: st.StartedBusy(),
					Tip: fmt.Sprintf("base · %s · %s N=%d · %s%s", b.Name, modeLabel(m), st.Concurrency, tip(v), suspectTip(st))})
			}
			if len(bs.Points) > 0 {
				out = append(out, bs)
			}
		}
	}
	return out, vals
}

// extreme finds the min or max point over the series.
type located struct {
	v        float64
	scenario string
	n        int
	ok       bool
	step     *report.Step // the step measured, where known
}

// Points of steps that started on a busy engine are skipped: findings
// quote only trustworthy steps.
func extreme(ss []svgchart.Series, max bool) located {
	var best located
	for _, s := range ss {
		if s.Faint {
			continue // a comparison's baseline
		}
		for _, p := range s.Points {
			if p.Suspect {
				continue
			}
			if !best.ok || (max && p.Y > best.v) || (!max && p.Y < best.v) {
				best = located{v: p.Y, scenario: s.Name, n: int(p.X), ok: true}
			}
		}
	}
	return best
}

// suspectNote is the legend's entry for the points of steps that started
// on a busy engine.
const suspectNote = "started on a busy engine: suspect, not used for capacity or the headline"

// draw renders c into f.
func draw(c *svgchart.Chart, f *figure) {
	c.SuspectNote = suspectNote
	f.SVG = c.SVG()
	f.Legend = c.LegendHTML()
}

func newFigure(name, title, how string) figure {
	return figure{Chart: name, DOMID: "chart-" + name, Title: title, How: how}
}

// buildFigures returns the page's figures grouped by section.
func buildSections(r *report.Report) []section {
	if isHeadroomOnly(r) {
		return []section{headroomSection(r)}
	}
	idx := chartScenarios(r)
	th := r.Config.Thresholds
	if th.MaxSafeQueueTTFTSeconds == 0 && th.ITLInstantSeconds == 0 && th.ITLCeilingSeconds == 0 {
		th = report.DefaultThresholds()
	}
	if th.MaxSafeQueueStat == "" {
		th.MaxSafeQueueStat = sweep.StatMean
	}
	lines := byNCharts(th)
	closedN := ladderOf(r, idx, sweep.ModeClosedLoop)
	burstN := ladderOf(r, idx, sweep.ModeBurst)

	closed := section{ID: "closed-loop", Title: "When am I the fastest?",
		Intro: "Closed loop: the client keeps exactly N requests in flight and starts the next one as soon as one finishes, so these charts show what each user gets while N users share the server at a steady pace. " +
			closedQueueText(closedQueueWait(r, idx))}
	closed.Figures = append(closed.Figures,
		lines[slo.ChartDecodeVsConcurrency].figure(r, idx, closedN),
		lines[slo.ChartITLVsConcurrency].figure(r, idx, closedN),
		lines[slo.ChartScalingEfficiency].figure(r, idx, closedN),
		figDecodeRange(r, idx, closedN),
		figTTFTRange(r, idx, closedN),
	)

	burst := section{ID: "burst", Title: "When should I scale up?",
		Intro: "Burst: N requests arrive at the same instant. The engine starts what fits and queues the rest, so time to first token grows with the queue. Use these charts for SLA and autoscaling decisions."}
	burst.Figures = append(burst.Figures,
		lines[slo.ChartTTFTVsQueueDepth].figure(r, idx, burstN),
		lines[slo.ChartITLVsQueueDepth].figure(r, idx, burstN),
		lines[slo.ChartDecodeVsQueueDepth].figure(r, idx, burstN),
		figMaxSafeQueue(r, th),
	)

	tput := section{ID: "throughput", Title: "How much can the server produce?",
		Intro: "System throughput counts output tokens per second summed over every stream in the measured window. Prompt tokens are not counted."}
	tput.Figures = append(tput.Figures, figSystem(r, idx, closedN, burstN), figTokensPerHour(r, idx))

	capSec := section{ID: "capacity", Title: "How many users per use case?",
		Intro: "Each use case is judged against its own thresholds. The capacity is the largest N that meets every threshold. A value between two measured points is interpolated and marked “~”. A value with “+” means every N tested passed."}
	capSec.Figures = append(capSec.Figures, figUseCaseTable(r))
	if len(r.Capacity.On) > 0 {
		capSec.Figures = append(capSec.Figures, figCapacityOnTable(r))
	}
	capSec.Figures = append(capSec.Figures, figCapacities(r)...)

	tech := section{ID: "technical", Title: "Under the hood",
		Intro: "Where the time goes: queueing inside the engine, prefill speed as the context grows, and what the GPUs draw while they work. Each line is one closed-loop concurrency level."}
	tech.Figures = append(tech.Figures, figQueueWait(r, idx), figPrefill(r, idx), figPower(r, idx))

	out := []section{closed, burst, tput, capSec}
	if figs := figConversations(r); len(figs) > 0 {
		conv := section{ID: "conversations", Title: "How many conversations?",
			Intro: "A conversation scenario holds N conversations in flight, each sending its turns one after the other. Its follow-ups should find their conversation in the prefix cache; the capacity in conversations is the largest N whose follow-ups keep their TTFT within the threshold and keep hitting the cache."}
		if len(r.Capacity.Conversations) > 0 {
			f := newFigure(slo.ChartConversationCapacity, "Capacity in concurrent conversations",
				"The largest closed-loop N of conversations in flight that meets every limit: the follow-ups’ TTFT statistic within the scenario’s threshold, and the share of follow-ups hitting the prefix cache at or above the configured share (sweep.capacity.conversation_hit_share, 90 % by default). Between two measured steps each limit is interpolated linearly, as for every capacity.")
			f.Wide = true
			t := conversationTable(r)
			f.Table = &t
			conv.Figures = append(conv.Figures, f)
		}
		conv.Figures = append(conv.Figures, figs...)
		if t := conversationStepsTable(r); len(t.Rows) > 0 {
			f := newFigure(slo.ChartConversationSteps, "Follow-ups by concurrent conversations",
				"Per closed-loop step: the follow-ups’ time to first token, the cold priming turns’ TTFT, and how the follow-ups found their conversation in the prefix cache (hit: at least 90 % of what the engine had seen of it came from the cache; miss: under 10 %; unknown: the server reported no cached tokens).")
			f.Wide = true
			f.Table = &t
			conv.Figures = append(conv.Figures, f)
		}
		out = append(out, conv)
	}
	out = append(out, tech)
	if r.Headroom != nil {
		out = append(out, headroomSection(r))
	}
	for i := range out {
		balance(out[i].Figures)
	}
	return out
}

// balance turns the last half-width figure of a section into a full-width
// one with its text beside the chart when it would otherwise sit alone.
func balance(figs []figure) {
	run := 0
	last := -1
	for i := range figs {
		if figs[i].Wide {
			if run%2 == 1 {
				split(&figs[last])
			}
			run = 0
			continue
		}
		run++
		last = i
	}
	if run%2 == 1 {
		split(&figs[last])
	}
}

func split(f *figure) {
	f.Wide, f.Split = true, true
}

type section struct {
	ID, Title, Intro string
	Figures          []figure
}

// rangeBand builds a band from the best to the worst scenario at each N.
func rangeBand(r *report.Report, idx []int, get func(report.Step) float64, unit func(float64) string) (svgchart.Area, []string) {
	byN := map[int][]located{}
	for _, i := range idx {
		for _, st := range okSteps(r.Scenarios[i].ClosedLoop) {
			if v := get(st); v > 0 && finite(v) {
				st := st
				byN[st.Concurrency] = append(byN[st.Concurrency], located{v, r.Scenarios[i].Name, st.Concurrency, true, &st})
			}
		}
	}
	var ns []int
	for n := range byN {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	a := svgchart.Area{Name: "best → worst scenario", Color: colorRange}
	var notes []string
	for _, n := range ns {
		pts := byN[n]
		sort.SliceStable(pts, func(i, j int) bool { return pts[i].v < pts[j].v })
		lo, hi := pts[0], pts[len(pts)-1]
		a.Hi = append(a.Hi, svgchart.Point{X: float64(n), Y: hi.v, Suspect: hi.step.StartedBusy(),
			Tip: fmt.Sprintf("N=%d · %s: %s%s", n, hi.scenario, unit(hi.v), suspectTip(*hi.step))})
		a.Lo = append(a.Lo, svgchart.Point{X: float64(n), Y: lo.v, Suspect: lo.step.StartedBusy(),
			Tip: fmt.Sprintf("N=%d · %s: %s%s", n, lo.scenario, unit(lo.v), suspectTip(*lo.step))})
		notes = []string{fmt.Sprintf("At N=%d users get between %s (%s) and %s (%s), depending on context length.",
			n, unit(lo.v), lo.scenario, unit(hi.v), hi.scenario)}
	}
	return a, notes
}

func figDecodeRange(r *report.Report, idx []int, ns []float64) figure {
	f := newFigure(slo.ChartDecodeRange, "Per-user throughput range",
		"The shaded band runs from the best scenario (usually the shortest context) to the worst at each N. A narrow band means context length hardly changes what a user gets; a wide one means long prompts pay a large decode penalty.")
	get := func(s report.Step) float64 { return s.Decode.Mean }
	unit := func(v float64) string { return fmtRate(v) + " tok/s" }
	a, notes := rangeBand(r, idx, get, unit)
	c := svgchart.Chart{ID: f.DOMID, Title: f.Title, X: nAxis("concurrent requests (N)", ns),
		Y: svgchart.Axis{Label: "decode speed per user (tok/s)", FromZero: true, Fmt: svgchart.TickRate}, Bands: bandsDecode, Series: baseBand(r, idx, get, unit)}
	if len(a.Hi) > 0 {
		c.Areas = []svgchart.Area{a}
	}
	draw(&c, &f)
	f.Findings = notes
	return f
}

// queueWait is the longest mean engine queue wait of the closed-loop steps.
type queueWait struct {
	located
	measured bool // some step carried a queue wait (the engine has the histogram)
}

func closedQueueWait(r *report.Report, idx []int) queueWait {
	var q queueWait
	for _, i := range idx {
		for _, st := range okSteps(r.Scenarios[i].ClosedLoop) {
			if st.QueueWaitSeconds == nil || !finite(*st.QueueWaitSeconds) {
				continue
			}
			q.measured = true
			if v := *st.QueueWaitSeconds; !q.ok || v > q.v {
				q.located = located{v: v, scenario: r.Scenarios[i].Name, n: st.Concurrency, ok: true}
			}
		}
	}
	return q
}

// closedQueueText says what the measured queue wait was, so the method text
// never claims a closed loop queues nothing when the engine says it did:
// the client keeps N in flight, but the engine may still hold some of them
// back when N exceeds what it runs at once.
func closedQueueText(q queueWait) string {
	switch {
	case !q.measured:
		return "The engine reported no queue time, so TTFT here may include time a request waited in the engine’s queue."
	case q.v <= 0:
		return "The engine’s queue-time histogram shows no queue wait at any step, so TTFT here is scheduling and prefill."
	default:
		return fmt.Sprintf("The engine can still queue some of them when N exceeds what it runs at once: its mean queue wait reaches %s (%s, N=%d), and that wait is part of TTFT here. The queue wait chart under “Under the hood” and the tables show it for every step.",
			fmtSeconds(q.v), q.scenario, q.n)
	}
}

func figTTFTRange(r *report.Report, idx []int, ns []float64) figure {
	f := newFigure(slo.ChartTTFTRange, "Time to first token range",
		"The band runs from the quickest scenario to the slowest at each N. TTFT is prefill plus any time the engine kept the request in its queue, so the top edge is usually the longest context. Under 0.5 s feels instant; 0.5–2 s responsive.")
	get := func(s report.Step) float64 { return s.TTFT.Mean }
	a, notes := rangeBand(r, idx, get, fmtSeconds)
	bb := baseBand(r, idx, get, fmtSeconds)
	switch q := closedQueueWait(r, idx); {
	case q.measured && q.v > 0:
		notes = append(notes, fmt.Sprintf("Measured engine queue wait, part of these TTFTs: up to %s (%s, N=%d).", fmtSeconds(q.v), q.scenario, q.n))
	case q.measured:
		notes = append(notes, "The engine measured no queue wait: these TTFTs are scheduling and prefill.")
	}
	var vals []float64
	for _, p := range append(append([]svgchart.Point(nil), a.Hi...), a.Lo...) {
		vals = append(vals, p.Y)
	}
	for _, s := range bb {
		for _, p := range s.Points {
			vals = append(vals, p.Y)
		}
	}
	c := svgchart.Chart{ID: f.DOMID, Title: f.Title, X: nAxis("concurrent requests (N)", ns),
		Y: svgchart.Axis{Label: "time to first token", Log: autoLog(vals), FromZero: true, Fmt: svgchart.TickSeconds}, Bands: bandsTTFT, Series: bb}
	if len(a.Hi) > 0 {
		c.Areas = []svgchart.Area{a}
	}
	draw(&c, &f)
	f.Findings = notes
	return f
}

func figMaxSafeQueue(r *report.Report, th report.ReferenceLines) figure {
	f := newFigure(slo.ChartMaxSafeQueue, "Max safe queue depth",
		"The largest burst each scenario absorbs while TTFT stays within the limit. Size autoscaling or admission control so that no more than this many requests wait at once.")
	f.TileClass = "pair"
	for _, q := range r.Capacity.MaxSafeQueue {
		stat := q.Stat
		if stat == "" {
			stat = th.MaxSafeQueueStat
		}
		t := tile{Label: q.Scenario, Value: fmtBound(q.Bound), Unit: "requests",
			Sub:   fmt.Sprintf("TTFT %s ≤ %s", stat, fmtSecondsShort(q.ThresholdSeconds)),
			Extra: fmt.Sprintf("burst tested up to N=%d", q.MaxTested)}
		if q.Approximate {
			t.Extra += "; interpolated"
		}
		if c := r.Comparison.CapacityOf(report.CapacityMaxSafeQueue, q.Scenario); c != nil {
			t.Change = capacityChangeText(c)
			if c.Significant() {
				t.ChangeClass = c.Verdict
			}
		}
		f.Tiles = append(f.Tiles, t)
	}
	if c := r.Comparison; c != nil {
		for _, cc := range c.Capacity {
			if cc.Kind == report.CapacityMaxSafeQueue && cc.Presence == report.OnlyInBase {
				f.Tiles = append(f.Tiles, tile{Label: cc.Scenario, Value: "–", Sub: "not measured in this run", Change: capacityChangeText(&cc)})
			}
		}
	}
	if len(f.Tiles) == 0 {
		f.Placeholder = "No burst sweep was run, so the max safe queue depth was not measured."
	}
	return f
}

func figSystem(r *report.Report, idx []int, closedN, burstN []float64) figure {
	f := newFigure(slo.ChartSystemThroughput, "System throughput vs concurrency",
		"Output tokens per second summed over all streams. Solid lines are closed-loop steps, dashed lines the same scenario under burst load. The curve flattens where the server runs out of memory bandwidth or KV cache.")
	get := func(s report.Step) (float64, bool) { return s.SystemTokensPerSecond, s.SystemTokensPerSecond > 0 }
	tip := func(v float64) string { return fmtRate(v) + " tok/s (" + fmtBig(v*3600) + " tokens/h)" }
	ss, _ := metricSeries(r, idx, sweep.ModeClosedLoop, get, tip)
	bs, _ := metricSeries(r, idx, sweep.ModeBurst, get, tip)
	for i := range bs {
		bs[i].Dashed = true
		if bs[i].Faint {
			bs[i].Name = strings.TrimSuffix(bs[i].Name, baseSuffix) + " (burst)" + baseSuffix
		} else {
			bs[i].Name += " (burst)"
		}
	}
	all := append(ss, bs...)
	ns := append(append([]float64(nil), closedN...), burstN...)
	sort.Float64s(ns)
	ns = dedupe(ns)
	c := svgchart.Chart{ID: f.DOMID, Title: f.Title, X: nAxis("concurrent requests (N)", ns),
		Y: svgchart.Axis{Label: "system throughput (tok/s)", FromZero: true, Fmt: svgchart.TickRate}, Series: all}
	draw(&c, &f)
	h := r.Headline
	if m := h.MaxSystemThroughput; m != nil {
		if m.Mode == sweep.ModeBurst {
			f.Findings = append(f.Findings, fmt.Sprintf("Peak: %s tok/s (%s). No closed-loop step ran, so this is a burst draining its queue, not a rate the server was shown to sustain.",
				fmtRate(m.Value), where(m)))
		} else {
			f.Findings = append(f.Findings, fmt.Sprintf("Highest sustained throughput: %s tok/s (%s), about %s tokens per hour.",
				fmtRate(m.Value), where(m), fmtBig(m.Value*3600)))
			// Bursts can briefly beat it: say so, since the dashed lines show it.
			if b := extreme(bs, true); b.ok && b.v > m.Value {
				f.Findings = append(f.Findings, fmt.Sprintf("A burst briefly reaches %s tok/s (%s, N=%d) while the engine works through its queue; that is not a rate it keeps up.",
					fmtRate(b.v), strings.TrimSuffix(b.scenario, " (burst)"), b.n))
			}
		}
	}
	return f
}

func dedupe(v []float64) []float64 {
	var out []float64
	for i, x := range v {
		if i == 0 || x != v[i-1] {
			out = append(out, x)
		}
	}
	return out
}

func figTokensPerHour(r *report.Report, idx []int) figure {
	f := newFigure(slo.ChartTokensPerHour, "Tokens per hour",
		"System throughput × 3,600 for each closed-loop step, and the best of them (“at” names its N): a rate the server kept up for a whole step. Use it to size batch jobs such as document processing or synthetic data.")
	t := tokensPerHourTable(r, idx)
	if len(t.Rows) == 0 {
		f.Placeholder = "No throughput was measured."
	} else {
		f.Table = &t
	}
	return f
}

// tokensPerHourTable: one row per scenario, one column per closed-loop N,
// plus the peak over both modes.
func tokensPerHourTable(r *report.Report, idx []int) table {
	ns := ladderOf(r, idx, sweep.ModeClosedLoop)
	t := table{Head: []string{"scenario"}, Numeric: []bool{false}}
	for _, n := range ns {
		t.Head = append(t.Head, "N="+fmtN(n))
		t.Numeric = append(t.Numeric, true)
	}
	t.Head = append(t.Head, "peak tokens/h", "at")
	t.Numeric = append(t.Numeric, true, false)
	for _, i := range idx {
		s := &r.Scenarios[i]
		row := []string{s.Name}
		byN := map[int]report.Step{}
		for _, st := range okSteps(s.ClosedLoop) {
			byN[st.Concurrency] = st
		}
		for _, n := range ns {
			if st, ok := byN[int(n)]; ok {
				row = append(row, fmtBig(st.TokensPerHour))
			} else {
				row = append(row, "–")
			}
		}
		// The peak is sustained: the best closed-loop step; a burst only
		// when the scenario ran no closed loop (its "at" cell says burst).
		// Busy steps are left out, as in the headline.
		var best *report.Step
		var bestMode sweep.Mode
		for _, m := range s.Modes() {
			if best != nil {
				break
			}
			for _, st := range okSteps(m.Steps) {
				if !st.StartedBusy() && (best == nil || st.TokensPerHour > best.TokensPerHour) {
					st := st
					best, bestMode = &st, m.Mode
				}
			}
		}
		if best == nil {
			continue
		}
		// Short, so the table fits a laptop screen: a closed-loop peak is
		// just its N (the column's rule), a burst says what it is.
		at := fmt.Sprintf("N=%d", best.Concurrency)
		if bestMode == sweep.ModeBurst {
			at = fmt.Sprintf("burst N=%d, not sustained", best.Concurrency)
		}
		row = append(row, fmtBig(best.TokensPerHour), at)
		if r.Comparison != nil {
			row = append(row, peakChange(r, s, best.TokensPerHour))
		}
		t.Rows = append(t.Rows, row)
	}
	if r.Comparison != nil {
		t.Head = append(t.Head, "peak vs base")
		t.Numeric = append(t.Numeric, true)
	}
	return t
}

// peakChange compares a scenario's peak tokens per hour with the
// baseline's, as a number (one figure per step has no interval).
func peakChange(r *report.Report, s *report.Scenario, peak float64) string {
	b := baseScenario(r, s)
	if b == nil {
		return "not in base"
	}
	var best float64
	for _, m := range b.Modes() {
		if best > 0 {
			break
		}
		for _, st := range okSteps(m.Steps) {
			if !st.StartedBusy() && st.TokensPerHour > best {
				best = st.TokensPerHour
			}
		}
	}
	if best <= 0 {
		return "–"
	}
	return fmtChange((peak - best) / best)
}

func figUseCaseTable(r *report.Report) figure {
	f := newFigure(slo.ChartUseCaseTable, "Use-case capacity",
		"How many concurrent requests each use case supports before its first threshold breaks. For chat-style traffic with pauses between turns, one request slot serves several active users.")
	f.Wide = true
	t := useCaseTable(r)
	if len(t.Rows) == 0 {
		f.Placeholder = "No use-case scenario was run."
	} else {
		f.Table = &t
	}
	return f
}

func useCaseTable(r *report.Report) table {
	t := table{Class: "cap", Head: []string{"use case", "context", "thresholds", "capacity", "limited by", "tested up to"},
		Numeric: []bool{false, false, false, true, false, true}}
	for _, u := range r.Capacity.UseCases {
		ctx, thr := "", ""
		if s := r.ScenarioNamed(u.Scenario); s != nil {
			ctx = fmt.Sprintf("%s in / %s out", fmtTokens(float64(s.InputTokens)), grouped(float64(s.OutputTokens), 0))
			thr = strings.Join(thresholdTexts(s.Thresholds), ", ")
		}
		lim := "–"
		if u.LimitedBy != "" {
			lim = limitName(u.LimitedBy)
		}
		t.Rows = append(t.Rows, []string{u.Scenario, ctx, thr, fmtBound(u.Bound), lim, fmt.Sprintf("N=%d (%s)", u.MaxTested, modeLabel(u.Mode))})
	}
	if c := r.Comparison; c != nil {
		t.Head = append(t.Head, "change vs base")
		t.Numeric = append(t.Numeric, false)
		for i, u := range r.Capacity.UseCases {
			t.Rows[i] = append(t.Rows[i], orDash(capacityChangeText(c.CapacityOf(report.CapacityUseCase, u.Scenario))))
		}
		for _, cc := range c.Capacity {
			if cc.Kind == report.CapacityUseCase && cc.Presence == report.OnlyInBase {
				row := make([]string, len(t.Head))
				for j := range row {
					row[j] = "–"
				}
				row[0], row[3], row[len(row)-1] = cc.Scenario, fmtBound(*cc.Base), "only in the base run"
				t.Rows = append(t.Rows, row)
				for len(t.RowClass) < len(t.Rows)-1 {
					t.RowClass = append(t.RowClass, "")
				}
				t.RowClass = append(t.RowClass, "base-only")
			}
		}
	}
	return t
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func figCapacities(r *report.Report) []figure {
	var out []figure
	used := map[string]int{}
	for _, u := range r.Capacity.UseCases {
		s := r.ScenarioNamed(u.Scenario)
		slug := slugify(u.Scenario)
		used[slug]++
		if used[slug] > 1 {
			slug += "-" + strconv.Itoa(used[slug])
		}
		f := figure{Chart: slo.ChartCapacity, DOMID: "chart-capacity-" + slug, Scenario: u.Scenario,
			Title: "Capacity: " + u.Scenario,
			How:   "Inter-token latency on the left axis (linear), time to first token or end-to-end latency on the right axis (log scale, on every capacity chart), against N. Dashed lines are this use case’s thresholds in the colour of the metric they limit; the grey line marks the capacity."}
		if s == nil {
			f.Placeholder = "No measurements for this use case."
			out = append(out, f)
			continue
		}
		if s.Description != "" || s.InputTokens > 0 {
			f.How = fmt.Sprintf("%s in / %s out%s. ", fmtTokens(float64(s.InputTokens)), grouped(float64(s.OutputTokens), 0), descSuffix(s.Description)) + f.How
		}
		f.SVG, f.Legend = capacityChart(f.DOMID, s, u, baseScenario(r, s))
		f.Findings = append(f.Findings, capacitySentence(s, u))
		out = append(out, f)
	}
	return out
}

func descSuffix(d string) string {
	if d == "" {
		return ""
	}
	return " · " + d
}

func capacitySentence(s *report.Scenario, u report.UseCaseCapacity) string {
	thr := strings.Join(thresholdTexts(s.Thresholds), " and ")
	switch {
	case u.AtLeast:
		return fmt.Sprintf("Every N tested, up to %d, met %s: capacity is at least %d and likely higher.", u.MaxTested, thr, u.Value)
	case u.Value <= 0:
		return fmt.Sprintf("Even the smallest N tested breaks %s (%s).", thr, limitName(u.LimitedBy))
	default:
		return fmt.Sprintf("Supports %s concurrent requests; beyond that %s crosses its threshold (%s).", fmtBound(u.Bound), limitName(u.LimitedBy), thr)
	}
}

func limitStat(u report.UseCaseCapacity, kind string) sweep.Stat {
	for _, l := range u.Limits {
		if l.Kind == kind && l.Stat != "" {
			return l.Stat
		}
	}
	return sweep.StatMean
}

// base, when not nil, is a comparison's baseline of the same use case: its
// curves are drawn faint and dashed beside NEW's.
func capacityChart(id string, s *report.Scenario, u report.UseCaseCapacity, base *report.Scenario) (template.HTML, template.HTML) {
	steps := okSteps(s.Steps(u.Mode))
	var ns []float64
	itl := svgchart.Series{Name: "ITL mean (left axis)", Color: colorCapITL, Marker: 0}
	useE2E := s.Thresholds.E2E.Seconds() > 0
	useTTFT := s.Thresholds.TTFT.Seconds() > 0 || !useE2E
	ttftStat, e2eStat := limitStat(u, report.LimitTTFT), limitStat(u, report.LimitE2E)
	ttft := svgchart.Series{Name: "TTFT " + string(ttftStat) + " (right axis)", Color: colorCapTTFT, Marker: 1, Right: true}
	e2e := svgchart.Series{Name: "E2E " + string(e2eStat) + " (right axis)", Color: colorCapE2E, Marker: 2, Right: true}
	for _, st := range steps {
		n := float64(st.Concurrency)
		ns = append(ns, n)
		if st.ITL.Mean > 0 {
			itl.Points = append(itl.Points, svgchart.Point{X: n, Y: st.ITL.Mean * 1000, Suspect: st.StartedBusy(),
				Tip: fmt.Sprintf("N=%d · ITL %s (≈ %s tok/s per user)%s", st.Concurrency, fmtMS(st.ITL.Mean), fmtRate(st.Decode.Mean), suspectTip(st))})
		}
		if v := st.TTFT.Stat(ttftStat); v > 0 {
			ttft.Points = append(ttft.Points, svgchart.Point{X: n, Y: v, Suspect: st.StartedBusy(),
				Tip: fmt.Sprintf("N=%d · TTFT %s %s%s", st.Concurrency, ttftStat, fmtSeconds(v), suspectTip(st))})
		}
		if v := st.E2E.Stat(e2eStat); v > 0 {
			e2e.Points = append(e2e.Points, svgchart.Point{X: n, Y: v, Suspect: st.StartedBusy(),
				Tip: fmt.Sprintf("N=%d · E2E %s %s%s", st.Concurrency, e2eStat, fmtSeconds(v), suspectTip(st))})
		}
	}
	c := svgchart.Chart{ID: id, Title: "Capacity: " + s.Name, X: nAxis("concurrent requests (N, "+modeLabel(u.Mode)+")", ns),
		Y:  svgchart.Axis{Label: "inter-token latency (ms)", FromZero: true, Fmt: svgchart.TickPlain},
		Y2: &svgchart.Axis{Label: "seconds", FromZero: true, Fmt: svgchart.TickSeconds}}
	c.Series = append(c.Series, itl)
	if useTTFT {
		c.Series = append(c.Series, ttft)
	}
	if useE2E {
		c.Series = append(c.Series, e2e)
	}
	if base != nil {
		bi, bt, be := baseOf(itl), baseOf(ttft), baseOf(e2e)
		for _, st := range okSteps(base.Steps(u.Mode)) {
			n := float64(st.Concurrency)
			if !slices.Contains(ns, n) {
				ns = append(ns, n)
			}
			if st.ITL.Mean > 0 {
				bi.Points = append(bi.Points, svgchart.Point{X: n, Y: st.ITL.Mean * 1000, Suspect: st.StartedBusy(), Tip: fmt.Sprintf("base · N=%d · ITL %s", st.Concurrency, fmtMS(st.ITL.Mean))})
			}
			if v := st.TTFT.Stat(ttftStat); v > 0 {
				bt.Points = append(bt.Points, svgchart.Point{X: n, Y: v, Suspect: st.StartedBusy(), Tip: fmt.Sprintf("base · N=%d · TTFT %s %s", st.Concurrency, ttftStat, fmtSeconds(v))})
			}
			if v := st.E2E.Stat(e2eStat); v > 0 {
				be.Points = append(be.Points, svgchart.Point{X: n, Y: v, Suspect: st.StartedBusy(), Tip: fmt.Sprintf("base · N=%d · E2E %s %s", st.Concurrency, e2eStat, fmtSeconds(v))})
			}
		}
		sort.Float64s(ns)
		c.X.Ticks = ns
		if len(bi.Points) > 0 {
			c.Series = append(c.Series, bi)
		}
		if useTTFT && len(bt.Points) > 0 {
			c.Series = append(c.Series, bt)
		}
		if useE2E && len(be.Points) > 0 {
			c.Series = append(c.Series, be)
		}
	}
	// One rule for every capacity chart, so two of them read the same way
	// side by side: ITL on a linear left axis from zero, as on every ITL
	// chart; TTFT or E2E on a log right axis, because under load they span
	// orders of magnitude (200 ms alone, a minute at the back of a burst)
	// and the threshold crossing must stay readable wherever it falls.
	c.Y2.Log = true
	switch {
	case useTTFT && !useE2E:
		c.Y2.Label = "time to first token (log scale)"
	case useE2E && !useTTFT:
		c.Y2.Label = "end-to-end latency (log scale)"
	default:
		c.Y2.Label = "seconds (log scale)"
	}
	t := s.Thresholds
	if t.TTFT.Seconds() > 0 {
		c.Refs = append(c.Refs, svgchart.RefLine{Value: t.TTFT.Seconds(), Right: true, Color: colorCapTTFT, Label: limitText(report.LimitTTFT, t.TTFT.Seconds())})
	}
	if t.E2E.Seconds() > 0 {
		c.Refs = append(c.Refs, svgchart.RefLine{Value: t.E2E.Seconds(), Right: true, Color: colorCapE2E, Label: limitText(report.LimitE2E, t.E2E.Seconds())})
	}
	if t.ITL.Seconds() > 0 {
		c.Refs = append(c.Refs, svgchart.RefLine{Value: t.ITL.Seconds() * 1000, Color: colorCapITL, Label: limitText(report.LimitITL, t.ITL.Seconds())})
	}
	if t.MinDecode > 0 {
		// Per request, ITL is the reciprocal of decode speed.
		itlMax := 1 / t.MinDecode
		c.Refs = append(c.Refs, svgchart.RefLine{Value: itlMax * 1000, Color: colorCapITL,
			Label: limitText(report.LimitDecode, t.MinDecode) + " (ITL ≤ " + strings.Replace(fmtMS(itlMax), ".0 ms", " ms", 1) + ")"})
	}
	if u.Value > 0 {
		c.Refs = append(c.Refs, svgchart.RefLine{Value: float64(u.Value), Vertical: true, Color: colorCapacityMrk, Label: "capacity " + fmtBound(u.Bound)})
	}
	c.SeparateRefs()
	c.SuspectNote = suspectNote
	return c.SVG(), c.LegendHTML()
}

// contextRows picks one scenario per context length (the first in report
// order) for the charts whose x axis is the context.
func contextRows(r *report.Report, idx []int) []*report.Scenario {
	seen := map[int]bool{}
	var out []*report.Scenario
	for _, i := range idx {
		s := &r.Scenarios[i]
		if len(s.ClosedLoop) == 0 || seen[s.InputTokens] {
			continue
		}
		seen[s.InputTokens] = true
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].InputTokens < out[j].InputTokens })
	return out
}

// contextSeries builds one line per closed-loop N with x = context length.
func contextSeries(rows []*report.Scenario, get func(report.Step) (float64, bool), unit func(float64) string) ([]svgchart.Series, []float64) {
	byN := map[int][]svgchart.Point{}
	var ctxs []float64
	for _, s := range rows {
		ctxs = append(ctxs, float64(s.InputTokens))
		for _, st := range okSteps(s.ClosedLoop) {
			if v, ok := get(st); ok && finite(v) {
				byN[st.Concurrency] = append(byN[st.Concurrency], svgchart.Point{X: float64(s.InputTokens), Y: v, Suspect: st.StartedBusy(),
					Tip: fmt.Sprintf("%s (%s) · N=%d · %s%s", s.Name, fmtTokens(float64(s.InputTokens)), st.Concurrency, unit(v), suspectTip(st))})
			}
		}
	}
	var ns []int
	for n := range byN {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	var out []svgchart.Series
	for k, n := range ns {
		out = append(out, svgchart.Series{Name: fmt.Sprintf("N=%d", n), Color: nColor(k, len(ns)), Marker: k % 4, Points: byN[n]})
	}
	return out, ctxs
}

// withBaseContext adds a comparison's baseline lines to a context chart:
// for each N the same colour as NEW's line of that N, faint and dashed.
func withBaseContext(r *report.Report, idx []int, ss []svgchart.Series, ctxs []float64, get func(report.Step) (float64, bool), unit func(float64) string) ([]svgchart.Series, []float64) {
	b := baseReport(r)
	if b == nil {
		return ss, ctxs
	}
	var brows []*report.Scenario
	for _, row := range contextRows(r, idx) {
		if bs := baseScenario(r, row); bs != nil {
			brows = append(brows, bs)
		}
	}
	bss, _ := contextSeries(brows, get, unit)
	for _, bs := range bss {
		twin := bs
		for _, s := range ss {
			if s.Name == bs.Name {
				twin.Color, twin.Marker = s.Color, s.Marker
			}
		}
		twin = baseOf(twin)
		for _, p := range bs.Points {
			p.Tip = "base · " + p.Tip
			twin.Points = append(twin.Points, p)
		}
		ss = append(ss, twin)
	}
	return ss, ctxs
}

func ctxAxis(ctxs []float64) svgchart.Axis {
	return svgchart.Axis{Label: "context length (input tokens)", Log: true, Ticks: ctxs, Fmt: fmtTokens}
}

func figQueueWait(r *report.Report, idx []int) figure {
	f, ss := queueWaitByContext.figure(r, idx)
	if hi := extreme(ss, true); hi.ok {
		f.Findings = append(f.Findings, fmt.Sprintf("Longest mean queue wait: %s at %s context, %s.", fmtSeconds(hi.v), fmtTokens(float64(hi.n)), hi.scenario))
	}
	return f
}

func figPrefill(r *report.Report, idx []int) figure {
	f, ss := prefillByContext.figure(r, idx)
	if len(ss) == 0 {
		return f
	}
	t := table{Head: []string{"concurrency", "peaks at", "peak prefill speed"}, Numeric: []bool{false, false, true}}
	for _, s := range ss {
		if s.Faint {
			continue
		}
		var best svgchart.Point
		for _, p := range s.Points {
			if p.Y > best.Y {
				best = p
			}
		}
		t.Rows = append(t.Rows, []string{s.Name, fmtTokens(best.X) + " context", fmtRate(best.Y) + " tok/s"})
	}
	f.Table = &t
	return f
}

func figPower(r *report.Report, idx []int) figure {
	b := powerByContext
	f := newFigure(b.chart, b.title, b.how)
	ss, ctxs := b.series(r, idx)
	// Tiles use every step of every scenario, both modes.
	var peak, bestJ *report.Step
	var peakName, bestJName string
	var peakMode sweep.Mode
	for i := range r.Scenarios {
		s := &r.Scenarios[i]
		for _, m := range s.Modes() {
			for _, st := range m.Steps {
				if st.Power == nil {
					continue
				}
				st := st
				if peak == nil || st.Power.PeakWatts > peak.Power.PeakWatts {
					peak, peakName, peakMode = &st, s.Name, m.Mode
				}
				if st.Power.JoulesPerToken > 0 && (bestJ == nil || st.Power.JoulesPerToken < bestJ.Power.JoulesPerToken) {
					bestJ, bestJName = &st, s.Name
				}
			}
		}
	}
	if peak == nil {
		f.Placeholder = "GPU power was not measured. Run slaprobe bench where NVML can see the target’s GPUs to add power, energy per token and cost per hour to this report."
		return f
	}
	f.TileClass = "compact"
	f.Tiles = append(f.Tiles, tile{Label: "peak draw", Value: fmtWatts(peak.Power.PeakWatts),
		Sub: fmt.Sprintf("%s, %s N=%d", peakName, modeLabel(peakMode), peak.Concurrency)})
	if peak.Power.CostPerHourUSD > 0 {
		f.Tiles = append(f.Tiles, tile{Label: "cost per hour", Value: fmtUSD(peak.Power.CostPerHourUSD),
			Sub: fmt.Sprintf("%s average at that step, $%s/kWh", fmtWatts(peak.Power.AvgWatts), strconv.FormatFloat(r.Config.PricePerKWh, 'f', 2, 64))})
	}
	if bestJ != nil {
		f.Tiles = append(f.Tiles, tile{Label: "best energy per token", Value: strconv.FormatFloat(bestJ.Power.JoulesPerToken, 'f', 2, 64) + " J",
			Sub: fmt.Sprintf("%s, N=%d", bestJName, bestJ.Concurrency)})
	}
	b.draw(&f, ss, ctxs)
	return f
}

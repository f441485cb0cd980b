package compare

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/report/render"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/prober"
)

// synthetic builds a report of one scenario whose per-request latencies are
// scale × a base level with seeded noise of the given relative spread.
func synthetic(seed uint64, scale, noise float64, closed, burst []int) *report.Report {
	rng := rand.New(rand.NewPCG(seed, 7))
	r := &report.Report{
		SchemaVersion: report.SchemaVersion,
		Meta:          report.Meta{Model: "m", Engine: "vllm", StartedAt: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)},
		Config:        report.Config{ClosedLoopLadder: closed, BurstLadder: burst, Thresholds: report.DefaultThresholds()},
	}
	s := report.Scenario{
		ScenarioSpec: sweep.ScenarioSpec{Name: "chat", Family: report.FamilyUseCase, InputTokens: 1024, OutputTokens: 64, Thresholds: prober.Thresholds{TTFT: time.Second}},
	}
	step := func(n, requests int) report.Step {
		var ps sweep.Samples
		for range requests {
			f := scale * (1 + noise*rng.NormFloat64())
			ttft := 0.1 * float64(n) * f
			itl := 0.006 * (1 + 0.05*float64(n)) * f
			ps.TTFT = append(ps.TTFT, ttft)
			ps.ITL = append(ps.ITL, itl)
			ps.Decode = append(ps.Decode, 1/itl)
			ps.E2E = append(ps.E2E, ttft+63*itl)
			ps.Prefill = append(ps.Prefill, 1024/ttft)
		}
		sum := func(v []float64) sweep.Dist {
			q := sweep.Summarize(v)
			return sweep.Dist{Mean: q.Mean, P1: q.P1, P10: q.P10, P50: q.P50, P90: q.P90, P95: q.P95, P99: q.P99}
		}
		return report.Step{Concurrency: n, RequestsSent: requests, RequestsOK: requests, SuccessRate: 1,
			TTFT: sum(ps.TTFT), ITL: sum(ps.ITL), Decode: sum(ps.Decode), E2E: sum(ps.E2E),
			PrefillTokensPerSecond: 1024 / (0.1 * float64(n) * scale), SystemTokensPerSecond: float64(n) / (0.006 * scale),
			Samples: report.NewSamples(ps)}
	}
	for _, n := range closed {
		s.ClosedLoop = append(s.ClosedLoop, step(n, 40))
	}
	for _, n := range burst {
		s.Burst = append(s.Burst, step(n, n))
	}
	r.Scenarios = []report.Scenario{s}
	r.Capacity.MaxSafeQueue = []report.QueueCapacity{{Scenario: "chat", Bound: sweep.Bound{Value: int(30 / scale), Approximate: true},
		ThresholdSeconds: 3, Stat: sweep.StatMean, MaxTested: burst[len(burst)-1]}}
	return r
}

func TestVerdicts(t *testing.T) {
	closed, burst := []int{1, 4, 8}, []int{8, 16, 32, 64}
	base := synthetic(1, 1, 0.05, closed, burst)
	for _, tc := range []struct {
		name         string
		cur          *report.Report
		worse, other int // significant findings expected
	}{
		{"itself", base, 0, 0},
		{"rerun with other noise", synthetic(2, 1, 0.05, closed, burst), 0, 0},
		{"2% slower: real but below the floor", synthetic(3, 1.02, 0.01, closed, burst), 0, 0},
		{"20% slower", synthetic(4, 1.2, 0.05, closed, burst), 3 * 5, 1},
		{"20% faster", synthetic(5, 1/1.2, 0.05, closed, burst), 0, 3*5 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Compare(base, tc.cur, Options{}).Comparison
			worse, other := 0, 0
			for _, f := range c.Findings() {
				if f.Worse {
					worse++
				} else {
					other++
				}
			}
			if tc.name == "20% slower" || tc.name == "20% faster" {
				if worse+other < 3*5 { // closed-loop steps only: bursts of one round compare as numbers
					t.Errorf("%d findings; want every figure of every step", worse+other)
				}
			} else if worse+other != 0 {
				for _, f := range c.Findings() {
					t.Errorf("significant: %s", render.FindingText(f))
				}
			}
			if tc.name == "20% slower" && other != 0 {
				t.Errorf("%d improvements on a slower engine", other)
			}
			if tc.name == "20% faster" && worse != 0 {
				t.Errorf("%d regressions on a faster engine", worse)
			}
		})
	}
}

func TestCapacityAtTheLaddersResolution(t *testing.T) {
	ladder := []int{1, 2, 4, 8, 16, 32, 64, 128, 256}
	for _, tc := range []struct {
		base, cur sweep.Bound
		want      string
	}{
		{sweep.Bound{Value: 131, Approximate: true}, sweep.Bound{Value: 129, Approximate: true}, report.VerdictNoChange},
		{sweep.Bound{Value: 131, Approximate: true}, sweep.Bound{Value: 100, Approximate: true}, report.VerdictWorse},
		{sweep.Bound{Value: 100, Approximate: true}, sweep.Bound{Value: 131, Approximate: true}, report.VerdictBetter},
		{sweep.Bound{Value: 256, AtLeast: true}, sweep.Bound{Value: 256, AtLeast: true}, report.VerdictNoChange},
		{sweep.Bound{Value: 8}, sweep.Bound{Value: 0}, report.VerdictWorse},
		{sweep.Bound{Value: 129, Approximate: true}, sweep.Bound{Value: 127, Approximate: true}, report.VerdictNoChange}, // crosses 128 by less than 5%
	} {
		mk := func(b sweep.Bound) *report.Report {
			r := &report.Report{Scenarios: []report.Scenario{{ScenarioSpec: sweep.ScenarioSpec{Name: "s"}}}}
			for _, n := range ladder {
				r.Scenarios[0].Burst = append(r.Scenarios[0].Burst, report.Step{Concurrency: n, RequestsOK: 1, RequestsSent: 1, SuccessRate: 1})
			}
			r.Capacity.MaxSafeQueue = []report.QueueCapacity{{Scenario: "s", Bound: b, ThresholdSeconds: 3, Stat: sweep.StatMean}}
			return r
		}
		c := Compare(mk(tc.base), mk(tc.cur), Options{}).Comparison.CapacityOf(report.CapacityMaxSafeQueue, "s")
		if c == nil || c.Verdict != tc.want {
			t.Errorf("%+v → %+v: %+v; want %s", tc.base, tc.cur, c, tc.want)
		}
	}
}

// Scenarios, N and capacity figures in one run only are listed as such and
// matched to nothing; a scenario whose lengths changed is not the same one.
func TestPresence(t *testing.T) {
	base := synthetic(1, 1, 0.05, []int{1, 4}, []int{8, 16})
	cur := synthetic(2, 1, 0.05, []int{1, 8}, []int{8, 16})
	extra := base.Scenarios[0]
	extra.Name = "old_only"
	base.Scenarios = append(base.Scenarios, extra)
	reshaped := cur.Scenarios[0]
	reshaped.Name, reshaped.InputTokens = "old_only", 2048
	cur.Scenarios = append(cur.Scenarios, reshaped)
	c := Compare(base, cur, Options{}).Comparison
	want := map[string]string{
		"chat/closed_loop/1": report.InBoth, "chat/closed_loop/4": report.OnlyInBase, "chat/closed_loop/8": report.OnlyInNew,
	}
	for _, s := range c.Steps {
		key := s.Scenario + "/" + string(s.Mode) + "/" + itoa(s.Concurrency)
		if w, ok := want[key]; ok && s.Presence != w {
			t.Errorf("%s: %s; want %s", key, s.Presence, w)
		}
		if s.Scenario == "old_only" && s.Presence == report.InBoth {
			t.Errorf("%s: a reshaped scenario was matched", key)
		}
		if s.Presence != report.InBoth && len(s.Metrics) > 0 {
			t.Errorf("%s in one run only has metrics", key)
		}
	}
	text := strings.Join(c.Differences, "\n")
	for _, w := range []string{"N=4 only in the base run", "N=8 only in the new run", "old_only has other prompt or output lengths"} {
		if !strings.Contains(text, w) {
			t.Errorf("differences do not say %q:\n%s", w, text)
		}
	}
}

// A v1 report (no samples) compares on its summaries and says that no
// confidence is available.
func TestV1ReportComparesOnSummaries(t *testing.T) {
	v1, err := LoadReport(filepath.Join("..", "report", "testdata", "report.v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	rep := Compare(v1, v1, Options{BaseLabel: "v1"})
	c := rep.Comparison
	if c.Confidence {
		t.Error("confidence claimed without samples")
	}
	n := 0
	for _, s := range c.Steps {
		for _, m := range s.Metrics {
			n++
			if m.Verdict != report.VerdictUnknown || m.Low != nil {
				t.Errorf("%s N=%d %s: %s; want %s without an interval", s.Scenario, s.Concurrency, m.Metric, m.Verdict, report.VerdictUnknown)
			}
		}
	}
	if n == 0 {
		t.Fatal("nothing compared")
	}
	if !strings.Contains(strings.Join(c.Differences, " "), "no confidence is available") {
		t.Errorf("differences do not say so: %q", c.Differences)
	}
	var html, md bytes.Buffer
	if err := render.RenderHTML(&html, rep); err != nil {
		t.Fatal(err)
	}
	if err := render.RenderMarkdown(&md, rep); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{html.String(), md.String()} {
		if !strings.Contains(out, "no confidence is available") {
			t.Error("the rendered comparison does not say that no confidence is available")
		}
	}
}

func TestReproducible(t *testing.T) {
	base := synthetic(1, 1, 0.1, []int{1, 4}, []int{8})
	cur := synthetic(9, 1.1, 0.1, []int{1, 4}, []int{8})
	var a, b bytes.Buffer
	if err := report.RenderJSON(&a, Compare(base, cur, Options{})); err != nil {
		t.Fatal(err)
	}
	if err := report.RenderJSON(&b, Compare(base, cur, Options{})); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Error("two comparisons of the same reports differ")
	}
}

// The bootstrap's interval covers the true difference of medians about as
// often as its level says (a coarse check: 200 trials of 60 values).
func TestIntervalCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	covered := 0
	const trials = 200
	for i := range trials {
		var a, b []float64
		for range 60 {
			a = append(a, 1+0.2*rng.NormFloat64())
			b = append(b, 1.1+0.2*rng.NormFloat64())
		}
		iv := medianDiffInterval(a, b, 1000, 0.95, 1, itoa(i))
		if iv.Lo <= 0.1 && 0.1 <= iv.Hi {
			covered++
		}
	}
	if covered < 175 {
		t.Errorf("covered the true difference %d of %d times; want about 95%%", covered, trials)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestLoadReportErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty := filepath.Join(dir, "emptydir")
	os.Mkdir(empty, 0o755)
	for _, tc := range []struct {
		path string
		want []string
	}{
		{filepath.Join(dir, "missing.json"), []string{"missing.json", "no such file", "expected a report.json"}},
		{empty, []string{"emptydir", "has no report.json"}},
		{write("text.json", "hello"), []string{"text.json", "not a slaprobe report", "not JSON"}},
		{write("other.json", `{"kind":"x"}`), []string{"other.json", "no schema_version field"}},
		{write("v9.json", `{"schema_version":"slaprobe.report/v9"}`), []string{"v9.json", `schema_version="slaprobe.report/v9"`, "not supported", report.SchemaVersion}},
		{write("bad.json", `{"schema_version":"slaprobe.report/v2","scenarios":[{"name":"a","closed_loop":[{"concurrency":0}]}]}`), []string{"bad.json", "concurrency=0"}},
	} {
		_, err := LoadReport(tc.path)
		if err == nil {
			t.Errorf("%s: loaded; want an error", tc.path)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v; want it to say %q", filepath.Base(tc.path), err, w)
			}
		}
	}
}

// A burst is judged on its rounds' medians when both runs repeated it at
// least MinRounds times, and compared as a number otherwise: the requests
// of one burst share a queue, so a rerun that shifts a whole burst must not
// be called significant from its requests alone.
func TestBurstRounds(t *testing.T) {
	burstStep := func(rounds ...float64) report.Step {
		var ps sweep.Samples
		for _, m := range rounds {
			for i := range 8 { // 8 requests per round, tightly around the round's level
				ps.TTFT = append(ps.TTFT, m*(1+0.001*float64(i-4)))
			}
		}
		if len(rounds) > 1 {
			ps.RoundMedians = &sweep.Samples{TTFT: rounds}
		}
		q := sweep.Summarize(ps.TTFT)
		return report.Step{Concurrency: 8, RequestsSent: len(ps.TTFT), RequestsOK: len(ps.TTFT), SuccessRate: 1,
			TTFT: sweep.Dist{Mean: q.Mean, P50: q.P50, P90: q.P90, P95: q.P95, P99: q.P99}, Samples: report.NewSamples(ps)}
	}
	run := func(st report.Step) *report.Report { return stepReport(sweep.ModeBurst, st) }
	for _, tc := range []struct {
		name        string
		base, cur   report.Step
		verdict     string
		rounds      int // values compared per run, 0 for none
		noteContain string
	}{
		// One figure: the report's 95 % is the figure's, which 4 rounds
		// against 4 can reach (full separation: p = 2/70), 3 against 3
		// cannot (p = 0.1 at best).
		{"one round shifted 10%: a number, not a verdict", burstStep(1.0), burstStep(1.1), report.VerdictUnknown, 0, "burst.repeat ≥ 4"},
		{"two rounds: too few", burstStep(1.0, 1.02), burstStep(1.2, 1.22), report.VerdictUnknown, 0, "burst.repeat ≥ 4"},
		{"three rounds, every one 20% slower: too few for the level", burstStep(1.0, 1.05, 0.97), burstStep(1.2, 1.26, 1.16), report.VerdictUnknown, 3, "3 and 3 burst rounds can show a change with p = 0.1 at best"},
		{"rerun: rounds overlap", burstStep(1.0, 1.1, 0.92, 1.03), burstStep(1.08, 0.95, 1.12, 1.0), report.VerdictNoChange, 4, "exact rank interval (4 and 4 burst rounds)"},
		{"every round 20% slower", burstStep(1.0, 1.05, 0.97, 1.02), burstStep(1.2, 1.26, 1.16, 1.22), report.VerdictWorse, 4, "4 and 4 burst rounds"},
		{"five rounds 20% faster", burstStep(1.0, 1.05, 0.97, 1.02, 0.99), burstStep(0.83, 0.86, 0.8, 0.84, 0.82), report.VerdictBetter, 5, "5 and 5 burst rounds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Compare(run(tc.base), run(tc.cur), Options{}).Comparison
			m := c.Step("chat", sweep.ModeBurst, 8).Metric(report.MetricTTFT)
			if m == nil {
				t.Fatal("no TTFT change for the burst step")
			}
			if m.Verdict != tc.verdict {
				t.Errorf("verdict %q (change %+.3f, interval %v … %v); want %q", m.Verdict, m.Change, m.Low, m.High, tc.verdict)
			}
			if got := m.BaseSamples; tc.rounds > 0 && got != tc.rounds {
				t.Errorf("%d values compared; want the %d rounds", got, tc.rounds)
			}
			if (m.Low != nil) != (tc.verdict != report.VerdictUnknown) {
				t.Errorf("interval %v … %v; want one only with a verdict", m.Low, m.High)
			}
			if !strings.Contains(m.Note, tc.noteContain) {
				t.Errorf("note %q; want it to say %q", m.Note, tc.noteContain)
			}
			if want := map[bool]int{true: 4}[tc.verdict == report.VerdictUnknown]; m.NeededPerRun != want {
				t.Errorf("needed per run %d; want %d", m.NeededPerRun, want)
			}
			var md bytes.Buffer
			if err := render.RenderMarkdown(&md, Compare(run(tc.base), run(tc.cur), Options{})); err != nil {
				t.Fatal(err)
			}
			if said := strings.Contains(md.String(), "4 rounds per burst (burst.repeat)"); said != (tc.verdict == report.VerdictUnknown) {
				t.Errorf("report.md says how many rounds would judge it: %v; want %v", said, tc.verdict == report.VerdictUnknown)
			}
			var sum bytes.Buffer
			WriteSummary(&sum, c)
			if said := strings.Contains(sum.String(), "1 figures got no verdict"); said != (tc.verdict == report.VerdictUnknown) {
				t.Errorf("summary %q; want it to count the figure without a verdict only when it has none", sum.String())
			}
		})
	}
}

// A closed loop at N > 1 is judged on consecutive slices of its requests.
// Its TTFT has modes (a request waits for 0, 1 or 2 other prefills), and
// which mode a request lands in follows a pattern of the N users that
// holds for seconds: on the simulated engine at N=4 a quarter of the
// requests usually waited for no other prefill, and in one run about half
// did. The requests' own bootstrap then called a rerun's median TTFT 14 %
// worse. The first case is such a run: for half of the step most requests
// were fast, so the median sits between the modes.
func TestClosedLoopSlices(t *testing.T) {
	// modal returns n requests in the order they ended: request i is fast
	// (waited for no other prefill) when fast(i), else it waited for one;
	// each with a little jitter, all times scale.
	modal := func(n int, fast func(i int) bool, scale float64) []float64 {
		v := make([]float64, n)
		for i := range v {
			base := 0.277
			if fast(i) {
				base = 0.104
			}
			v[i] = scale * base * (1 + 0.002*float64(i%5-2))
		}
		return v
	}
	quarter := func(i int) bool { return i%4 == 0 }
	patchy := func(i int) bool { return (i < 22 && i%5 != 0) || (i >= 22 && i%4 == 0) } // 4 in 5 fast, then 1 in 4
	step := func(conc int, ttft []float64) report.Step {
		q := sweep.Summarize(ttft)
		return report.Step{Concurrency: conc, RequestsSent: len(ttft), RequestsOK: len(ttft), SuccessRate: 1,
			TTFT:    sweep.Dist{Mean: q.Mean, P50: q.P50, P90: q.P90, P95: q.P95, P99: q.P99},
			Samples: report.NewSamples(sweep.Samples{TTFT: ttft})}
	}
	run := func(st report.Step) *report.Report { return stepReport(sweep.ModeClosedLoop, st) }
	for _, tc := range []struct {
		name        string
		base, cur   report.Step
		verdict     string
		compared    int // values compared in the base run
		noteContain string
	}{
		{"a fast stretch, then a rerun: the same engine", step(4, modal(44, patchy, 1)), step(4, modal(44, quarter, 1)), report.VerdictNoChange, 8, "8 and 8 slices"},
		{"every mode 20% slower", step(4, modal(44, quarter, 1)), step(4, modal(36, quarter, 1.2)), report.VerdictWorse, 8, "8 and 7 slices"},
		{"too few requests for three slices", step(4, modal(14, quarter, 1)), step(4, modal(14, quarter, 1.2)), report.VerdictUnknown, 14, "(20 requests)"},
		{"N=1: each request is judged", step(1, modal(44, quarter, 1)), step(1, modal(44, quarter, 1.2)), report.VerdictWorse, 44, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Compare(run(tc.base), run(tc.cur), Options{}).Comparison
			m := c.Step("chat", sweep.ModeClosedLoop, tc.base.Concurrency).Metric(report.MetricTTFT)
			if m == nil {
				t.Fatal("no TTFT change for the step")
			}
			if m.Verdict != tc.verdict {
				t.Errorf("verdict %q (change %+.3f, interval %s); want %q", m.Verdict, m.Change, intervalText(m), tc.verdict)
			}
			if m.BaseSamples != tc.compared {
				t.Errorf("%d values compared; want %d", m.BaseSamples, tc.compared)
			}
			if !strings.Contains(m.Note, tc.noteContain) {
				t.Errorf("note %q; want it to say %q", m.Note, tc.noteContain)
			}
		})
	}
	// Without slices, the first case is the false alarm this guards against.
	if iv := medianDiffInterval(modal(44, patchy, 1), modal(44, quarter, 1), 4000, 0.95, 1, "x"); iv.Lo <= 0 {
		t.Errorf("the requests' own bootstrap gives %v … %v; the case no longer shows the false alarm", iv.Lo, iv.Hi)
	}
}

func intervalText(m *report.MetricChange) string {
	if m.Low == nil {
		return "none"
	}
	return fmt.Sprintf("%+.3f … %+.3f", *m.Low, *m.High)
}

// stepReport is a report of one scenario, "chat", with one step in mode.
func stepReport(mode sweep.Mode, st report.Step) *report.Report {
	r := &report.Report{SchemaVersion: report.SchemaVersion, Meta: report.Meta{Model: "m", Engine: "vllm"},
		Config: report.Config{Thresholds: report.DefaultThresholds()}}
	sc := report.Scenario{ScenarioSpec: sweep.ScenarioSpec{Name: "chat", InputTokens: 1024, OutputTokens: 64}}
	if mode == sweep.ModeBurst {
		r.Config.BurstLadder, sc.Burst = []int{st.Concurrency}, []report.Step{st}
	} else {
		r.Config.ClosedLoopLadder, sc.ClosedLoop = []int{st.Concurrency}, []report.Step{st}
	}
	r.Scenarios = []report.Scenario{sc}
	return r
}

// A step that measured nothing (no request ended in it) is not compared:
// its zeros are no figures. The change says in which run, and the
// differences list it.
func TestStepThatMeasuredNothing(t *testing.T) {
	base := synthetic(1, 1, 0.05, []int{1, 4}, []int{8})
	cur := synthetic(2, 1, 0.05, []int{1, 4}, []int{8})
	empty := report.Step{Concurrency: 4, NotMeasured: "no request ended inside the 4s window"}
	cur.Scenarios[0].ClosedLoop[1] = empty
	c := Compare(base, cur, Options{}).Comparison
	for _, s := range c.Steps {
		switch s.Concurrency {
		case 4:
			if s.Presence != report.InBoth || s.NotMeasured != "new" || len(s.Metrics) != 0 {
				t.Errorf("N=4: presence %s, not measured %q, %d metrics; want in both, not measured in new, no metrics", s.Presence, s.NotMeasured, len(s.Metrics))
			}
		case 1:
			if s.NotMeasured != "" || len(s.Metrics) == 0 {
				t.Errorf("N=1: not measured %q, %d metrics", s.NotMeasured, len(s.Metrics))
			}
		}
	}
	if text := strings.Join(c.Differences, "\n"); !strings.Contains(text, "closed loop N=4 measured nothing in the new run") {
		t.Errorf("differences do not name the step that measured nothing:\n%s", text)
	}
	// A run in which nothing was measured kept no samples because there
	// were none: it is not taken for a v1 report.
	nothing := synthetic(3, 1, 0.05, []int{1, 4}, []int{8})
	nothing.Scenarios[0].ClosedLoop = []report.Step{{Concurrency: 1, NotMeasured: "x"}, empty}
	nothing.Scenarios[0].Burst = nil
	if c := Compare(base, nothing, Options{}).Comparison; !c.Confidence || strings.Contains(strings.Join(c.Differences, "\n"), "kept no raw samples") {
		t.Errorf("a run that measured nothing is taken for one without samples: confidence %v, %q", c.Confidence, c.Differences)
	}
	base.Scenarios[0].ClosedLoop[1] = empty
	for _, s := range Compare(base, cur, Options{}).Comparison.Steps {
		if s.Concurrency == 4 && s.NotMeasured != "both" {
			t.Errorf("N=4 empty in both runs: not measured %q, want both", s.NotMeasured)
		}
	}
}

// TestDifferentAPIs: two runs on different APIs compare, and the comparison
// says so; a report without an API is a chat run.
func TestDifferentAPIs(t *testing.T) {
	base := synthetic(1, 1, 0.02, []int{1, 2}, []int{1, 4})
	cur := synthetic(2, 1, 0.02, []int{1, 2}, []int{1, 4})
	cur.Meta.API = "messages"
	got := differences(base, cur)
	if !slices.Contains(got, "Different API: base chat, new messages.") {
		t.Errorf("differences %q; want the API named", got)
	}
	cur.Meta.API = "chat"
	for _, d := range differences(base, cur) {
		if strings.Contains(d, "API") {
			t.Errorf("an unrecorded API and chat are the same: %q", d)
		}
	}
}

package status

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/slaprobe/slaprobe/internal/engine"
	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/report/render"
	"github.com/slaprobe/slaprobe/internal/slo"
	"github.com/slaprobe/slaprobe/internal/sweeper"
	"github.com/slaprobe/slaprobe/prober"
)

type pageData struct {
	Description string
	Version     string
	Now         string
	Uptime      string
	Ready       bool
	Refresh     int
	Window      string
	Links       []Link
	Summary     []summaryTile
	Targets     []targetView
	GPU         gpuView
	Sweep       *sweepView
}

// summaryTile is one target×scenario at a glance.
type summaryTile struct {
	Target, Scenario, Status, StatusText, Anchor string
	Headline                                     string // the last TTFT and ITL
}

type targetView struct {
	Name, URL, Model, Anchor string
	ProbesURL                string
	Held                     bool
	Engine                   *engineView
	Mix                      *liveMixView // nil when engine metrics are off
	Scenarios                []scenarioView
}

type engineView struct {
	URL                     string
	Up, Tried               bool
	Running, Waiting, KV    string
	Flavor, Err, ScrapedAgo string
}

type scenarioView struct {
	Name, Description, Anchor string
	API                       string // chat, completions, responses or messages
	InputTokens, OutputTokens int
	Interval, Timeout         string
	// Status is "ok", "breach", "failing" or "waiting"; StatusText says it
	// in words.
	Status, StatusText string
	Last               *lastView
	InFlight           string
	Next               string
	SuccessRate        string
	WindowProbes       int
	Rows               []metricRow
	Split              *splitView
	Conversation       *conversationView // conversation scenarios only
	Classes            *classesView      // trace-shaped and live scenarios only
	LiveWarning        string            // the live mix no longer sends this shape
	ProbesURL          string
}

type lastView struct {
	Ago, At, Kind, Reason, Err string
	OK                         bool
	Short                      bool // the server ended the answer early: measured, not failed
	PromptTokens, OutputTokens int
	RequestedTokens            int
	CacheHit                   bool
}

type gpuView struct {
	Up      bool
	Off     bool // power.nvml is false
	Devices []gpuDeviceView
	ReadAgo string
}

type gpuDeviceView struct {
	Index                         int
	Name, UUID                    string
	Power, Util, Memory, Temp     string
	HasPower, HasUtil, HasMemTemp bool
}

type sweepView struct {
	Enabled, Running bool
	Current, Holding string
	Step             string
	Paused           []string
	Targets          []sweepTargetView
}

type sweepTargetView struct {
	Target          string
	HasReport       bool
	HTML, JSON      string
	Model, Finished string
	Interrupted     bool
	Headline        []string
	// Compared says what the latest sweep is compared with; Worse lists
	// its significant regressions against it, worst first.
	Compared            string
	Worse               []string
	WorseCount          int
	Attempt             string
	AttemptErr          string
	AttemptComplete     bool
	AttemptUnsuccessful bool
}

func anchor(parts ...string) string {
	return "s-" + strings.NewReplacer(" ", "-", "/", "-", ":", "-").Replace(strings.Join(parts, "--"))
}

func probesURL(target, scenario string) string {
	q := url.Values{"target": {target}}
	if scenario != "" {
		q.Set("scenario", scenario)
	}
	return "/probes?" + q.Encode()
}

func (s *Server) servePage(w http.ResponseWriter, r *http.Request) {
	now := s.o.Now()
	cfg := s.o.Config()
	d := pageData{
		Description: s.o.Description,
		Version:     versionLine(),
		Now:         now.Format("2006-01-02 15:04:05 MST"),
		Uptime:      human(now.Sub(s.started)),
		Ready:       s.o.Ready == nil || s.o.Ready(),
		Window:      human(s.o.Window),
		Links:       s.o.Links,
	}
	if s.o.Refresh > 0 {
		d.Refresh = int(s.o.Refresh.Seconds())
	}
	holding := ""
	if s.o.Sweeps != nil {
		snap := s.o.Sweeps()
		holding = snap.Holding
		d.Sweep = s.sweepView(snap, now)
	}
	for _, tc := range cfg.TargetConfigs {
		tv := targetView{Name: tc.Name, URL: report.RedactURL(tc.URL), Model: tc.Model, Anchor: anchor(tc.Name),
			ProbesURL: probesURL(tc.Name, ""), Held: holding == tc.Name}
		if s.o.Engine != nil {
			if st, ok := s.o.Engine(tc.Name); ok {
				tv.Engine = engineOf(st, now)
			}
		}
		for _, sc := range cfg.Scenarios(tc.Name) {
			sv := s.scenarioView(tc.Name, sc, now, tv.Held)
			sv.API = string(sc.APIOn(prober.Target{API: tc.API}))
			if tv.Model == "" && sv.Last != nil {
				tv.Model = s.lastModel(tc.Name, sc.Name)
			}
			tv.Scenarios = append(tv.Scenarios, sv)
			tile := summaryTile{Target: tc.Name, Scenario: sc.Name, Status: sv.Status, StatusText: sv.StatusText, Anchor: sv.Anchor}
			if ttft, itl := sv.Rows[0], sv.Rows[1]; ttft.Tail != "" {
				tile.Headline = fmt.Sprintf("TTFT %s %s · ITL %s %s", ttft.TailLabel, ttft.Tail, itl.TailLabel, itl.Tail)
			}
			d.Summary = append(d.Summary, tile)
		}
		if s.o.LiveMix != nil {
			mix, read, err := s.o.LiveMix(tc.Name)
			tv.Mix = buildLiveMix(mix, read, err, cfg.Scenarios(tc.Name), now)
			for i, sh := range tv.Mix.Shapes {
				tv.Scenarios[i].LiveWarning = sh.Warning
			}
		}
		if tv.Model == "" {
			tv.Model = "auto-detect (not detected yet)"
		}
		d.Targets = append(d.Targets, tv)
	}
	d.GPU = s.gpuView(now, cfg.Power.NVML)
	s.render(w, http.StatusOK, pageTmpl, d)
}

func (s *Server) lastModel(target, scenario string) string {
	done, _ := s.o.Recorder.Probes(target, scenario)
	for i := len(done) - 1; i >= 0; i-- {
		if done[i].Model != "" {
			return done[i].Model
		}
	}
	return ""
}

func (s *Server) scenarioView(target string, sc prober.Scenario, now time.Time, held bool) scenarioView {
	done, inFlight := s.o.Recorder.Probes(target, sc.Name)
	sv := scenarioView{
		Name: sc.Name, Description: sc.Description, Anchor: anchor(target, sc.Name),
		InputTokens: sc.InputTokens, OutputTokens: sc.OutputTokens,
		Interval: human(sc.Interval), Timeout: human(sc.Timeout),
		ProbesURL: probesURL(target, sc.Name),
	}
	since := now.Add(-s.o.Window)
	for _, m := range withAcceptance(done) {
		sv.Rows = append(sv.Rows, buildRow(m, done, since, sc.Thresholds))
	}
	sv.Split = buildSplit(done, since)
	sv.Conversation = buildConversation(sv.Anchor, sc, done, since)
	sv.Classes = buildClasses(sc, done, since)
	ok, n := 0, 0
	good, turns := 0, 0 // the joint SLO: probes that met every threshold at once
	for i := range done {
		if !done[i].Sent.Before(since) {
			n++
			if done[i].Timed() { // a short answer is an answer
				ok++
			}
			good, turns = good+done[i].GoodTurns, turns+done[i].Turns
		}
	}
	sv.WindowProbes = n
	if n > 0 {
		sv.SuccessRate = fmt.Sprintf("%d of %d (%s)", ok, n, pct(float64(ok)/float64(n)))
	}
	if len(inFlight) > 0 {
		sv.InFlight = "sent " + ago(now, inFlight[0].Sent)
	}
	switch next, scheduled := s.nextProbe(target, sc.Name); {
	case sv.InFlight != "":
		sv.Next = "after the probe in flight"
	case held:
		sv.Next = "held while a sweep loads the target"
	case !scheduled:
		sv.Next = "not scheduled (the scheduler is not running)"
	case next.After(now):
		sv.Next = "in " + human(next.Sub(now)) + " (" + clock(next) + ")"
	default:
		sv.Next = "due now (waiting for a free slot on the target)"
	}
	if len(done) > 0 {
		p := done[len(done)-1]
		sv.Last = &lastView{Ago: ago(now, p.Sent), At: clock(p.Sent), Kind: string(p.Kind), Reason: string(p.Reason), Err: p.Err,
			OK: p.OK(), Short: p.Timed() && !p.OK(), PromptTokens: p.PromptTokens, OutputTokens: p.OutputTokens, RequestedTokens: p.RequestedTokens, CacheHit: p.CacheHit}
	}
	breach := []string{}
	for _, row := range sv.Rows {
		if row.Verdict == "breach" {
			breach = append(breach, fmt.Sprintf("%s %s %s %s", row.Name, row.TailLabel, row.Tail, map[string]string{"≤": ">", "≥": "<"}[row.LimitOp]+" "+row.Limit))
		}
	}
	disabled, maxLen := false, 0
	if s.o.Disabled != nil {
		disabled, maxLen = s.o.Disabled(target, sc.Name)
	}
	switch {
	case disabled:
		sv.Status = "disabled"
		sv.StatusText = fmt.Sprintf("disabled: %d input and %d output tokens exceed the model's max_model_len %d", sc.InputTokens, sc.OutputTokens, maxLen)
		sv.Next = "none while the scenario is disabled"
	case sv.Last == nil:
		sv.Status, sv.StatusText = "waiting", "no probe yet"
		if sv.InFlight != "" {
			sv.StatusText = "first probe in flight"
		}
	case sv.Last.Reason == string(prober.ReasonPromptTruncated):
		sv.Status, sv.StatusText = "failing", "does not fit the server's context window: "+sv.Last.Err
	case !sv.Last.OK && !sv.Last.Short:
		sv.Status, sv.StatusText = "failing", "last probe failed: "+sv.Last.Kind
		if sv.Last.Reason != "" {
			sv.StatusText += " (" + sv.Last.Reason + ")"
		}
	case n >= minSuccessProbes && float64(ok) < minSuccessRatio*float64(n):
		sv.Status = "breach"
		sv.StatusText = fmt.Sprintf("failing often: %d of %d probes in the last %s succeeded (below %.0f %%)", ok, n, human(s.o.Window), minSuccessRatio*100)
	case !sc.Thresholds.Any():
		sv.Status, sv.StatusText = "ok", "probing (no thresholds set)"
	case turns == 0:
		sv.Status, sv.StatusText = "ok", fmt.Sprintf("no probe in the last %s to judge", human(s.o.Window))
	case float64(good) < goodputObjective*float64(turns):
		sv.Status = "breach"
		sv.StatusText = fmt.Sprintf("SLA breached: only %s meet every threshold at once (%d of %d probes in the last %s; objective %s)",
			share(good, turns), good, turns, human(s.o.Window), pct(goodputObjective))
		if len(breach) > 0 {
			sv.StatusText += "; " + strings.Join(breach, "; ")
		}
	default:
		sv.Status = "ok"
		sv.StatusText = fmt.Sprintf("within SLA: %s meet every threshold at once (%d of %d probes in the last %s; objective %s)",
			share(good, turns), good, turns, human(s.o.Window), pct(goodputObjective))
	}
	if sv.Last != nil && sv.Last.Short && sv.Status != "disabled" {
		sv.StatusText += fmt.Sprintf("; the server ends answers early (it ignores ignore_eos): TTFT and E2E at the asked length are recorded, ITL and decode speed from %d tokens", prober.MinDecodeTokens)
	}
	return sv
}

// goodputObjective is the share of probes that must meet every threshold
// of their scenario at once for the page to show a scenario within SLA:
// the joint SLO's objective of the alert rules (alertgen.Default).
const goodputObjective = slo.GoodputObjective

// share prints good/n with one decimal, so that 98.6 % does not read as the
// 99 % objective it misses.
func share(good, n int) string { return fmt.Sprintf("%.1f %%", 100*float64(good)/float64(n)) }

// A scenario whose probes in the window succeed less often than this is
// shown failing often, as the alert rules page at a 1 h success ratio
// below 90 %; it takes a few probes to say so.
const (
	minSuccessRatio  = 0.9
	minSuccessProbes = 3
)

func (s *Server) nextProbe(target, scenario string) (time.Time, bool) {
	if s.o.NextProbe == nil {
		return time.Time{}, false
	}
	return s.o.NextProbe(target, scenario)
}

func (s *Server) gpuView(now time.Time, nvmlOn bool) gpuView {
	v := gpuView{Off: !nvmlOn}
	if s.o.GPUs == nil || !s.o.GPUs.Up() {
		return v
	}
	v.Up = true
	rs := s.o.GPUs.Read()
	if !rs.Time.IsZero() {
		v.ReadAgo = ago(now, rs.Time)
	}
	read := map[int]int{}
	for i, g := range rs.GPUs {
		read[g.Index] = i
	}
	for _, dev := range s.o.GPUs.Devices() {
		dv := gpuDeviceView{Index: dev.Index, Name: dev.Name, UUID: dev.UUID}
		if i, ok := read[dev.Index]; ok {
			g := rs.GPUs[i]
			if g.HasPower {
				dv.HasPower = true
				dv.Power = fmt.Sprintf("%.0f W", g.PowerWatts)
				if g.HasPowerLimit {
					dv.Power += fmt.Sprintf(" of %.0f W", g.PowerLimitWatts)
				}
			}
			if g.HasUtilization {
				dv.HasUtil, dv.Util = true, pct(g.UtilizationRatio)
			}
			if g.HasMemory {
				dv.HasMemTemp = true
				dv.Memory = fmt.Sprintf("%.1f of %.1f GiB", g.MemoryUsedBytes/(1<<30), g.MemoryTotalBytes/(1<<30))
			}
			if g.HasTemperature {
				dv.HasMemTemp = true
				dv.Temp = fmt.Sprintf("%.0f °C", g.TemperatureCelsius)
			}
		}
		v.Devices = append(v.Devices, dv)
	}
	return v
}

func engineOf(st engine.Status, now time.Time) *engineView {
	ev := &engineView{URL: report.RedactURL(st.URL), Up: st.Up, Tried: st.Tried}
	if st.LastErr != nil {
		ev.Err = st.LastErr.Error()
	}
	if st.HasLatest {
		l := st.Latest
		ev.Flavor = l.Flavor
		ev.ScrapedAgo = ago(now, l.Time)
		if l.HasQueue {
			ev.Running, ev.Waiting = fmt.Sprintf("%.0f", l.Running), fmt.Sprintf("%.0f", l.Waiting)
		}
		if l.HasKVCache {
			ev.KV = pct(l.KVCacheUsage)
		}
	}
	return ev
}

func (s *Server) sweepView(snap sweeper.Snapshot, now time.Time) *sweepView {
	v := &sweepView{Enabled: snap.Enabled, Running: snap.Running, Current: snap.Current, Holding: snap.Holding}
	if snap.Step != nil {
		v.Step = fmt.Sprintf("%s, %s, N=%d", snap.Step.Scenario, snap.Step.Mode, snap.Step.Concurrency)
	}
	for _, t := range sortedKeys(snap.Paused) {
		v.Paused = append(v.Paused, t+": "+snap.Paused[t])
	}
	for _, t := range snap.Targets {
		tv := sweepTargetView{Target: t.Target}
		if t.Result != nil {
			base := "/sweep/" + url.PathEscape(t.Target)
			tv.HasReport, tv.HTML, tv.JSON = true, base+"/report.html", base+"/report.json"
			tv.Model = t.Result.Meta.Model
			if !t.Result.Meta.FinishedAt.IsZero() {
				tv.Finished = t.Result.Meta.FinishedAt.Local().Format("2006-01-02 15:04:05") + " (" + ago(now, t.Result.Meta.FinishedAt) + ")"
			}
			tv.Interrupted = t.Result.Meta.Interrupted
			tv.Headline = headline(t.Result)
			if c := t.Result.Comparison; c != nil {
				tv.Compared = "against " + c.BaseLabel
				n := 0
				for _, f := range c.Findings() {
					if !f.Worse {
						continue
					}
					if n++; n <= maxWorseShown {
						tv.Worse = append(tv.Worse, render.FindingText(f))
					}
				}
				if n > maxWorseShown {
					tv.Worse = append(tv.Worse, fmt.Sprintf("… and %d more in report.html", n-maxWorseShown))
				}
				tv.WorseCount = n
			}
		}
		if a := t.LastAttempt; !a.Started.IsZero() {
			tv.Attempt = fmt.Sprintf("%s, by %s", a.Started.Local().Format("2006-01-02 15:04:05"), a.Trigger)
			tv.AttemptErr, tv.AttemptComplete = a.Error, a.Complete
			tv.AttemptUnsuccessful = !a.Complete || a.Error != ""
		}
		v.Targets = append(v.Targets, tv)
	}
	return v
}

// maxWorseShown is how many regressions the status page lists per target;
// report.html has them all.
const maxWorseShown = 5

// headline is the report's headline in a few words.
func headline(r *report.Report) []string {
	var out []string
	h := r.Headline
	if h.PeakDecode == nil && h.RequestsSent == 0 {
		h = report.ComputeHeadline(r) // as report.html computes it
	}
	fig := func(label string, f *report.Figure, format string) {
		if f == nil {
			return
		}
		s := label + " " + fmt.Sprintf(format, f.Value)
		if f.Scenario != "" {
			s += " (" + f.Scenario
			if f.Concurrency > 0 {
				s += fmt.Sprintf(", N=%d", f.Concurrency)
			}
			s += ")"
		}
		out = append(out, s)
	}
	fig("peak decode", h.PeakDecode, "%.1f tok/s")
	fig("max system throughput", h.MaxSystemThroughput, "%.0f tok/s")
	fig("best TTFT", h.BestTTFT, "%.3f s")
	for _, q := range h.MaxSafeQueue {
		mark := ""
		switch {
		case q.AtLeast:
			mark = "≥"
		case q.Approximate:
			mark = "~"
		}
		out = append(out, fmt.Sprintf("max safe queue %s: %s%.0f", q.Scenario, mark, q.Value))
	}
	if h.RequestsSent > 0 {
		out = append(out, fmt.Sprintf("success %s of %d requests", pct(h.SuccessRate), h.RequestsSent))
	}
	return out
}

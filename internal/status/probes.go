package status

import (
	"fmt"
	"net/http"
	"slices"
)

type probesData struct {
	Target, Scenario string
	Scenarios        []scenarioLink
	Known            []string // every target, when the one asked for is unknown
	Probes           []probeView
	Total            int // probes kept; Probes holds the newest maxProbeRows
	TargetLogs       []logView
	Refresh          int
}

type scenarioLink struct {
	Name, URL string
	Current   bool
}

type probeView struct {
	Scenario, Model, Sent, Ago string
	Running                    bool
	OK                         bool
	Kind, Reason, Err          string
	TTFT, ITL, Decode, E2E     string
	Tokens                     string
	CacheHit                   bool
	ResponseID, FinishReason   string
	TraceID, Split             string
	Logs                       []logView
	Stamps                     string // kernel or user: where the arrival times came from
}

type logView struct {
	Time, Level, Text string
}

// maxProbeRows bounds the probe view: the newest probes tell why a
// probe fails; every kept one would make a page of megabytes.
const maxProbeRows = 100

// serveProbes is the blackbox-exporter-style view of a target's recent
// probes: each with its outcome, its numbers and the log lines it caused.
func (s *Server) serveProbes(w http.ResponseWriter, r *http.Request) {
	cfg := s.o.Config()
	target, scenario := r.URL.Query().Get("target"), r.URL.Query().Get("scenario")
	var names []string
	for _, t := range cfg.TargetConfigs {
		names = append(names, t.Name)
	}
	if !slices.Contains(names, target) {
		s.render(w, http.StatusNotFound, probesTmpl, probesData{Target: target, Known: names})
		return
	}
	now := s.o.Now()
	d := probesData{Target: target, Scenario: scenario}
	if s.o.Refresh > 0 {
		d.Refresh = int(s.o.Refresh.Seconds())
	}
	d.Scenarios = append(d.Scenarios, scenarioLink{Name: "all", URL: probesURL(target, ""), Current: scenario == ""})
	for _, sc := range cfg.Scenarios(target) {
		d.Scenarios = append(d.Scenarios, scenarioLink{Name: sc.Name, URL: probesURL(target, sc.Name), Current: scenario == sc.Name})
	}
	for _, p := range s.o.Recorder.TargetProbes(target) {
		if scenario != "" && p.Scenario != scenario {
			continue
		}
		d.Total++
		if len(d.Probes) >= maxProbeRows {
			continue
		}
		pv := probeView{Scenario: p.Scenario, Model: p.Model, Sent: p.Sent.Local().Format("2006-01-02 15:04:05.000"), Ago: ago(now, p.Sent),
			Running: !p.Done, OK: p.OK(), Kind: string(p.Kind), Reason: string(p.Reason), Err: p.Err,
			CacheHit: p.CacheHit, ResponseID: p.ResponseID, FinishReason: p.FinishReason,
			TraceID: p.TraceID, Split: probeSplit(&p), Stamps: p.Stamps}
		if p.Done {
			pv.Tokens = fmt.Sprintf("%d in, %d of %d out", p.PromptTokens, p.OutputTokens, p.RequestedTokens)
		}
		if p.Timed() {
			pv.TTFT, pv.ITL = measured(p.TTFT.Seconds(), "s"), measured(p.ITL.Seconds(), "s")
			pv.Decode, pv.E2E = measured(p.Decode, "tok/s"), measured(p.E2E.Seconds(), "s")
		}
		for _, l := range p.Logs {
			pv.Logs = append(pv.Logs, logView{Time: l.Time.Local().Format("15:04:05.000"), Level: l.Level, Text: l.Text})
		}
		d.Probes = append(d.Probes, pv)
	}
	for _, l := range s.o.Recorder.TargetLogs(target) {
		d.TargetLogs = append(d.TargetLogs, logView{Time: l.Time.Local().Format("2006-01-02 15:04:05.000"), Level: l.Level, Text: l.Text})
	}
	s.render(w, http.StatusOK, probesTmpl, d)
}

// measured formats a timing of a probe, or "–" when it was not measured
// (zero: an empty answer, or too few tokens for ITL).
func measured(v float64, unit string) string {
	if v <= 0 {
		return "–"
	}
	return formatValue(v, unit)
}

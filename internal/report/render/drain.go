package render

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
)

// How the steps started: on an engine that /metrics showed empty, after a
// fixed cooldown (no /metrics to ask), or on a busy engine. The report
// says which, so a reader knows how far to trust each step.

// busyMark flags a step that started on a busy engine, in tables and notes.
const busyMark = "⚠"

type busyStep struct {
	Scenario string
	Mode     sweep.Mode
	Step     report.Step
}

type drainSummary struct {
	Steps        int     // steps with drain information
	Engine       int     // steps that waited on the engine's /metrics
	Cooldown     int     // steps that waited a fixed cooldown
	MaxWait      float64 // longest /metrics wait of a step that drained
	CooldownWait float64 // longest cooldown
	Busy         []busyStep
}

func summarizeDrain(r *report.Report) drainSummary {
	var d drainSummary
	for _, s := range r.Scenarios {
		for _, m := range s.Modes() {
			for _, st := range sortedSteps(m.Steps) {
				dr := st.Drain
				if dr == nil {
					continue
				}
				d.Steps++
				switch dr.Method {
				case sweep.DrainEngine:
					d.Engine++
					if !dr.Busy {
						d.MaxWait = max(d.MaxWait, dr.WaitedSeconds)
					}
				case sweep.DrainCooldown:
					d.Cooldown++
					d.CooldownWait = max(d.CooldownWait, dr.WaitedSeconds)
				}
				if dr.Busy {
					d.Busy = append(d.Busy, busyStep{s.Name, m.Mode, st})
				}
			}
		}
	}
	return d
}

// allCooldown: no step could ask the engine whether it was empty.
func (d drainSummary) allCooldown() bool { return d.Steps > 0 && d.Cooldown == d.Steps }

const noMetricsText = "The engine exposed no /metrics with running and waiting counts, so each step started after a fixed cooldown and could not be checked for leftovers of the previous step."

// metaText is the one-line summary in the report's header.
func (d drainSummary) metaText() string {
	switch {
	case d.Steps == 0:
		return ""
	case d.allCooldown():
		return "fixed cooldown (" + fmtWait(d.CooldownWait) + "): the engine had no /metrics, leftovers not checked"
	}
	var parts []string
	if d.Engine > 0 {
		parts = append(parts, fmt.Sprintf("waited for the engine’s /metrics to show it empty (up to %s)", fmtWait(d.MaxWait)))
	}
	if d.Cooldown > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d steps after a fixed cooldown (no /metrics)", d.Cooldown, d.Steps))
	}
	if len(d.Busy) > 0 {
		parts = append(parts, fmt.Sprintf("%s %d started busy", busyMark, len(d.Busy)))
	}
	return strings.Join(parts, "; ")
}

// methodText is the method section's row.
func (d drainSummary) methodText() string {
	switch {
	case d.Steps == 0:
		return ""
	case d.allCooldown():
		return noMetricsText
	}
	msg := fmt.Sprintf("before each step and each burst round, slaprobe waited until the engine’s /metrics showed nothing running and nothing waiting (%d of %d steps; the longest wait that ended on an empty engine was %s).",
		d.Engine, d.Steps, fmtWait(d.MaxWait))
	if d.Cooldown > 0 {
		msg += fmt.Sprintf(" %d steps could not read those counts and started after a fixed cooldown instead, unchecked for leftovers.", d.Cooldown)
	}
	msg += " A step whose engine was still busy when the wait ran out is marked " + busyMark + ", drawn hollow with a red ring in the charts, and left out of capacity and the headline."
	return msg
}

// notes are shown at the top of the report: what a reader must know
// before trusting the numbers.
func (d drainSummary) notes() []string {
	var out []string
	if d.allCooldown() {
		out = append(out, noMetricsText)
	}
	if len(d.Busy) > 0 {
		var at []string
		for _, b := range d.Busy {
			at = append(at, fmt.Sprintf("%s %s N=%d (%s)", b.Scenario, modeLabel(b.Mode), b.Step.Concurrency, busyCounts(b.Step.Drain)))
		}
		out = append(out, fmt.Sprintf("%s %d %s started while the engine still had requests of its own: %s. They are marked %s in the tables, drawn hollow with a red ring in the charts, and left out of capacity and the headline.",
			busyMark, len(d.Busy), plural(len(d.Busy), "step", "steps"), strings.Join(at, "; "), busyMark))
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// busyCounts: "3 running, 1 waiting".
func busyCounts(d *sweep.DrainResult) string {
	if d == nil {
		return ""
	}
	return fmt.Sprintf("%s running, %s waiting", countText(d.Running), countText(d.Waiting))
}

func countText(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// startCell is a step's "engine at start" table cell.
func startCell(s report.Step) string {
	d := s.Drain
	switch {
	case d == nil:
		return "–"
	case d.Busy:
		return busyMark + " busy: " + busyCounts(d)
	case d.Method == sweep.DrainCooldown:
		return "cooldown " + fmtWait(d.WaitedSeconds)
	}
	return "empty after " + fmtWait(d.WaitedSeconds)
}

// suspectTip is appended to the tooltip of a busy step's point.
func suspectTip(s report.Step) string {
	if !s.StartedBusy() {
		return ""
	}
	return " · " + busyMark + " started on a busy engine (" + busyCounts(s.Drain) + "): suspect"
}

// busyStepNote explains a busy step under its scenario's tables.
func busyStepNote(mode sweep.Mode, s report.Step) string {
	return fmt.Sprintf("%s %s N=%d started while the engine still had %s requests (after waiting %s for it to empty): its numbers are suspect, left out of capacity and the headline.",
		busyMark, sentence(modeLabel(mode)), s.Concurrency, busyCounts(s.Drain), fmtWait(s.Drain.WaitedSeconds))
}

// notMeasuredNote explains, under its scenario's tables, a step in which no
// request ended.
func notMeasuredNote(mode sweep.Mode, s report.Step) string {
	why := s.NotMeasured
	if why == "" {
		why = "no request ended in it"
	}
	return fmt.Sprintf("%s N=%d measured nothing: %s. Its row shows “–”; capacity, scaling efficiency and the headline leave it out.",
		sentence(modeLabel(mode)), s.Concurrency, why)
}

// fmtWait formats a drain wait: ms below 1 s, one decimal below 10 s,
// whole seconds above.
func fmtWait(v float64) string {
	switch {
	case v < 1:
		return fmtSeconds(v)
	case v < 10:
		return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) + " s"
	}
	return grouped(v, 0) + " s"
}

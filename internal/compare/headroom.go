package compare

import (
	"fmt"
	"math"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
)

// Headroom judges the headroom of a replay sweep (slaprobe headroom)
// against a baseline's: the one judging of `compare` and `headroom
// --baseline`. A headroom is one interpolated number per run, known only
// to its bracket: the last speed-up that held and the first that did not.
// The change is worse when the new bracket lies wholly at or below the
// base's (the new run failed at a speed-up the base held at), better in
// the other direction, and no change when they overlap.
func Headroom(base, cur *sweep.Headroom) *report.HeadroomChange {
	if base == nil || cur == nil {
		return nil
	}
	hc := &report.HeadroomChange{Workload: cur.Workload, Base: base.Multiple, New: cur.Multiple,
		BaseText: base.String(), NewText: cur.String(), Verdict: report.VerdictUnknown}
	if base.Multiple > 0 {
		hc.Change = cur.Multiple/base.Multiple - 1
	}
	if base.Workload != cur.Workload {
		hc.Note = fmt.Sprintf("workloads differ: %q in the base run, %q in the new", base.Workload, cur.Workload)
	}
	if base.Rule != cur.Rule {
		hc.Note = appendNote(hc.Note, fmt.Sprintf("rules differ: %q in the base run, %q in the new", base.Rule, cur.Rule))
	}
	bl, bh, bok := base.Bracket()
	nl, nh, nok := cur.Bracket()
	if !bok || !nok {
		hc.Note = appendNote(hc.Note, "a run measured no step")
		return hc
	}
	hc.Resolution = fmt.Sprintf("the base run's headroom lies in %s, the new run's in %s", bracketText(bl, bh), bracketText(nl, nh))
	if hc.Note != "" {
		return hc // not the same question: no verdict
	}
	switch {
	case nh <= bl:
		hc.Verdict = report.VerdictWorse
	case nl >= bh:
		hc.Verdict = report.VerdictBetter
	default:
		hc.Verdict = report.VerdictNoChange
	}
	return hc
}

// bracketText is "[×3, ×3.5]", "[×4, ∞)", "[0, ×0.5]".
func bracketText(lo, hi float64) string {
	l := "0"
	if lo > 0 {
		l = "×" + sweep.FormatSpeedup(lo)
	}
	if math.IsInf(hi, 1) {
		return "[" + l + ", ∞)"
	}
	return "[" + l + ", ×" + sweep.FormatSpeedup(hi) + "]"
}

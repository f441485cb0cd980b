package bench

import (
	"fmt"
	"io"

	"github.com/slaprobe/slaprobe/internal/compare"
	"github.com/slaprobe/slaprobe/internal/gate"
	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/report/render"
)

// A headroom replay (slaprobe headroom) is not a sweep bench runs: bench
// loads a target with closed loops and bursts, headroom replays a trace.
// What they share is the report and its judging: headroom --baseline judges
// with compare.Headroom and the gate's headroom rule, as `slaprobe compare`
// does on two headroom reports.

// LoadHeadroomBaseline reads the report of an earlier slaprobe headroom
// (its report.json, or the directory holding one).
func LoadHeadroomBaseline(path string) (*report.Report, error) {
	r, err := compare.LoadReport(path)
	if err != nil {
		return nil, err
	}
	if r.Headroom == nil {
		return nil, fmt.Errorf("%s: not a headroom report (no headroom section); expected the --out of slaprobe headroom", path)
	}
	return r, nil
}

// HeadroomOptions say what slaprobe headroom does with its report.
type HeadroomOptions struct {
	Out string // directory for report.json, report.md and report.html; "" for none
	// Base, when set, is judged against: BaseLabel names it, and the gate
	// fails (ExitRegression) on a significant drop of more than MaxDrop (a
	// share: 0.1 for 10 %).
	Base      *report.Report
	BaseLabel string
	MaxDrop   float64
	Stdout    io.Writer
	Stderr    io.Writer
}

// PublishHeadroom writes a headroom report and judges it against the
// baseline; it returns the exit code.
func PublishHeadroom(rep *report.Report, o HeadroomOptions) int {
	if o.Base != nil {
		rep = compare.Compare(o.Base, rep, compare.Options{BaseLabel: o.BaseLabel})
	}
	if o.Out != "" {
		paths, err := render.Write(o.Out, rep)
		if err != nil {
			fmt.Fprintf(o.Stderr, "headroom: write report: %v\n", err)
			return ExitFailure
		}
		fmt.Fprintf(o.Stdout, "report written to %s\n", o.Out)
		for _, p := range paths {
			fmt.Fprintf(o.Stdout, "  %s\n", p)
		}
	}
	if o.Base == nil {
		return ExitOK
	}
	if h := rep.Comparison.Headroom; h != nil {
		fmt.Fprintln(o.Stdout, render.HeadroomChangeText(h))
	}
	g := gate.Options{Rules: gate.Rules{{Kind: gate.KindHeadroom, Points: 100 * o.MaxDrop}}, Unknown: gate.UnknownPass}
	code, err := g.Apply(rep.Comparison, o.Stdout)
	if err != nil {
		fmt.Fprintf(o.Stderr, "headroom: %v\n", err)
		return ExitFailure
	}
	return code
}

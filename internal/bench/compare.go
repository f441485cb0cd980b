package bench

import (
	"fmt"
	"io"

	"github.com/slaprobe/slaprobe/internal/compare"
	"github.com/slaprobe/slaprobe/internal/gate"
	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/report/render"
)

// CompareOptions configure Compare: `slaprobe compare BASE NEW`.
type CompareOptions struct {
	Base, New string // report.json files, or the directories holding one
	Out       string // directory the comparison is written to
	Gate      gate.Options
	Stdout    io.Writer
	Stderr    io.Writer
}

// Compare reads two reports, writes NEW judged against BASE to o.Out,
// prints the verdict and, with o.Gate enabled, applies it. It returns the
// exit code, as Run does.
func Compare(o CompareOptions) int {
	b, err := compare.LoadReport(o.Base)
	if err != nil {
		fmt.Fprintf(o.Stderr, "compare: BASE: %v\n", err)
		return ExitFailure
	}
	n, err := compare.LoadReport(o.New)
	if err != nil {
		fmt.Fprintf(o.Stderr, "compare: NEW: %v\n", err)
		return ExitFailure
	}
	rep := compare.Compare(b, n, compare.Options{BaseLabel: o.Base})
	return publish(rep, publishOptions{cmd: "compare", noun: "comparison", out: o.Out, gate: o.Gate, stdout: o.Stdout, stderr: o.Stderr})
}

// publishOptions say how publish writes a report and who it is for.
type publishOptions struct {
	cmd, noun   string // "bench", "report": the error prefix and what "… written to" names
	out         string
	gate        gate.Options
	interrupted bool // the run stopped early: a gate says so, and the exit code is ExitInterrupted
	stdout      io.Writer
	stderr      io.Writer
}

// publish writes rep to o.out, lists the files, prints the comparison's
// summary where rep has one and applies the gate (when enabled) to it: the
// last steps of bench and compare alike. It returns the exit code.
func publish(rep *report.Report, o publishOptions) int {
	paths, err := render.Write(o.out, rep)
	if err != nil {
		fmt.Fprintf(o.stderr, "%s: write report: %v\n", o.cmd, err)
		return ExitFailure
	}
	fmt.Fprintf(o.stdout, "%s written to %s\n", o.noun, o.out)
	for _, p := range paths {
		fmt.Fprintf(o.stdout, "  %s\n", p)
	}
	if rep.Comparison != nil {
		compare.WriteSummary(o.stdout, rep.Comparison)
	}
	code := ExitOK
	if rep.Comparison != nil && o.gate.Enabled() {
		g := o.gate
		if o.interrupted {
			g.Interrupted = ExitInterrupted
		}
		if code, err = g.Apply(rep.Comparison, o.stdout); err != nil {
			fmt.Fprintf(o.stderr, "%s: %v\n", o.cmd, err)
			return ExitFailure
		}
	}
	if o.interrupted {
		return ExitInterrupted // a partial run is no verdict; the gate says so
	}
	return code
}

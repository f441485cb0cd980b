package main

import (
	"context"
	"fmt"

	"github.com/slaprobe/slaprobe/internal/bench"
	"github.com/slaprobe/slaprobe/internal/compare"
)

func addCompare(c *cli) {
	cmd := c.app.Command("compare", "Compare two benchmark reports: is NEW better, worse or the same as BASE, and how sure is it?\n\n"+
		"Reads two report.json files (or the --out directories of slaprobe bench) and writes report.json, report.md and a self-contained "+
		"report.html of NEW with BASE drawn beside it in every chart (same colour, dashed and faint, named \"(base)\"), a change column in "+
		"every table, and a verdict per scenario, step and metric: better, worse or no detectable change, from a seeded bootstrap confidence "+
		"interval of the difference of medians of the raw per-request values, or an exact rank interval where the values (burst rounds, slices, requests) are fewer than 30, "+
		"at the report's 95% shared by its figures (the same inputs give the same report; too few rounds or slices for that level give no verdict, and say how many would). "+
		"A change is significant when the interval excludes zero and the change is at least 5%. Reports written before raw samples were "+
		"kept (slaprobe.report/v1) compare on their summaries, without confidence. It prints the significant regressions first.\n\n"+
		"  slaprobe compare before/ after/ --out=compare/")
	base := cmd.Arg("BASE", "The baseline: a report.json, or the directory holding one.").Required().String()
	cur := cmd.Arg("NEW", "The run to judge: a report.json, or the directory holding one.").Required().String()
	out := cmd.Flag("out", "Directory the comparison is written to (created if needed).").Default("slaprobe-compare").String()
	c.command(cmd, func(context.Context) int {
		b, err := compare.LoadReport(*base)
		if err != nil {
			fmt.Fprintf(c.stderr, "compare: BASE: %v\n", err)
			return bench.ExitFailure
		}
		n, err := compare.LoadReport(*cur)
		if err != nil {
			fmt.Fprintf(c.stderr, "compare: NEW: %v\n", err)
			return bench.ExitFailure
		}
		rep := compare.Compare(b, n, compare.Options{BaseLabel: *base})
		paths, err := compare.WriteReport(*out, rep)
		if err != nil {
			fmt.Fprintf(c.stderr, "compare: write report: %v\n", err)
			return bench.ExitFailure
		}
		fmt.Fprintf(c.stdout, "comparison written to %s\n", *out)
		for _, p := range paths {
			fmt.Fprintf(c.stdout, "  %s\n", p)
		}
		compare.WriteSummary(c.stdout, rep.Comparison)
		return bench.ExitOK
	})
}

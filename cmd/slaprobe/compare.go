package main

import (
	"context"
	"strconv"

	"github.com/slaprobe/slaprobe/internal/bench"
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
		"Two reports of slaprobe headroom --out compare on their headroom: a change is significant when the runs' brackets (the last speed-up "+
		"that held, the first that did not) do not overlap, as headroom --baseline judges it.\n\n"+
		"With --fail-on it is a gate for CI: it exits "+strconv.Itoa(bench.ExitRegression)+" on a significant regression of the kinds named, "+
		strconv.Itoa(bench.ExitNoVerdict)+" when figures those kinds cover got no verdict (unless --fail-on-unknown=pass), 0 otherwise.\n\n"+
		"  slaprobe compare before/ after/ --out=compare/\n"+
		"  slaprobe compare before/ after/ --fail-on=metric:ttft,capacity --verdict-file=verdict.json")
	base := cmd.Arg("BASE", "The baseline: a report.json, or the directory holding one.").Required().String()
	cur := cmd.Arg("NEW", "The run to judge: a report.json, or the directory holding one.").Required().String()
	out := cmd.Flag("out", "Directory the comparison is written to (created if needed).").Default("slaprobe-compare").String()
	g := addGateFlags(cmd)
	c.command(cmd, func(context.Context) int {
		return bench.Compare(bench.CompareOptions{Base: *base, New: *cur, Out: *out, Gate: *g, Stdout: c.stdout, Stderr: c.stderr})
	})
}

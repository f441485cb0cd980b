package main

import (
	"strconv"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slaprobe/slaprobe/internal/gate"
)

// addGateFlags adds --fail-on, --fail-on-unknown and --verdict-file (compare,
// bench). A bad kind or policy is a usage error: kingpin rejects it, exit 2.
func addGateFlags(cmd *kingpin.CmdClause) *gate.Options {
	o := &gate.Options{}
	cmd.Flag("fail-on", "Exit "+strconv.Itoa(gate.ExitRegression)+" when the comparison finds a significant regression of this kind: "+
		"any (any figure worse, or capacity down), metric:<ttft|itl|decode|e2e|prefill> (that metric worse at any step), "+
		"capacity (max safe queue depth, use-case capacity or headroom down past a measured N or speed-up), goodput:<points> (goodput share "+
		"significantly down by more than this many percentage points), headroom:<percent> (the headroom of two slaprobe headroom reports "+
		"significantly down by more than this). Comma-separated, repeatable.").
		PlaceHolder("KIND").SetValue(&o.Rules)
	cmd.Flag("fail-on-unknown", "What --fail-on does when figures it covers got no verdict (too few burst rounds, slices or requests; "+
		"no raw samples; a step in one run only): fail (exit "+strconv.Itoa(gate.ExitNoVerdict)+", the default: a gate that cannot see does not pass) or pass. "+
		"Either way the figures are listed.").Default(gate.UnknownFail).SetValue(&o.Unknown)
	cmd.Flag("verdict-file", "Write the gate's verdict as JSON here: result, exit code, each regression (figure, base, new, change, interval) "+
		"and each figure without a verdict.").PlaceHolder("PATH").StringVar(&o.VerdictFile)
	return o
}

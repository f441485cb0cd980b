package main

import "github.com/slaprobe/slaprobe/internal/bench"

// Exit codes, the same for every command:
//
//	0    success; run, demo and sim also exit 0 when stopped by SIGTERM or
//	     SIGINT, after cancelling the probes in flight
//	1    the command refused its input or failed: an invalid config file or
//	     flag value it validates (check-config, run, bench, sim), a target
//	     that cannot be reached where one is required (bench), a report or
//	     state that cannot be written, a web server that cannot listen, a
//	     slaprobe that does not answer /-/healthy (healthcheck)
//	2    the command line could not be parsed: an unknown command or flag,
//	     a flag value of the wrong type or kind (kingpin rejects it before
//	     the command runs: --fail-on=latency, --fail-on-unknown=maybe), or
//	     flags that need another (bench --fail-on without --baseline)
//	3    compare and bench --baseline with --fail-on: a significant
//	     regression of a kind --fail-on names was found
//	4    compare and bench --baseline with --fail-on: no such regression,
//	     but figures --fail-on covers got no verdict (too few rounds,
//	     slices or requests; no raw samples; a step in one run only) and
//	     --fail-on-unknown=fail, the default; =pass exits 0 and lists them
//	130  bench was interrupted (SIGINT, SIGTERM); the report of the steps
//	     measured so far is written
//
// docs/reliability.md lists them for operators; TestExitCodes checks them.
// The codes are defined once, in internal/bench, which returns them (3 and
// 4 in internal/gate, which bench re-exports).
const (
	exitOK          = bench.ExitOK
	exitFailure     = bench.ExitFailure
	exitUsage       = bench.ExitUsage
	exitInterrupted = bench.ExitInterrupted
	exitRegression  = bench.ExitRegression
	exitNoVerdict   = bench.ExitNoVerdict
)

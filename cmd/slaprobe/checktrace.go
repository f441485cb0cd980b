package main

import (
	"fmt"
	"io"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slaprobe/slaprobe/internal/workload"
)

// traceFlags are check-config's flags for summarising a trace file.
type traceFlags struct {
	path     *string
	format   *string
	models   *[]string
	logTypes *[]string
}

func addTraceFlags(cmd *kingpin.CmdClause) *traceFlags {
	formats := make([]string, len(workload.Formats))
	for i, f := range workload.Formats {
		formats[i] = string(f)
	}
	return &traceFlags{
		path: cmd.Flag("trace", "Summarise this request trace too: requests, time span, rate, length percentiles, shared-prefix share (docs/workloads.md).").
			PlaceHolder("FILE").String(),
		format: cmd.Flag("trace.format", "Format of --trace: mooncake, azure or burstgpt (csv and jsonl need a column mapping: name them in a scenario's workload).").
			Default(string(workload.FormatMooncake)).Enum(formats...),
		models: cmd.Flag("trace.model", "BurstGPT: keep only rows of this Model (repeatable), e.g. GPT-4.").
			PlaceHolder("MODEL").Strings(),
		logTypes: cmd.Flag("trace.log-type", "BurstGPT: keep only rows of this Log Type (repeatable), e.g. 'Conversation log'.").
			PlaceHolder("TYPE").Strings(),
	}
}

// summarize prints the summary of the trace the flags name (workload.PrintSummary).
// It reports whether it succeeded; no --trace is a success.
func (f *traceFlags) summarize(stdout, stderr io.Writer) bool {
	if *f.path == "" {
		return true
	}
	spec := workload.Spec{Path: *f.path, Format: workload.Format(*f.format), Models: *f.models, LogTypes: *f.logTypes}
	if err := workload.PrintSummary(spec, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "trace error: %v\n", err)
		return false
	}
	return true
}

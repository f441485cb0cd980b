package dashgen

import "fmt"

// The series of trace-shaped and live scenarios (docs/workloads.md) carry target, scenario and
// length_class, no model: these queries select by target and scenario only.
const (
	legendClass = "{{length_class}} {{target}} {{scenario}}"
	byClass     = "target, scenario, length_class"
	// classWindow is the window of the good share by class, as docs/workloads.md's SLI reads it: a
	// trace-shaped scenario's probes are spread over five classes, so 15 min holds few of each.
	classWindow = "1h"
)

func classSel(metric string, extra ...string) string {
	return sel(metric, append([]string{mTarget, mScenario}, extra...)...)
}

// classQuantile is the q-quantile of slaprobe_trace_ttft_seconds per class over probeWindow, from the
// classic buckets or the native histogram.
func classQuantile(q string) string {
	return fmt.Sprintf("histogram_quantile(%s, sum by (%s, le) (rate(%s[%s])))\nor\nhistogram_quantile(%s, sum by (%s) (rate(%s[%s])))",
		q, byClass, classSel("slaprobe_trace_ttft_seconds_bucket"), probeWindow, q, byClass, classSel("slaprobe_trace_ttft_seconds"), probeWindow)
}

// classRow adds the length classes of trace-shaped and live scenarios: TTFT p50 and p99 per class
// against the class's threshold, and the good share per class. Empty without such a scenario.
func classRow(b *board) {
	b.row("Traffic-shaped scenarios: TTFT by length class")
	b.add(12, 8, timeseries("TTFT by length class: p50 and p99",
		"Probes of trace-shaped and live scenarios (workload:), by prompt-length class (1k, 4k, 16k, 32k, "+
			"96k: the nearest centre on a log scale), p50 and p99 (dotted) over 15 min of "+
			"slaprobe_trace_ttft_seconds. Dashed: each class's TTFT threshold "+
			"(slaprobe_trace_ttft_threshold_seconds, ttft_by_class).",
		"s", nil,
		rangeQ(classQuantile("0.5"), "p50 "+legendClass),
		rangeQ(classQuantile("0.99"), "p99 "+legendClass),
		rangeQ(fmt.Sprintf("max by (scenario, length_class) (%s)", sel("slaprobe_trace_ttft_threshold_seconds", mScenario)),
			"SLA {{length_class}} {{scenario}}"),
	).dotted("^p99 .*").thresholdLines())
	good := timeseries("Good share by length class",
		"Share of the probes of each class, over the last hour, answered within the class's TTFT threshold "+
			"(slaprobe_trace_probes_total{result=\"good\"} over all results: good, slow, error).",
		"percentunit", nil,
		rangeQ(fmt.Sprintf("sum by (%s) (rate(%s[%s]))\n/\nsum by (%s) (rate(%s[%s]))",
			byClass, classSel("slaprobe_trace_probes_total", `result="good"`), classWindow,
			byClass, classSel("slaprobe_trace_probes_total"), classWindow), legendClass))
	good.FieldConfig.Defaults.Max = num(1)
	b.add(12, 8, good)
}

// liveMixRow adds each target's live length mix: the share of the engine's finished requests per
// prompt-length class over the last window (workload.Live), beside the classes probed.
func liveMixRow(b *board) {
	b.row("Live length mix")
	mix := timeseries("Live length mix: share of requests by class",
		"Share of the requests each target's engine finished in the last 15 min whose prompt falls in each "+
			"length class, from the engine's own prompt-length histogram (slaprobe_live_mix_class_ratio), "+
			"stacked to 100 %. A fixed scenario whose class carries under 1 % is flagged on the status page.",
		"percentunit", nil,
		rangeQ(sel("slaprobe_live_mix_class_ratio", mTarget), "{{length_class}} {{target}}"))
	c := mix.FieldConfig.Defaults.Custom
	c.FillOpacity, c.Stacking = 60, &Stacking{Group: "A", Mode: "normal"}
	mix.FieldConfig.Defaults.Max = num(1)
	b.add(12, 8, mix)
	b.add(12, 8, timeseries("Probes by length class vs live requests",
		"Solid: requests the engine finished in the live-mix window (slaprobe_live_mix_requests). Dotted: "+
			"probes of trace-shaped and live scenarios per 15 min by class, to set beside the mix.",
		"short", nil,
		rangeQ(sel("slaprobe_live_mix_requests", mTarget), "live requests {{target}}"),
		rangeQ(fmt.Sprintf("sum by (target, length_class) (increase(%s[%s]))", classSel("slaprobe_trace_probes_total"), probeWindow),
			"probes {{length_class}} {{target}}"),
	).dotted("^probes .*"))
}

// Package slo holds slaprobe's service-level numbers in one place: the
// experience bands, the classic bucket edges of the probe histograms, the
// objectives, the electricity price and the names of the report's charts. It imports nothing of
// slaprobe's, so the collector, the alert and dashboard generators, the
// report and the status page all read the same values.
package slo

// Objective is the share of probes that must be within a scenario's
// threshold, and GoodputObjective the share that must meet every threshold
// of their scenario at once (slaprobe_probes_good_total ÷
// slaprobe_probes_total). alertgen.Default uses both; the status page shows a
// scenario within SLA against GoodputObjective.
const (
	Objective        = 0.99
	GoodputObjective = 0.99
)

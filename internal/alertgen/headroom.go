package alertgen

import (
	"fmt"
	"strconv"
)

// DefaultMinTrafficMultiple is Params.MinTrafficMultiple's default: a target that cannot take half
// again today's traffic has no room for a peak or for a replica lost.
const DefaultMinTrafficMultiple = 1.5

// headroomAlerts warn when the headroom measured by slaprobe headroom (a trace replayed at
// speed-ups, docs/workloads.md) falls below the stated factor. A headroom that is only a lower
// bound (every speed-up tested held) says nothing about the factor and does not fire.
func headroomAlerts(p Params) []Rule {
	f := strconv.FormatFloat(p.MinTrafficMultiple, 'g', -1, 64)
	return []Rule{
		commentedAlert(`---------------------------------------------------------------------------------------------
Capacity as a multiple of today's traffic: slaprobe headroom replays a trace of the traffic at
speed-ups and writes slaprobe_capacity_traffic_multiple{target, workload} (a textfile collector
serves it). Params.MinTrafficMultiple is the factor.`,
			"SlaprobeTrafficHeadroomLow", "warning", "5m", fmt.Sprintf(`slaprobe_capacity_traffic_multiple < %s
unless on (target, workload)
slaprobe_capacity_traffic_multiple_lower_bound == 1
`, f),
			"{{ $labels.target }} takes only {{ $value | printf \"%.2f\" }}× the traffic of {{ $labels.workload }}.",
			fmt.Sprintf(`Replayed at speed-ups, the %s trace met its goodput rule on target %s up to %s its own traffic, below the stated factor of %s×: a peak or a lost replica takes the target past its SLO.`,
				"{{ $labels.workload }}", "{{ $labels.target }}", "{{ $value | printf \"%.2f\" }}×", f)),
	}
}

package alertgen

import (
	"fmt"
	"strconv"
)

// DefaultMinTrafficMultiple is Params.MinTrafficMultiple's default: a target that cannot take half
// again today's traffic has no room for a peak or for a replica lost.
const DefaultMinTrafficMultiple = 1.5

// headroomAlerts warn when the headroom measured by slaprobe headroom (a trace replayed at
// speed-ups, docs/workloads.md), or the daemon's sweep capacity over its live traffic, falls below
// the stated factor. A headroom that is only a lower
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
		commentedAlert(`The daemon's own: the last sweep's capacity as a request rate over the live request rate of the
engine's finished-request counter (collector/headroom.go). Absent while the engine is idle, exports no
such counter or is being swept. 15 min: a peak of live traffic, not one window's noise.`,
			"SlaprobeLiveTrafficHeadroomLow", "warning", "15m", fmt.Sprintf(`slaprobe_capacity_live_traffic_multiple < %s
unless
slaprobe_capacity_live_traffic_multiple_lower_bound == 1
`, f),
			"{{ $labels.target }} takes only {{ $value | printf \"%.2f\" }}× its live traffic ({{ $labels.scenario }}).",
			fmt.Sprintf(`The last sweep's capacity of %s on target %s, as a request rate, is %s the requests per second the engine finishes now, below the stated factor of %s×: a peak or a lost replica takes the target past its SLO.`,
				"{{ $labels.scenario }}", "{{ $labels.target }}", "{{ $value | printf \"%.2f\" }}×", f)),
	}
}

//go:build !unix

package bench

import "time"

// peakRSS is unavailable here.
func peakRSS() string { return "" }

// cpuTime is unavailable here.
func cpuTime() time.Duration { return 0 }

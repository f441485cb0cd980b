//go:build unix

package bench

import (
	"fmt"
	"runtime"
	"syscall"
	"time"
)

// peakRSS is this process's peak resident set size ("" where unavailable). It is read with
// getrusage, not from /proc/self: a test of bench.Run then opens no file that changes from one
// process to the next, and go test can reuse its result.
func peakRSS() string {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return ""
	}
	kib := int64(ru.Maxrss) // KiB on Linux and the BSDs
	if runtime.GOOS == "darwin" {
		kib /= 1024 // bytes there
	}
	return fmt.Sprintf("%d kB", kib)
}

// cpuTime is this process's user + system CPU time (0 where unavailable).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

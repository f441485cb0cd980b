//go:build unix

package testproc

import (
	"os"
	"syscall"
	"time"
)

// flock waits for a lock on f: exclusive, or shared.
func flock(f *os.File, exclusive bool) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

// ProcessCPU is the user and system time of this process and of the children it has waited for.
func ProcessCPU() (time.Duration, bool) {
	var sum time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err != nil {
			return 0, false
		}
		sum += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return sum, true
}

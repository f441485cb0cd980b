//go:build linux

package vllmsim

import (
	"syscall"
	"time"
)

// preciseSleep blocks the calling OS thread in nanosleep(2), which wakes within tens of
// microseconds, unlike Go timers on an idle process (the poller sleeps in whole milliseconds).
func preciseSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil)
}

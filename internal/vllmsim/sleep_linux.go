//go:build linux

package vllmsim

import (
	"os"
	"syscall"
	"time"
	"unsafe"
)

// timerfdSleeper waits on a timerfd(2) through Go's network poller. The expiry is a kernel
// high-resolution timer without timer slack, so the wait ends as precisely as nanosleep(2) with
// slack 0; meanwhile the goroutine is parked and holds neither an OS thread nor a P, so the HTTP
// handlers and any client in the same process keep every P. (nanosleep(2) on a locked thread
// keeps its P until sysmon retakes it, 20 µs to 10 ms later; a plain Go timer ends up to 1 ms late
// in an idle process, whose network poller sleeps in whole milliseconds.)
type timerfdSleeper struct {
	fd  int
	f   *os.File // the same descriptor, non-blocking, registered with the poller
	buf [8]byte
}

const (
	clockMonotonic = 1 // CLOCK_MONOTONIC, the clock of time.Now's monotonic reading
	tfdNonblock    = syscall.O_NONBLOCK
	tfdCloexec     = syscall.O_CLOEXEC
)

type itimerspec struct {
	interval, value syscall.Timespec
}

// newSleeper returns a timerfd sleeper, or a Go timer where timerfd is not available.
func newSleeper() sleeper {
	fd, _, errno := syscall.Syscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, tfdNonblock|tfdCloexec, 0)
	if errno != 0 {
		return timerSleeper{}
	}
	// os.NewFile sees O_NONBLOCK and registers the descriptor with the network poller. (Never call
	// Fd on it: that would make it blocking.)
	return &timerfdSleeper{fd: int(fd), f: os.NewFile(fd, "vllmsim-timerfd")}
}

func (s *timerfdSleeper) sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	// A one-shot relative timer; arming it also resets its expiry count.
	its := itimerspec{value: syscall.NsecToTimespec(int64(d))}
	if _, _, errno := syscall.Syscall6(syscall.SYS_TIMERFD_SETTIME, uintptr(s.fd), 0, uintptr(unsafe.Pointer(&its)), 0, 0, 0); errno != 0 {
		time.Sleep(d)
		return
	}
	// The read deadline is a Go timer for the same instant: when every P is busy the poller may not
	// look at the timerfd in time, but the scheduler checks its timers at every switch. Whichever
	// comes first ends the wait (a timeout error is expected then).
	if s.f.SetReadDeadline(time.Now().Add(d)) != nil {
		time.Sleep(d)
		return
	}
	_, _ = s.f.Read(s.buf[:])
}

func (s *timerfdSleeper) close() { _ = s.f.Close() }

//go:build unix

package testproc

import (
	"os"
	"syscall"
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

//go:build linux && race

package prober

import (
	"runtime"
	"syscall"
	"unsafe"
)

// raceNull is /dev/null, read for nothing after each recvmsg (raceRead).
var raceNull = func() int {
	fd, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}()

// raceRead tells the race detector what syscall.Read tells it after a
// read: p[:n] was written, and the read happens after every write the
// process made before it (the syscall package's ioSync). A raw recvmsg says
// neither, so without this a test whose server goroutine sets a variable
// before it writes the answer the client reads would be reported as a race.
// A read of nothing from /dev/null is the one public way to reach ioSync.
func raceRead(p []byte, n int) {
	if n > 0 {
		runtime.RaceWriteRange(unsafe.Pointer(&p[0]), n)
	}
	if raceNull >= 0 {
		_, _ = syscall.Read(raceNull, nil)
	}
}

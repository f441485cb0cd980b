//go:build linux

package prober

// Kernel receive timestamps on Linux. The probe's TCP socket gets
// SO_TIMESTAMPING with SOF_TIMESTAMPING_RX_SOFTWARE|SOF_TIMESTAMPING_SOFTWARE:
// the network stack stamps every segment it receives (CLOCK_REALTIME, taken
// as the skb enters the stack: netif_receive_skb, which on loopback runs in
// the sender's own write) and recvmsg hands a stamp back as an
// SCM_TIMESTAMPING control message (Documentation/networking/timestamping.rst).
//
// For TCP there is one stamp per recvmsg, that of the last skb the call
// copied from (tcp_recvmsg keeps each skb's stamp as it goes, so the last
// one wins), and a segment that arrives while the one before it still waits
// unread is usually merged into that skb (tcp_try_coalesce), which then
// takes the newer segment's stamp. So the stamp a read gets is the arrival
// of the newest bytes it returned: exact for bytes that were read before
// the next segment came (a reader late by less than the gap between two
// chunks), and for a reader later than that the arrival of the last segment
// before its read, still never later than the user-space stamp. Reading
// the queue a unit at a time (peeking for event or TLS record ends) does not
// help: the merged skb has lost the older stamps before any read.

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func realtimeNow() (int64, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_REALTIME, &ts); err != nil {
		return 0, false
	}
	return ts.Nano(), true
}

const kstampFlags = unix.SOF_TIMESTAMPING_RX_SOFTWARE | unix.SOF_TIMESTAMPING_SOFTWARE

// withKernelStamps turns on receive timestamps on c, a *net.TCPConn, and
// returns it wrapped; any other connection, or a refusal, returns c.
func withKernelStamps(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	kstampKeeper()
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPING, kstampFlags)
	}); err != nil || serr != nil {
		return c
	}
	k, ok := keyOf(c)
	if !ok {
		return c
	}
	kc := &kstampConn{TCPConn: tc, rc: rc, key: k}
	kc.readFn = kc.readStep
	kc.msg.Iov = &kc.iov
	kc.msg.SetIovlen(1)
	kstampConns.Store(k, &kc.shared)
	return kc
}

// kstampKeeper keeps the kernel's receive stamping on for the life of the
// process. The kernel stamps incoming packets only while some socket asks
// for it, and turns that on from a work queue, a moment after the first
// socket asks: a connection opened then would get its first segments
// unstamped, and so would every connection opened after the last one
// closed. A UDP socket on loopback that asks for stamps and is never closed
// keeps it on; the first time, it also waits (up to 200 ms) until a
// datagram it sends itself comes back stamped.
var kstampKeeper = sync.OnceFunc(func() {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPING, kstampFlags) != nil ||
		unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}) != nil {
		unix.Close(fd)
		return
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return
	}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 20000})
	buf, oob := make([]byte, 1), make([]byte, 128)
	for range 10 {
		if unix.Sendto(fd, buf, 0, sa) != nil {
			return
		}
		_, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
		if err == nil && parseRxStamp(oob[:oobn]) != 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
})

// kstampConn is a TCP connection whose reads carry kernel receive stamps.
// It is a net.Conn (not a *net.TCPConn: io.Copy must not bypass Read with
// the splice of ReadFrom/WriteTo).
type kstampConn struct {
	*net.TCPConn
	rc     syscall.RawConn
	key    connKey
	shared kstampShared
	readFn func(fd uintptr) bool // readStep, bound once: no closure per read

	// One read's arguments and results (reads are not concurrent).
	buf  []byte
	n    int
	rt   int64
	rerr error

	msg unix.Msghdr
	iov unix.Iovec
	oob [128]byte
}

// Read is one recvmsg; it records the kernel arrival of what it read.
func (c *kstampConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.buf, c.n, c.rt, c.rerr = p, 0, 0, nil
	err := c.rc.Read(c.readFn)
	n, rt, rerr := c.n, c.rt, c.rerr
	c.buf = nil
	if err != nil {
		return 0, err // an *net.OpError already (closed, deadline)
	}
	if rerr != nil {
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("recvmsg", rerr)}
	}
	if n == 0 {
		return 0, io.EOF
	}
	c.shared.stamped(rt)
	return n, nil
}

// readStep is one attempt of Read on the socket; false asks the runtime to
// wait until it is readable.
func (c *kstampConn) readStep(fd uintptr) bool {
	n, err := c.recv(fd, c.buf)
	for err == unix.EINTR {
		n, err = c.recv(fd, c.buf)
	}
	if err == unix.EAGAIN {
		return false
	}
	c.n, c.rerr = n, err
	return true
}

// recv is one recvmsg, its stamp read into c.rt.
func (c *kstampConn) recv(fd uintptr, p []byte) (int, error) {
	c.iov.Base = &p[0]
	c.iov.SetLen(len(p))
	c.msg.Control = &c.oob[0]
	c.msg.SetControllen(len(c.oob))
	c.msg.Flags = 0
	r, _, e := unix.Syscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&c.msg)), unix.MSG_DONTWAIT)
	c.iov.Base, c.msg.Control = nil, nil
	if e != 0 {
		return 0, e
	}
	c.rt = parseRxStamp(c.oob[:c.msg.Controllen])
	return int(r), nil
}

// parseRxStamp returns the software receive stamp of an SCM_TIMESTAMPING
// (or SCM_TIMESTAMPNS) control message, in ns; 0 when there is none. It
// walks the cmsg headers itself: unix.ParseSocketControlMessage would
// allocate on every read.
func parseRxStamp(b []byte) int64 {
	const hdr = unix.SizeofCmsghdr
	for len(b) >= hdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		l := int(h.Len)
		if l < hdr || l > len(b) {
			return 0
		}
		data := b[cmsgAlign(hdr):l]
		if h.Level == unix.SOL_SOCKET && (h.Type == unix.SCM_TIMESTAMPING || h.Type == unix.SCM_TIMESTAMPNS) &&
			len(data) >= int(unsafe.Sizeof(unix.Timespec{})) {
			// SCM_TIMESTAMPING: ts[0] software, ts[1] deprecated, ts[2] hardware.
			ts := (*unix.Timespec)(unsafe.Pointer(&data[0]))
			if ts.Sec != 0 || ts.Nsec != 0 {
				return ts.Nano()
			}
		}
		b = b[min(cmsgAlign(l), len(b)):]
	}
	return 0
}

func cmsgAlign(n int) int {
	const a = int(unsafe.Sizeof(uintptr(0)))
	return (n + a - 1) &^ (a - 1)
}

// Close closes the connection and forgets its stamps.
func (c *kstampConn) Close() error {
	kstampConns.CompareAndDelete(c.key, &c.shared)
	return c.TCPConn.Close()
}

// The rest of net.Conn comes from *net.TCPConn; only what would bypass Read
// is hidden.
var _ net.Conn = (*kstampConn)(nil)

// ReadFrom and WriteTo would let io.Copy use the TCPConn's own read path.
func (c *kstampConn) WriteTo(w io.Writer) (int64, error) { return io.Copy(w, struct{ io.Reader }{c}) }

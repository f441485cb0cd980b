//go:build !linux

package prober

import "net"

// Kernel receive timestamps are read on Linux only (kstamp_linux.go):
// elsewhere the connection is left as it is and probes stamp arrivals in
// user space.
func withKernelStamps(c net.Conn) net.Conn { return c }

func realtimeNow() (int64, bool) { return 0, false }

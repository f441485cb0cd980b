package prober

// Linux only (the file name): the timestamped connection itself.

import (
	"context"
	"io"
	"net"
	"runtime"
	"testing"
	"time"
)

// kstampPair returns the two ends of a loopback TCP connection, the
// client's dialled with DialKernelStamps.
func kstampPair(tb testing.TB) (client, server net.Conn) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(acc)
			return
		}
		acc <- c
	}()
	client, err = DialKernelStamps(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	server = <-acc
	if server == nil {
		tb.Fatal("accept failed")
	}
	tb.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestKernelStampConn: a connection from DialKernelStamps reads what was
// sent, stamps each read with a kernel time between the write and the
// read's return, allocates nothing per read, reports EOF, and leaves the
// registry when closed.
func TestKernelStampConn(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("kernel receive timestamps are read on Linux only")
	}
	c, s := kstampPair(t)
	if _, ok := c.(*kstampConn); !ok {
		t.Fatalf("DialKernelStamps returned a %T, want a timestamped connection", c)
	}
	sh := kernelStampsOf(c)
	if sh == nil {
		t.Fatal("the connection is not in the registry")
	}
	buf := make([]byte, 64)
	for i := range 3 {
		before := time.Now()
		if _, err := s.Write([]byte("data: x\n\n")); err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		time.Sleep(20 * time.Millisecond) // the reader is late: the stamp must not be
		n, err := c.Read(buf)
		if err != nil || string(buf[:n]) != "data: x\n\n" {
			t.Fatalf("read %d: %q, %v", i, buf[:n], err)
		}
		now := time.Now()
		at, ok := realtimeToMono(sh.last.Load(), now)
		if !ok {
			t.Fatalf("read %d: no kernel stamp", i)
		}
		t.Logf("read %d: stamped %v after the write began, read returned %v after it", i, at.Sub(before), now.Sub(before))
		if at.Before(before.Add(-100*time.Microsecond)) || at.After(after.Add(2*time.Millisecond)) {
			t.Errorf("read %d: stamp %v after the write's start, want within the write (%v)", i, at.Sub(before), after.Sub(before))
		}
	}
	if _, err := s.Write(make([]byte, 32<<10)); err != nil {
		t.Fatal(err)
	}
	small := make([]byte, 320)
	if allocs := testing.AllocsPerRun(50, func() {
		if _, err := c.Read(small); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("%v allocations per read, want 0", allocs)
	}
	s.Close()
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("reading to EOF: %v", err)
	}
	c.Close()
	if kernelStampsOf(c) != nil {
		t.Error("a closed connection stays in the registry")
	}
}

// TestClockPairError measures the conversion from CLOCK_REALTIME to the
// monotonic timeline: the width of the tightest of 8 pairs bounds its
// error by half of it; and a pair renewed a second later must agree with
// the first to within both widths (no drift between the clocks).
func TestClockPairError(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("kernel receive timestamps are read on Linux only")
	}
	var widths []time.Duration
	var first, last *clockPair
	for range 50 {
		p, ok := sampleClockPair(clockPairSamples)
		if !ok {
			t.Fatal("no CLOCK_REALTIME")
		}
		if first == nil {
			first = p
		}
		last = p
		widths = append(widths, p.width)
		time.Sleep(20 * time.Millisecond)
	}
	slicesSort(widths)
	// Where the first pair puts the last pair's realtime reading, against
	// where the last pair itself puts it.
	drift := first.mono.Add(time.Duration(last.rt - first.rt)).Sub(last.mono)
	t.Logf("tightest-of-8 pair width: median %v, max %v (error ≤ half); drift over %v: %v",
		widths[len(widths)/2], widths[len(widths)-1], last.mono.Sub(first.mono), drift)
	if widths[len(widths)/2] > 100*time.Microsecond {
		t.Errorf("median pair width %v: time.Now and clock_gettime are not a few dozen ns apart", widths[len(widths)/2])
	}
	if drift < -time.Millisecond || drift > time.Millisecond {
		t.Errorf("the realtime and monotonic clocks drifted %v apart in a second (a clock step?)", drift)
	}
}

func slicesSort(d []time.Duration) {
	for i := 1; i < len(d); i++ {
		for j := i; j > 0 && d[j] < d[j-1]; j-- {
			d[j], d[j-1] = d[j-1], d[j]
		}
	}
}

// BenchmarkConnRead is the cost of one read of a 320-byte chunk (a vLLM chat
// chunk) already queued on a loopback socket: read(2) on a plain
// *net.TCPConn, recvmsg with the kernel's stamp and its conversion on a
// timestamped one (what a probe adds per chunk).
func BenchmarkConnRead(b *testing.B) {
	for _, kernel := range []bool{false, true} {
		name := "plain"
		if kernel {
			name = "kernel"
		}
		b.Run(name, func(b *testing.B) {
			c, s := kstampPair(b)
			if !kernel {
				c = c.(*kstampConn).TCPConn
			}
			go func() {
				chunk := make([]byte, 320)
				for {
					if _, err := s.Write(chunk); err != nil {
						return
					}
				}
			}()
			buf := make([]byte, 320)
			var ref kstampRef
			if kernel {
				ref.s = kernelStampsOf(c)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Fatal(err)
				}
				now := time.Now()
				if kernel {
					_ = ref.stamp(now)
				}
			}
		})
	}
}

package testproc

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// A port a test hands to a program it starts is free when the test checks it
// and must still be free when the program binds it. A port from the kernel's
// ephemeral range (what listening on port 0 returns) can be taken in between
// by any outgoing connection of any process on the machine: a scrape, a probe,
// another test package. That is what failed CI once ("bind: address already in
// use"). So FreePort draws from below the ephemeral range, which the kernel
// never gives to outgoing connections, checks that nothing listens there,
// and never hands out the same port twice in one test process.

// lowestPort is the lowest port FreePort draws: above the well-known and
// commonly configured ports.
const lowestPort = 10000

var ports struct {
	sync.Mutex
	given map[int]bool
}

// ephemeralLow is the first port of the kernel's ephemeral range, or 0 where
// it cannot be read (not Linux).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return low
}

// FreePort returns a loopback TCP port that nothing listens on now and that
// no outgoing connection can take before a program binds it (see above).
// Where the ephemeral range cannot be read, or leaves fewer than 1000 ports
// below it, it falls back to a port the kernel picks.
func FreePort() (int, error) {
	ports.Lock()
	defer ports.Unlock()
	if ports.given == nil {
		ports.given = map[int]bool{}
	}
	if low := ephemeralLow(); low-lowestPort >= 1000 {
		for range 200 {
			p := lowestPort + rand.IntN(low-lowestPort)
			if ports.given[p] {
				continue
			}
			l, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				continue // in use
			}
			l.Close()
			ports.given[p] = true
			return p, nil
		}
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	p := l.Addr().(*net.TCPAddr).Port
	ports.given[p] = true
	return p, nil
}

// FreeAddr is FreePort as a "127.0.0.1:PORT" address, failing t when no port
// can be had.
func FreeAddr(t testing.TB) string {
	t.Helper()
	p, err := FreePort()
	if err != nil {
		t.Fatalf("no free loopback port: %v", err)
	}
	return fmt.Sprintf("127.0.0.1:%d", p)
}

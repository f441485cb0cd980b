package testproc

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePortOutsideEphemeralRange: where the kernel tells its ephemeral
// range, every port FreePort gives lies below it (no outgoing connection can
// take it), is bindable, and is never given twice.
func TestFreePortOutsideEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	seen := map[int]bool{}
	for range 50 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d given twice", p)
		}
		seen[p] = true
		if low-lowestPort >= 1000 && (p < lowestPort || p >= low) {
			t.Fatalf("port %d outside [%d, %d): an outgoing connection could take it", p, lowestPort, low)
		}
		l, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d given as free: %v", p, err)
		}
		l.Close()
	}
	if low == 0 {
		t.Log("the ephemeral range is unknown here; FreePort fell back to ports the kernel picks")
	}
}

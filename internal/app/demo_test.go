package app

import (
	"net"
	"strings"
	"testing"
)

// The demo prints where it listens and a URL a browser can open there.
func TestListenScope(t *testing.T) {
	for _, c := range []struct{ addr, url, scope string }{
		{"127.0.0.1:9781", "127.0.0.1:9781", "loopback only"},
		{"[::1]:9781", "[::1]:9781", "loopback only"},
		{"[::]:9781", "localhost:9781", "every interface"},
		{"0.0.0.0:9781", "localhost:9781", "every interface"},
		{"192.0.2.7:9781", "192.0.2.7:9781", "this address only"},
	} {
		a, err := net.ResolveTCPAddr("tcp", c.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := Browsable(a); got != c.url {
			t.Errorf("Browsable(%s) = %s, want %s", c.addr, got, c.url)
		}
		if got := ListenScope(a); !strings.HasPrefix(got, c.scope) {
			t.Errorf("ListenScope(%s) = %q, want %q…", c.addr, got, c.scope)
		}
	}
}

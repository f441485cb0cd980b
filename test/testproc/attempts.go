package testproc

// This file holds the helpers of the timing-sensitive tests: retries on a
// quiet machine, and a loopback server with a client wide enough for loads.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TimingAttempts runs check up to three times, with the cores held quiet
// (see QuietLight), and fails t with the last attempt's problems only when
// every attempt had some. It is for checks of timing against a simulated
// engine, which a busy shared machine can upset once without anything being
// wrong; the engine sleeps through its schedule, so such a check keeps well
// under a core busy and make test runs it beside another light one.
func TimingAttempts(t *testing.T, check func(errorf func(format string, args ...any))) {
	t.Helper()
	QuietLight(t) // not beside a real engine computing, or a busy test
	const attempts = 3
	for i := 1; i <= attempts; i++ {
		var problems []string
		check(func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) })
		if len(problems) == 0 {
			return
		}
		for _, p := range problems {
			if i == attempts {
				t.Error(p)
			} else {
				t.Logf("attempt %d: %s", i, p)
			}
		}
	}
}

// Serve serves h on a loopback port until t ends, and returns its URL and a
// client whose pool keeps up to 512 idle connections to it, so that a load
// test's concurrent requests reuse their connections.
func Serve(t testing.TB, h http.Handler) (url string, client *http.Client) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 512
	t.Cleanup(tr.CloseIdleConnections)
	return srv.URL, &http.Client{Transport: tr}
}

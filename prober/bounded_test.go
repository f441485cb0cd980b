package prober

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
)

// fakeClock is a settable Clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }

func TestBoundedMap(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	m := newBoundedMap[int, string](3, time.Hour, clock.Now)
	for i := range 3 {
		m.put(i, fmt.Sprint(i))
	}
	m.get(0) // 1 is now the least recently used
	m.put(3, "3")
	steps := []struct {
		key  int
		want bool
	}{{0, true}, {1, false}, {2, true}, {3, true}}
	for _, s := range steps {
		if _, ok := m.get(s.key); ok != s.want {
			t.Errorf("over max: get(%d) = %v, want %v", s.key, ok, s.want)
		}
	}
	if m.len() != 3 {
		t.Errorf("len = %d, want 3", m.len())
	}
	clock.t = clock.t.Add(59 * time.Minute)
	m.get(3)
	clock.t = clock.t.Add(2 * time.Minute)
	if _, ok := m.get(0); ok {
		t.Error("an entry idle for 61 minutes is still there")
	}
	if _, ok := m.get(3); !ok {
		t.Error("an entry used 2 minutes ago expired")
	}
	m.put(4, "4") // evicts what has expired
	if m.len() != 2 {
		t.Errorf("after expiry len = %d, want 2 (3 and 4)", m.len())
	}
	m.removeIf(func(k int, _ string) bool { return k == 4 })
	if _, ok := m.get(4); ok || m.len() != 1 {
		t.Errorf("removeIf left %d entries", m.len())
	}
}

// TestProberStateBounded prepares probes of more distinct base URLs than
// the Prober keeps (one engine behind every path prefix): what it keeps
// stays within its bounds, and the most recent is still cached.
func TestProberStateBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("calibrates 600 base URLs")
	}
	cfg := vllmsim.DefaultConfig()
	cfg.TimeScale = 0.01
	e, err := vllmsim.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	h := e.Handler()
	// /t<i>/v1/… is the engine's /v1/…: every prefix is a base URL of its own.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rest, ok := strings.CutPrefix(r.URL.Path, "/t"); ok {
			if i := strings.IndexByte(rest, '/'); i >= 0 {
				r.URL.Path = rest[i:]
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	p := New(nil, nil)
	s := Scenario{Name: "tiny", InputTokens: 64, OutputTokens: 4, Timeout: 10 * time.Second}
	n := maxCalibrations + 88
	for i := range n {
		tg := Target{Name: fmt.Sprint("t", i), BaseURL: fmt.Sprintf("%s/t%d", srv.URL, i), API: APIChat}
		if _, err := p.Prepare(context.Background(), tg, "", s); err != nil {
			t.Fatalf("Prepare %d: %v", i, err)
		}
	}
	// Per base URL: a calibration, its template, a detected model, at most.
	if got, max := p.StateSize(), 2*maxCalibrations+maxBaseURLs; got > max {
		t.Errorf("after %d base URLs the Prober keeps %d entries, more than its bound %d", n, got, max)
	}
	p.mu.Lock()
	cal, det := p.cal.len(), p.detected.len()
	p.mu.Unlock()
	if cal != maxCalibrations || det != n {
		t.Errorf("%d calibrations and %d detected models kept; want %d and %d", cal, det, maxCalibrations, n)
	}
	last := Target{Name: fmt.Sprint("t", n-1), BaseURL: fmt.Sprintf("%s/t%d", srv.URL, n-1), API: APIChat}
	p.mu.Lock()
	_, ok := p.cal.get(calKey{base: last.BaseURL, model: cfg.ModelName, input: 64, api: APIChat})
	p.mu.Unlock()
	if !ok {
		t.Error("the most recent calibration was evicted")
	}
}

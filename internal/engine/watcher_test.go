package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/prober"
)

// recorder is a slog.Handler that keeps records, to check what is logged once.
type recorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func (r *recorder) count(level slog.Level) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.recs {
		if rec.Level == level {
			n++
		}
	}
	return n
}

// engineServer serves a vLLM page whose state the test changes.
type engineServer struct {
	mu      sync.Mutex
	status  int
	running int
	hits    atomic.Int64
	delay   time.Duration
}

func (e *engineServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.hits.Add(1)
	e.mu.Lock()
	status, running, delay := e.status, e.running, e.delay
	e.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	if status != 0 && status != 200 {
		w.WriteHeader(status)
		return
	}
	_, _ = w.Write([]byte("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running " +
		strconv.Itoa(running) + "\n# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 0\n" +
		"# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total 10\n"))
}

func (e *engineServer) set(status, running int) {
	e.mu.Lock()
	e.status, e.running = status, running
	e.mu.Unlock()
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestWatcherLogsOnceAndRecovers(t *testing.T) {
	es := &engineServer{status: 500}
	srv := httptest.NewServer(es)
	defer srv.Close()
	rec := &recorder{}
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	w := NewWatcher("vllm-a", srv.URL+"/metrics", srv.Client(), Options{Clock: clk}, slog.New(rec))
	ctx := context.Background()

	for range 5 {
		if _, err := w.Scrape(ctx); err == nil {
			t.Fatal("500 should fail")
		}
	}
	if n := rec.count(slog.LevelWarn); n != 1 {
		t.Errorf("warnings = %d, want 1 (logged once)", n)
	}
	if n := rec.count(slog.LevelDebug); n != 4 {
		t.Errorf("debug lines = %d, want 4", n)
	}
	st := w.Status()
	if st.Up || st.ScrapeErrors != 5 || st.LastErr == nil {
		t.Errorf("status %+v", st)
	}
	// While down, the on-demand scrape does not touch the endpoint.
	before := es.hits.Load()
	if _, err := w.Refresh(ctx); !errors.Is(err, ErrDown) {
		t.Errorf("Refresh while down: %v", err)
	}
	if es.hits.Load() != before {
		t.Error("Refresh scraped a failing endpoint")
	}

	es.set(200, 3)
	s, err := w.Scrape(ctx)
	if err != nil || s.Running != 3 {
		t.Fatalf("recovery: %+v %v", s, err)
	}
	if n := rec.count(slog.LevelInfo); n != 1 {
		t.Errorf("info lines = %d, want 1 (recovered)", n)
	}
	// Fails again: logged once more.
	es.set(404, 0)
	_, _ = w.Scrape(ctx)
	_, _ = w.Scrape(ctx)
	if n := rec.count(slog.LevelWarn); n != 2 {
		t.Errorf("warnings = %d, want 2", n)
	}
	if st := w.Status(); st.ScrapeErrors != 7 || st.Up {
		t.Errorf("status %+v", st)
	}
}

func TestWatcherRefreshReusesFreshSnapshot(t *testing.T) {
	es := &engineServer{running: 2}
	srv := httptest.NewServer(es)
	defer srv.Close()
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	w := NewWatcher("t", srv.URL, srv.Client(), Options{Clock: clk, Fresh: time.Second}, nil)
	ctx := context.Background()
	if _, err := w.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Add(500 * time.Millisecond)
	if _, err := w.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if h := es.hits.Load(); h != 1 {
		t.Errorf("hits = %d, want 1 (second Refresh reuses the fresh snapshot)", h)
	}
	clk.Add(time.Second)
	es.set(200, 7)
	s, err := w.Refresh(ctx)
	if err != nil || s.Running != 7 || es.hits.Load() != 2 {
		t.Errorf("stale snapshot not refreshed: %+v %v hits=%d", s, err, es.hits.Load())
	}
}

// TestWatcherRefreshAfter: a snapshot taken before t is never reused, however
// fresh; one taken after t is.
func TestWatcherRefreshAfter(t *testing.T) {
	es := &engineServer{running: 2}
	srv := httptest.NewServer(es)
	defer srv.Close()
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	w := NewWatcher("t", srv.URL, srv.Client(), Options{Clock: clk, Fresh: time.Second}, nil)
	ctx := context.Background()
	first, err := w.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	probeEnd := clk.Now().Add(100 * time.Millisecond)
	clk.Add(200 * time.Millisecond) // still fresh for Refresh
	es.set(200, 0)
	s, err := w.RefreshAfter(ctx, probeEnd)
	if err != nil || s.Running != 0 || es.hits.Load() != 2 || s.Time.Before(probeEnd) {
		t.Errorf("RefreshAfter reused the snapshot from before t: %+v %v hits=%d (first at %v)", s, err, es.hits.Load(), first.Time)
	}
	if _, err := w.RefreshAfter(ctx, probeEnd); err != nil || es.hits.Load() != 2 {
		t.Errorf("RefreshAfter did not reuse the snapshot taken after t: %v hits=%d", err, es.hits.Load())
	}
}

func TestWatcherSharesConcurrentScrapes(t *testing.T) {
	es := &engineServer{running: 1, delay: 100 * time.Millisecond}
	srv := httptest.NewServer(es)
	defer srv.Close()
	w := NewWatcher("t", srv.URL, srv.Client(), Options{}, nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := w.Scrape(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if h := es.hits.Load(); h != 1 {
		t.Errorf("hits = %d, want 1 shared scrape", h)
	}
}

func TestWatcherProbeTimeout(t *testing.T) {
	// The engine answers after 2 s; the watcher gives up after 30 ms. The
	// bound on Refresh is loose (a loaded machine stalls), yet far below the
	// engine's answer, so a watcher that waited for it fails.
	es := &engineServer{running: 1, delay: 2 * time.Second}
	srv := httptest.NewServer(es)
	defer srv.Close()
	w := NewWatcher("t", srv.URL, srv.Client(), Options{ProbeTimeout: 30 * time.Millisecond}, nil)
	start := time.Now()
	_, err := w.Refresh(context.Background())
	if took := time.Since(start); err == nil || took > time.Second {
		t.Errorf("Refresh took %s, err %v; want a quick timeout", took, err)
	}
	// A timeout counts as a failed scrape, once the scrape's goroutine has
	// unwound the cancelled request: wait for it rather than a fixed time.
	deadline := time.Now().Add(5 * time.Second)
	for w.Status().ScrapeErrors == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := w.Status(); st.ScrapeErrors != 1 {
		t.Errorf("errors = %d, want 1", st.ScrapeErrors)
	}
}

func TestWatcherHistory(t *testing.T) {
	es := &engineServer{running: 1}
	srv := httptest.NewServer(es)
	defer srv.Close()
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	w := NewWatcher("t", srv.URL, srv.Client(), Options{Clock: clk, History: time.Minute}, nil)
	for range 10 {
		if _, err := w.Scrape(context.Background()); err != nil {
			t.Fatal(err)
		}
		clk.Add(10 * time.Second)
	}
	// Scrapes at 0..90 s; the last minute before 90 s is 30..90 s.
	if got := len(w.Window(time.Hour)); got != 7 {
		t.Errorf("history = %d snapshots, want 7", got)
	}
	if got := len(w.Window(20 * time.Second)); got != 3 {
		t.Errorf("20 s window = %d snapshots, want 3", got)
	}
}

func TestPoolSync(t *testing.T) {
	es := &engineServer{running: 4}
	srv := httptest.NewServer(es)
	defer srv.Close()
	p := NewPool(Options{Interval: time.Hour}, nil)
	defer p.Close()
	var mu sync.Mutex
	got := map[string]float64{}
	p.OnSnapshot(func(target string, s Snapshot) {
		mu.Lock()
		got[target] = s.Running
		mu.Unlock()
	})
	a := prober.Target{Name: "a", BaseURL: srv.URL + "/"}
	b := prober.Target{Name: "b", BaseURL: srv.URL, MetricsURL: srv.URL + "/metrics"}
	p.Sync([]prober.Target{a, b})
	if p.Watcher("a") == nil || p.Watcher("b") == nil || len(p.Watchers()) != 2 {
		t.Fatal("watchers missing")
	}
	if p.Watcher("a").URL() != srv.URL+"/metrics" {
		t.Errorf("default metrics URL = %q", p.Watcher("a").URL())
	}
	// Each watcher scrapes at once in the background.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	if got["a"] != 4 || got["b"] != 4 {
		t.Errorf("listener saw %v", got)
	}
	mu.Unlock()
	wa := p.Watcher("a")
	b.MetricsURL = srv.URL + "/other"
	p.Sync([]prober.Target{a, b})
	if p.Watcher("a") != wa {
		t.Error("unchanged target lost its watcher (and history)")
	}
	if p.Watcher("b").URL() != srv.URL+"/other" {
		t.Error("changed metrics URL not followed")
	}
	p.Sync([]prober.Target{b})
	if p.Watcher("a") != nil || len(p.Watchers()) != 1 {
		t.Error("removed target still watched")
	}
}

// A target whose /metrics holds only families slaprobe does not read (another
// application's page) or that has no /metrics at all (Ollama) gives one
// warning naming what it saw, engine up 0, and never holds a probe up: while
// down, Refresh answers ErrDown without touching the endpoint.
func TestWatcherUnknownEngine(t *testing.T) {
	page := readTestdata(t, "other_app.txt")
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		want []string // in the one warning's err
	}{
		{"another application's metrics", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(page)) },
			[]string{"no engine signals:", "vllm:, sglang:, llamacpp:", "families seen: go_goroutines, http_requests_total, myapp_queue_depth, process_cpu_seconds_total"}},
		{"no /metrics (Ollama)", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "404 page not found", http.StatusNotFound) },
			[]string{"404"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				tc.h(w, r)
			}))
			defer srv.Close()
			rec := &recorder{}
			w := NewWatcher("app", srv.URL+"/metrics", srv.Client(), Options{}, slog.New(rec))
			ctx := context.Background()
			for range 4 {
				if _, err := w.Scrape(ctx); err == nil {
					t.Fatal("scrape succeeded")
				}
			}
			rec.mu.Lock()
			var warns []string
			for _, r := range rec.recs {
				if r.Level != slog.LevelWarn {
					continue
				}
				msg := r.Message
				r.Attrs(func(a slog.Attr) bool { msg += " " + a.Key + "=" + a.Value.String(); return true })
				warns = append(warns, msg)
			}
			rec.mu.Unlock()
			if len(warns) != 1 {
				t.Fatalf("warnings %q, want one", warns)
			}
			for _, want := range tc.want {
				if !strings.Contains(warns[0], want) {
					t.Errorf("warning %q does not say %q", warns[0], want)
				}
			}
			st := w.Status()
			if st.Up || st.ScrapeErrors != 4 || st.HasLatest {
				t.Errorf("status up %v, errors %d, has latest %v; want down, 4, none", st.Up, st.ScrapeErrors, st.HasLatest)
			}
			before := hits.Load()
			if _, err := w.Refresh(ctx); !errors.Is(err, ErrDown) || hits.Load() != before {
				t.Errorf("Refresh: %v after %d more requests; want ErrDown and none", err, hits.Load()-before)
			}
		})
	}
}

func TestNoEngineErrorBounded(t *testing.T) {
	var b strings.Builder
	for i := range 20 {
		fmt.Fprintf(&b, "# TYPE fam_%02d_%s gauge\nfam_%02d_%s 1\n", i, strings.Repeat("x", 100), i, strings.Repeat("x", 100))
	}
	_, err := Parse(strings.NewReader(b.String()))
	var ne *NoEngineError
	if !errors.As(err, &ne) || !errors.Is(err, ErrNoEngineMetrics) {
		t.Fatalf("err = %v", err)
	}
	if ne.Total != 20 || len(ne.Seen) != maxSeenFamilies || !strings.HasPrefix(ne.Seen[0], "fam_00_") || len(ne.Seen[0]) > maxSeenName+len("…") {
		t.Fatalf("%+v", ne)
	}
	if !strings.HasSuffix(err.Error(), ", … (20 in all)") {
		t.Errorf("err %q does not count the rest", err)
	}
	if _, err := Parse(strings.NewReader("")); err == nil || !strings.HasSuffix(err.Error(), "families seen: none") {
		t.Errorf("empty page: %v", err)
	}
}

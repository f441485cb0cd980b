package probehandler

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/prober"
)

// blockingRunner is a Runner whose Prepare waits until release is closed
// (or its context ends), counting the calls and noting when each ended.
type blockingRunner struct {
	release  chan struct{}
	prepares atomic.Int32
	running  atomic.Int32
	maxRun   atomic.Int32
	ended    chan error
}

func newBlockingRunner() *blockingRunner {
	return &blockingRunner{release: make(chan struct{}), ended: make(chan error, 1000)}
}

func (b *blockingRunner) Prepare(ctx context.Context, t prober.Target, model string, s prober.Scenario) (*prober.Prepared, error) {
	b.prepares.Add(1)
	n := b.running.Add(1)
	defer b.running.Add(-1)
	for {
		m := b.maxRun.Load()
		if n <= m || b.maxRun.CompareAndSwap(m, n) {
			break
		}
	}
	select {
	case <-b.release:
		b.ended <- nil
		return &prober.Prepared{Target: t.Name, Model: "m", Scenario: s}, nil
	case <-ctx.Done():
		b.ended <- ctx.Err()
		return nil, ctx.Err()
	}
}

func (b *blockingRunner) Run(ctx context.Context, t prober.Target, prep *prober.Prepared) prober.Result {
	return prober.Result{Target: t.Name, Model: prep.Model, Scenario: prep.Scenario.Name, Kind: prober.KindError, Reason: prober.ReasonHTTP5xx}
}

func refused(h *Handler, reason string) float64 {
	return testutil.ToFloat64(h.refused.WithLabelValues(reason))
}

// serve runs one request in the background and returns its recorder once
// done is closed.
func serve(h http.Handler, params url.Values, timeout string) (*httptest.ResponseRecorder, chan struct{}) {
	req := httptest.NewRequest(http.MethodGet, "/probe?"+params.Encode(), nil)
	if timeout != "" {
		req.Header.Set(scrapeTimeoutHeader, timeout)
	}
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() { defer close(done); h.ServeHTTP(rec, req) }()
	return rec, done
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Beyond probe.max_concurrent, /probe answers 429 with Retry-After at
// once; concurrent requests for one target and scenario share one
// calibration; the target's in-flight limit holds for /probe's own slots.
func TestProbeConcurrencyCap(t *testing.T) {
	b := newBlockingRunner()
	h := New(Options{Runner: b, Config: loadConfig(t, `
targets: []
global: {max_in_flight_per_target: 2}
probe: {allowed_targets: [127.0.0.1], scenarios: [tiny], max_concurrent: 3}
`+scenarios)})
	// Three requests for one target: two take its slots and share one
	// calibration, the third waits for a slot.
	var dones []chan struct{}
	for range 3 {
		_, d := serve(h, url.Values{"target": {"127.0.0.1:9"}, "scenario": {"tiny"}}, "10")
		dones = append(dones, d)
	}
	waitUntil(t, "three requests admitted", func() bool { r, _, _ := h.InFlight(); return r == 3 })
	// The two holding slots have asked for the calibration: the second joined the first's.
	waitUntil(t, "two requests at the calibration", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.calAsked == 2 })
	// The fourth is over the cap.
	rec, d := serve(h, url.Values{"target": {"127.0.0.1:10"}, "scenario": {"tiny"}}, "10")
	<-d
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), "probe.max_concurrent") {
		t.Errorf("over the cap: %d %q Retry-After %q; want 429 with Retry-After", rec.Code, rec.Body.String(), rec.Header().Get("Retry-After"))
	}
	if n := refused(h, refusedConcurrency); n != 1 {
		t.Errorf("refused{reason=concurrency} = %v, want 1", n)
	}
	if n := b.prepares.Load(); n != 1 {
		t.Errorf("%d calibrations for one target and scenario, want 1 shared", n)
	}
	close(b.release)
	for _, d := range dones {
		<-d
	}
	if n := b.prepares.Load(); n != 2 {
		t.Errorf("%d calibrations in all, want 2 (the third request came after the first ended)", n)
	}
	if r, c, s := h.InFlight(); r != 0 || c != 0 || s != 0 {
		t.Errorf("after the requests: %d running, %d calibrations, %d slots kept; want none", r, c, s)
	}
}

// A configured target's probe takes the scheduler's slot (Slot), and a
// held target is refused with 503.
func TestProbeSlotsAndHolds(t *testing.T) {
	b := newBlockingRunner()
	close(b.release)
	var holds prober.Holds
	slot := make(chan struct{}, 1)
	var asked atomic.Int32
	h := New(Options{Runner: b, Holds: &holds, Config: loadConfig(t, `
targets: [{name: vllm-0, url: 'http://127.0.0.1:9'}]
`+scenarios),
		Slot: func(ctx context.Context, target string) (func(), bool, bool) {
			asked.Add(1)
			if target != "vllm-0" {
				return nil, false, false
			}
			select {
			case slot <- struct{}{}:
				return func() { <-slot }, true, true
			case <-ctx.Done():
				return nil, false, true
			}
		}})
	params := url.Values{"target": {"vllm-0"}, "scenario": {"tiny"}}

	slot <- struct{}{} // a scheduled probe holds the slot
	rec, d := serve(h, params, "1")
	<-d
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), "max_in_flight_per_target") {
		t.Errorf("slot taken: %d %q; want 429", rec.Code, rec.Body.String())
	}
	<-slot
	if n := refused(h, refusedTargetBusy); n != 1 {
		t.Errorf("refused{reason=target_busy} = %v, want 1", n)
	}
	rec, d = serve(h, params, "1")
	<-d
	if rec.Code != http.StatusOK {
		t.Errorf("slot free: %d %q", rec.Code, rec.Body.String())
	}

	release, err := holds.Hold(context.Background(), "vllm-0")
	if err != nil {
		t.Fatal(err)
	}
	rec, d = serve(h, params, "1")
	<-d
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("held: %d %q; want 503 with Retry-After", rec.Code, rec.Body.String())
	}
	if n := refused(h, refusedHeld); n != 1 {
		t.Errorf("refused{reason=held} = %v, want 1", n)
	}
	release()
	if n := holds.Len(); n != 0 {
		t.Errorf("the holds keep %d targets after the hold and the probes ended", n)
	}
	if n := asked.Load(); n != 2 {
		t.Errorf("the scheduler's slot was asked for %d times, want 2 (a held target is refused first)", n)
	}
}

// A calibration a request started ends at most the probe's timeout after
// the request did, and gives the request's admission back only then.
func TestProbeCalibrationBounded(t *testing.T) {
	b := newBlockingRunner()
	h := New(Options{Runner: b, Config: loadConfig(t, `
targets: []
probe: {allowed_targets: [127.0.0.1], scenarios: [tiny], timeout_offset: 0s}
`+scenarios)})
	start := time.Now()
	rec, d := serve(h, url.Values{"target": {"127.0.0.1:9"}, "scenario": {"tiny"}}, "0.3")
	<-d
	ended := time.Now()
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `reason="timeout"`) {
		t.Errorf("%d %s; want a timeout while calibrating", rec.Code, rec.Body.String())
	}
	if r, c, _ := h.InFlight(); r != 1 || c != 1 {
		t.Errorf("after the request: %d running, %d calibrations; want the calibration to go on, holding its place", r, c)
	}
	select {
	case err := <-b.ended:
		if err == nil {
			t.Fatal("the calibration finished")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the calibration outlived its request by 10 s")
	}
	// The bound is 0.3 s after the request's end; a loaded machine is
	// given slack, but never the 5 minutes it had before.
	if over := time.Since(ended); over > 5*time.Second {
		t.Errorf("the calibration ended %s after the request (started %s before)", over, ended.Sub(start))
	}
	waitUntil(t, "the admission given back", func() bool { r, c, _ := h.InFlight(); return r == 0 && c == 0 })
}

// Every refusal is counted under its reason, and every reason exists from
// the start at 0.
func TestProbeRefusalsCounted(t *testing.T) {
	h := New(Options{Runner: newBlockingRunner(), Config: loadConfig(t, `
targets: []
probe: {allowed_targets: [127.0.0.1]}
`+scenarios)})
	for _, r := range RefusalReasons() {
		if n := refused(h, r); n != 0 {
			t.Errorf("refused{reason=%s} = %v at the start", r, n)
		}
	}
	for _, tc := range []struct {
		target, scenario string
		status           int
		reason           string
	}{
		{"", "chatbot", 400, config.RefusedMissing},
		{"127.0.0.2:8000", "chatbot", 403, config.RefusedNotAllowed},
		{"http://127.0.0.1:8000/admin#", "chatbot", 400, config.RefusedFragment},
		{"127.0.0.1:8000", "nope", 400, config.RefusedUnknownScenario},
		{"127.0.0.1:8000", "rag", 403, config.RefusedScenarioNotAllowed},
	} {
		before := refused(h, tc.reason)
		rec, d := serve(h, url.Values{"target": {tc.target}, "scenario": {tc.scenario}}, "")
		<-d
		if rec.Code != tc.status || refused(h, tc.reason) != before+1 {
			t.Errorf("%q %q: %d %q, refused{reason=%s} %v -> %v; want %d and one more", tc.target, tc.scenario, rec.Code,
				rec.Body.String(), tc.reason, before, refused(h, tc.reason), tc.status)
		}
	}
}

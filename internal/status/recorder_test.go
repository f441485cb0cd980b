package status

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/prober"
)

// fakeClock is a settable clock for the Recorder.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *fakeClock               { return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }
func scen(name string) prober.Scenario   { s, _ := prober.LookupBuiltin(name); return s }
func tgt(name string) prober.Target      { return prober.Target{Name: name} }
func okResult(target, sc string, start time.Time) prober.Result {
	return prober.Result{Target: target, Model: "m", Scenario: sc, Kind: prober.KindSuccess,
		Start: start, FirstToken: start.Add(200 * time.Millisecond), LastToken: start.Add(200*time.Millisecond + 255*10*time.Millisecond),
		PromptTokens: 1024, OutputTokens: 256, RequestedTokens: 256, FirstChunkTokens: 1, FinishReason: "length", ResponseID: "cmpl-1"}
}

// probe runs one probe through the hook the way the scheduler does.
func probe(r *Recorder, c *fakeClock, res prober.Result) {
	r.BeforeProbe(context.Background(), tgt(res.Target), scen(res.Scenario))
	c.add(3 * time.Second)
	r.AfterProbe(&res)
}

func TestRecorderKeepsTheLastN(t *testing.T) {
	c := newClock()
	r := NewRecorder(3, c.now)
	for i := range 5 {
		res := okResult("a", "chatbot", c.t)
		res.ResponseID = fmt.Sprint("cmpl-", i)
		probe(r, c, res)
	}
	done, inFlight := r.Probes("a", "chatbot")
	if len(inFlight) != 0 {
		t.Errorf("%d in flight, want 0", len(inFlight))
	}
	if len(done) != 3 || done[0].ResponseID != "cmpl-2" || done[2].ResponseID != "cmpl-4" {
		t.Fatalf("kept %+v; want cmpl-2..cmpl-4, oldest first", ids(done))
	}
	p := done[2]
	if !p.OK() || p.TTFT != 200*time.Millisecond || p.ITL != 10*time.Millisecond || p.Decode != 100 || p.PromptTokens != 1024 {
		t.Errorf("probe = %+v; want success, TTFT 200ms, ITL 10ms, decode 100 tok/s, 1024 prompt tokens", p)
	}
	if got := r.TargetProbes("a"); len(got) != 3 || got[0].ResponseID != "cmpl-4" {
		t.Errorf("TargetProbes newest first: %v", ids(got))
	}
}

func ids(ps []Probe) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.ResponseID)
	}
	return out
}

func TestRecorderInFlightFailureAndCancel(t *testing.T) {
	c := newClock()
	r := NewRecorder(0, c.now)
	r.BeforeProbe(context.Background(), tgt("a"), scen("rag"))
	if _, inFlight := r.Probes("a", "rag"); len(inFlight) != 1 {
		t.Fatalf("%d in flight after BeforeProbe, want 1", len(inFlight))
	}
	// A failure whose result does not name its scenario (a test seam, an
	// early error) still ends the probe in flight on its target.
	r.AfterProbe(&prober.Result{Target: "a", Kind: prober.KindError, Reason: prober.ReasonHTTP5xx,
		Err: &prober.HTTPError{StatusCode: 503, Message: "engine overloaded"}})
	done, inFlight := r.Probes("a", "rag")
	if len(inFlight) != 0 || len(done) != 1 {
		t.Fatalf("done %d, in flight %d; want 1, 0", len(done), len(inFlight))
	}
	if p := done[0]; p.OK() || p.Reason != prober.ReasonHTTP5xx || p.Err != "HTTP 503: engine overloaded" || p.TTFT != 0 {
		t.Errorf("failed probe = %+v", p)
	}
	// A probe the scheduler cancelled measured nothing: dropped.
	r.BeforeProbe(context.Background(), tgt("a"), scen("rag"))
	r.AfterProbe(&prober.Result{Target: "a", Scenario: "rag", Kind: prober.KindError, Err: fmt.Errorf("read: %w", context.Canceled)})
	if done, inFlight := r.Probes("a", "rag"); len(done) != 1 || len(inFlight) != 0 {
		t.Errorf("after a cancelled probe: done %d, in flight %d; want 1, 0", len(done), len(inFlight))
	}
	// Forget drops targets that left the config.
	r.Forget(map[string]bool{"b": true})
	if done, _ := r.Probes("a", "rag"); len(done) != 0 {
		t.Errorf("Forget kept %d probes of a", len(done))
	}
}

// The log handler forwards every record it is asked to, keeps the lines
// that name a target, and files them with the probe they concern.
func TestLogHandlerTeesProbeLines(t *testing.T) {
	c := newClock()
	r := NewRecorder(0, c.now)
	var out bytes.Buffer
	logger := slog.New(r.Handler(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo})))
	sched := logger.With("component", "scheduler").With("target", "a")

	logger.Info("starting", "version", "x")                        // no target: not kept
	sched.Warn("cannot list models", "err", errors.New("refused")) // target only, no probe: target log

	r.BeforeProbe(context.Background(), tgt("a"), scen("chatbot"))
	logger.Info("calibrated prompt", "target", "a", "input_tokens", 1024) // the one probe in flight
	logger.Debug("probe failed", "target", "a", "scenario", "chatbot", "reason", "timeout")
	res := prober.Result{Target: "a", Scenario: "chatbot", Kind: prober.KindError, Reason: prober.ReasonTimeout, Err: prober.ErrProbeTimeout}
	r.AfterProbe(&res)
	// The scheduler logs the outcome just after the hooks.
	sched.With("model", "m", "scenario", "chatbot").Warn("probe failed", "reason", "timeout", "err", "probe timeout")
	// Much later, a sweep's line of the same scenario belongs to the target.
	c.add(time.Minute)
	logger.Info("sweep ladder stopped early", "target", "a", "scenario", "chatbot", "mode", "burst")

	if s := out.String(); !strings.Contains(s, "starting") || !strings.Contains(s, "cannot list models") || strings.Contains(s, "level=DEBUG") {
		t.Errorf("inner handler got:\n%s\nwant the info and warn lines, not the debug one", s)
	}
	done, _ := r.Probes("a", "chatbot")
	if len(done) != 1 {
		t.Fatalf("%d probes, want 1", len(done))
	}
	var lines []string
	for _, l := range done[0].Logs {
		lines = append(lines, l.Level+" "+l.Text)
	}
	want := []string{
		"INFO calibrated prompt input_tokens=1024",
		"DEBUG probe failed reason=timeout",
		`WARN probe failed component=scheduler model=m reason=timeout err="probe timeout"`,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("probe log lines:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	var tl []string
	for _, l := range r.TargetLogs("a") {
		tl = append(tl, l.Text)
	}
	if len(tl) != 2 || tl[0] != "cannot list models component=scheduler err=refused" || !strings.HasPrefix(tl[1], "sweep ladder stopped early") {
		t.Errorf("target log lines: %q", tl)
	}
}

func TestLogLinesAreBounded(t *testing.T) {
	c := newClock()
	r := NewRecorder(0, c.now)
	logger := slog.New(r.Handler(slog.DiscardHandler))
	for i := range maxLogLines + 10 {
		logger.Info("line", "target", "a", "i", i)
	}
	ls := r.TargetLogs("a")
	if len(ls) != maxLogLines || ls[len(ls)-1].Text != fmt.Sprintf("line i=%d", maxLogLines+9) {
		t.Errorf("%d lines kept, last %q; want %d, the newest last", len(ls), ls[len(ls)-1].Text, maxLogLines)
	}
}

// A warm follow-up hits the cache on purpose: it is not flagged as a
// contaminated probe, while a cold probe that hit still is.
func TestRecorderWarmFollowUpIsNotACacheHit(t *testing.T) {
	c := newClock()
	r := NewRecorder(3, c.now)
	follow := okResult("a", "general_chat_followup", c.t)
	follow.Turn, follow.CachedTokens, follow.CachedReported = 2, 1000, true
	probe(r, c, follow)
	cold := okResult("a", "chatbot", c.t)
	cold.CachedTokens, cold.CachedReported = 512, true
	probe(r, c, cold)
	if done, _ := r.Probes("a", "general_chat_followup"); len(done) != 1 || done[0].CacheHit {
		t.Errorf("warm follow-up recorded as %+v; want no cache-hit flag", done)
	}
	if done, _ := r.Probes("a", "chatbot"); len(done) != 1 || !done[0].CacheHit {
		t.Errorf("cold probe that hit recorded as %+v; want the cache-hit flag", done)
	}
}

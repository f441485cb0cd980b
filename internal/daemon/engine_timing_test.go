package daemon

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slaprobe/slaprobe/collector"
	"github.com/slaprobe/slaprobe/prober"
)

// fakeJoiner records which probes wait for their span and which do not.
type fakeJoiner struct {
	mu            sync.Mutex
	joined, skips []string
}

func (f *fakeJoiner) Join(r prober.Result, _ func(prober.Result)) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.joined = append(f.joined, r.Scenario)
	return true
}

func (f *fakeJoiner) Skip(r prober.Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.skips = append(f.skips, r.Scenario)
}

// TestObserveWaitsOnlyForRecordedSplits: only a probe whose TTFT is
// recorded and whose response carried no engine timing (not even a dropped
// one) waits for its span; the joiner is told of every other, so their
// spans are never counted joined. A dropped timing is logged once per target.
func TestObserveWaitsOnlyForRecordedSplits(t *testing.T) {
	var logs bytes.Buffer
	j := &fakeJoiner{}
	d := &Daemon{logger: slog.New(slog.NewTextHandler(&logs, nil)), joiner: j}
	o := probeObserver{ProbeMetrics: collector.NewProbeMetrics(prometheus.NewRegistry()), d: d}
	start := time.Unix(1000, 0)
	probe := func(scenario string, e prober.EngineTiming) *prober.Result {
		return &prober.Result{Target: "a", Model: "m", Scenario: scenario, Kind: prober.KindSuccess, TraceID: "t-" + scenario,
			Start: start, FirstToken: start.Add(100 * time.Millisecond), LastToken: start.Add(200 * time.Millisecond),
			OutputTokens: 4, RequestedTokens: 4, PromptTokens: 100, PromptLengthOK: true, Engine: e}
	}
	none := prober.EngineTiming{Source: prober.TimingNone}
	dropped := prober.EngineTiming{Source: prober.TimingNone, Dropped: prober.TimingDrop{From: prober.TimingResponse, Reason: prober.ImplausibleExceedsTTFT}}
	o.Observe(probe("waits", none))
	o.Observe(probe("response", prober.EngineTiming{Source: prober.TimingResponse, Queue: time.Millisecond, HasQueue: true}))
	o.Observe(probe("dropped", dropped))
	o.Observe(probe("dropped-again", dropped))
	hit := probe("cache-hit", none)
	hit.CachedTokens, hit.CachedReported = 100, true
	o.Observe(hit)
	if strings.Join(j.joined, ",") != "waits" {
		t.Errorf("probes that waited for their span: %v, want only the one with no timing", j.joined)
	}
	if got := strings.Join(j.skips, ","); got != "response,dropped,dropped-again,cache-hit" {
		t.Errorf("probes skipped: %v, want every other one", got)
	}
	if n := strings.Count(logs.String(), "engine timing dropped as implausible"); n != 1 {
		t.Errorf("%d warnings for two dropped timings of one target, want 1:\n%s", n, logs.String())
	}
}

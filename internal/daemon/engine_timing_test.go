package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strconv"
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

// joinLog is an EngineJoiner that records what the daemon asked of it and
// settles every join it accepts with a trace timing, at once.
type joinLog struct {
	accept       bool
	joins, skips int
}

func (j *joinLog) Join(r prober.Result, done func(prober.Result)) bool {
	if !j.accept {
		return false
	}
	j.joins++
	r.Engine = prober.EngineTiming{Source: prober.TimingTrace, Queue: time.Millisecond, HasQueue: true}
	done(r)
	return true
}

func (j *joinLog) Skip(prober.Result) { j.skips++ }

// TestObserverActsOnThePlan: with a trace joiner, the daemon acts on
// collector.PlanEngineTiming and decides nothing itself: a turn whose
// response carried no engine timing joins (or, when the join cannot start,
// counts as source none at once); one that carried it, or whose TTFT is
// not recorded, is skipped. Each recorded turn counts once.
func TestObserverActsOnThePlan(t *testing.T) {
	s, _ := prober.LookupBuiltin("chatbot")
	target := prober.Target{Name: "a", API: prober.APIChat}
	response := prober.EngineTiming{Source: prober.TimingResponse, Queue: time.Millisecond, HasQueue: true}
	for _, tc := range []struct {
		name         string
		accept       bool
		engine       prober.EngineTiming
		cacheHit     bool
		joins, skips int
		source       prober.TimingSource
		recorded     float64
	}{
		{name: "no timing: joins", accept: true, joins: 1, source: prober.TimingTrace, recorded: 1},
		{name: "no timing, join refused: none now", accept: false, source: prober.TimingNone, recorded: 1},
		{name: "timing in the response: recorded now", accept: true, engine: response, skips: 1, source: prober.TimingResponse, recorded: 1},
		{name: "cache hit: skipped", accept: true, cacheHit: true, skips: 1, source: prober.TimingNone, recorded: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := startDaemon(t, configA, false)
			j := &joinLog{accept: tc.accept}
			td.SetEngineJoiner(j)
			r := fakeProbe(context.Background(), target, "m", s, nil)
			r.Engine = tc.engine
			if tc.cacheHit {
				r.CachedTokens = 1
			}
			probeObserver{td.metrics, td.Daemon}.Observe(&r)
			if j.joins != tc.joins || j.skips != tc.skips {
				t.Errorf("joins %d, skips %d; want %d, %d", j.joins, j.skips, tc.joins, tc.skips)
			}
			_, body := td.get(t, http.MethodGet, "/metrics")
			want := `slaprobe_probe_engine_timing_total{api="chat",model="m",scenario="chatbot",source="` + string(tc.source) + `",target="a"} `
			if got := metricValue(body, want); got != tc.recorded {
				t.Errorf("%s = %v, want %v", want, got, tc.recorded)
			}
		})
	}
}

// metricValue is the value of the sample line that starts with prefix in a
// text exposition, 0 when there is none.
func metricValue(body, prefix string) float64 {
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}

package collector

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slaprobe/slaprobe/internal/engine"
	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/internal/sweeper"
)

// DefaultLiveTrafficWindow is the span of the engine's finished-request
// counter the live request rate is taken over.
const DefaultLiveTrafficWindow = 5 * time.Minute

// LiveHeadroomMinRequests is the fewest requests that must finish in the
// window for a live rate: below it the server is idle and the multiple is
// noise (or +Inf), so nothing is exported.
const LiveHeadroomMinRequests = 10

// LiveHeadroom exports, per target and scenario, the capacity the daemon's
// last sweep found as a request rate, and that rate over the live request
// rate the engine's own finished-request counter shows: "the server can
// take 2.3× what it serves now". Values are computed at scrape time from
// the sweeper's snapshot and the engine watchers' recent snapshots.
type LiveHeadroom struct {
	snapshot func() sweeper.Snapshot
	pool     *engine.Pool
	window   time.Duration

	capacityRate, multiple, lowerBound *prometheus.Desc
}

// NewLiveHeadroom returns the collector; window is the span of the live
// rate (DefaultLiveTrafficWindow when 0).
func NewLiveHeadroom(snapshot func() sweeper.Snapshot, pool *engine.Pool, window time.Duration) *LiveHeadroom {
	if window <= 0 {
		window = DefaultLiveTrafficWindow
	}
	l := []string{"target", "scenario"}
	return &LiveHeadroom{
		snapshot: snapshot, pool: pool, window: window,
		capacityRate: prometheus.NewDesc("slaprobe_capacity_requests_per_second",
			"Requests per second the server completed in the last sweep at the largest closed-loop step within every capacity the scenario was judged on (its thresholds, sweep.capacity_on); 0 when even the smallest step missed.", l, nil),
		multiple: prometheus.NewDesc("slaprobe_capacity_live_traffic_multiple",
			"slaprobe_capacity_requests_per_second over the live request rate (the engine's finished requests over the last 5 min, or engine.history if shorter, sweep traffic left out): how many times today's traffic the server takes. Absent while the engine exports no finished-request count, finished fewer than 10 requests in the window, or is being swept.", l, nil),
		lowerBound: prometheus.NewDesc("slaprobe_capacity_live_traffic_multiple_lower_bound",
			"1 when every closed-loop step of the last sweep stayed within the capacity, so slaprobe_capacity_live_traffic_multiple is only a lower bound; else 0.", l, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *LiveHeadroom) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.capacityRate
	ch <- c.multiple
	ch <- c.lowerBound
}

// Collect implements prometheus.Collector.
func (c *LiveHeadroom) Collect(ch chan<- prometheus.Metric) {
	snap := c.snapshot()
	for _, ts := range snap.Targets {
		r := ts.Result
		if r == nil {
			continue
		}
		live, hasLive := c.liveRate(snap, ts)
		for i := range r.Scenarios {
			sc := &r.Scenarios[i]
			rate, atLeast, ok := CapacityRequestRate(r, sc)
			if !ok {
				continue
			}
			ch <- prometheus.MustNewConstMetric(c.capacityRate, prometheus.GaugeValue, rate, ts.Target, sc.Name)
			if !hasLive {
				continue
			}
			ch <- prometheus.MustNewConstMetric(c.multiple, prometheus.GaugeValue, rate/live, ts.Target, sc.Name)
			ch <- prometheus.MustNewConstMetric(c.lowerBound, prometheus.GaugeValue, sweepBool(atLeast), ts.Target, sc.Name)
		}
	}
}

// liveRate is the target's finished requests per second over the window,
// counting only what the engine served after the target's last sweep ended
// (a sweep's own load is not today's traffic). ok is false while the engine
// is down or being swept, exports no finished-request count (llama.cpp
// server), covered less than half the window since the sweep, or finished
// fewer than LiveHeadroomMinRequests requests in it.
func (c *LiveHeadroom) liveRate(snap sweeper.Snapshot, ts sweeper.TargetSnapshot) (float64, bool) {
	if c.pool == nil || snap.Holding == ts.Target || (snap.Running && snap.Current == ts.Target) {
		return 0, false
	}
	w := c.pool.Watcher(ts.Target)
	if w == nil || !w.Status().Up {
		return 0, false
	}
	var counts []float64
	var first, last time.Time
	for _, s := range w.Window(c.window) {
		if !s.HasRequestsFinished || !s.Time.After(ts.LastAttempt.Finished) {
			continue
		}
		if len(counts) == 0 {
			first = s.Time
		}
		last = s.Time
		counts = append(counts, s.RequestsFinished)
	}
	span := last.Sub(first)
	if len(counts) < 2 || span < c.window/2 {
		return 0, false
	}
	n := engine.CounterIncrease(counts)
	if n < LiveHeadroomMinRequests {
		return 0, false
	}
	return n / span.Seconds(), true
}

// CapacityRequestRate is the scenario's capacity as a request rate: the
// requests per second completed (succeeded over the steady window) at the
// largest measured closed-loop step at or below the smallest closed-loop
// capacity the sweep judged it on (its use-case thresholds and each
// sweep.capacity_on rule), a step that started busy left out. atLeast is
// true when every such capacity is only a lower bound (every step held). ok
// is false when the scenario has no closed-loop capacity; rate is 0 when
// even its smallest step missed.
func CapacityRequestRate(r *report.Report, sc *report.Scenario) (rate float64, atLeast, ok bool) {
	n, atLeast := 0, true
	bound := func(b sweep.Bound) {
		if !ok || b.Value < n {
			n = b.Value
		}
		ok, atLeast = true, atLeast && b.AtLeast
	}
	for _, u := range r.Capacity.UseCases {
		if u.Scenario == sc.Name && u.Mode == sweep.ModeClosedLoop {
			bound(u.Bound)
		}
	}
	for _, o := range r.Capacity.On {
		if o.Scenario == sc.Name && o.Mode == sweep.ModeClosedLoop {
			bound(o.Bound)
		}
	}
	if !ok {
		return 0, false, false
	}
	best := -1
	for i, st := range sc.ClosedLoop {
		if st.Concurrency <= n && st.Measured() && !st.StartedBusy() && st.DurationSeconds > 0 &&
			(best < 0 || st.Concurrency > sc.ClosedLoop[best].Concurrency) {
			best = i
		}
	}
	if best < 0 {
		return 0, false, true
	}
	st := sc.ClosedLoop[best]
	return float64(st.RequestsOK) / st.DurationSeconds, atLeast, true
}

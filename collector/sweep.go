package collector

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/internal/sweeper"
)

// SweepCollector exports the daemon's latest sweep results as gauges, one
// series per (target, model, scenario, mode, concurrency) step, so Grafana
// draws the report's curves; plus capacity, scaling efficiency and the
// job's own state. Values are computed at scrape time from the sweeper's
// snapshot; nothing is kept here.
type SweepCollector struct {
	snapshot func() sweeper.Snapshot

	decode, ttft, itl, e2e, prefill, system, success, requests, queueWait *prometheus.Desc
	powerWatts, energyPerToken, startedBusy, drainWait                    *prometheus.Desc
	efficiency, capacity, capacityApprox, capacityMaxTested, maxSafeTTFT  *prometheus.Desc
	scenarioInfo, nextScheduled                                           *prometheus.Desc
	lastTimestamp, lastDuration, lastAttempt, lastAttemptOK               *prometheus.Desc
	running, paused, enabled, probesHeld                                  *prometheus.Desc
	change, changeSignificant                                             *prometheus.Desc
}

// NewSweepCollector returns the collector of the sweeps snapshot returns
// ((*sweeper.Sweeper).Snapshot in the daemon).
func NewSweepCollector(snapshot func() sweeper.Snapshot) *SweepCollector {
	step := []string{"target", "model", "scenario", "mode", "concurrency"}
	stepStat := append(append([]string(nil), step...), "stat")
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &SweepCollector{
		snapshot: snapshot,
		decode: d("slaprobe_sweep_decode_tokens_per_second",
			"Per-user decode speed in the last sweep's step (stat: mean and plain percentiles p10, p50, p90, p99; p10 is the speed 90% of requests got or better).", stepStat),
		ttft: d("slaprobe_sweep_ttft_seconds",
			"Time to first token in the last sweep's step (stat: mean, p50, p90, p95, p99).", stepStat),
		itl: d("slaprobe_sweep_itl_seconds",
			"Mean inter-token latency per request in the last sweep's step (stat: mean, p50, p90, p99 over requests).", stepStat),
		e2e: d("slaprobe_sweep_e2e_latency_seconds",
			"End-to-end latency in the last sweep's step (stat: mean, p50, p90, p99).", stepStat),
		prefill: d("slaprobe_sweep_prefill_tokens_per_second",
			"Per-user prefill speed in the last sweep's step, as report.json gives it: prompt tokens / TTFT, with the engine's queue wait taken out when it is known (stat: mean).", stepStat),
		system: d("slaprobe_sweep_system_throughput_tokens_per_second",
			"Output tokens per second summed over all streams in the step's steady window (closed loop) or from release to last token (burst); prompt tokens excluded. ×3600 for tokens per hour.", step),
		success: d("slaprobe_sweep_success_ratio",
			"Share of the step's measured requests that completed successfully.", step),
		requests: d("slaprobe_sweep_requests",
			"Requests the step measured.", step),
		queueWait: d("slaprobe_sweep_queue_wait_seconds",
			"Mean engine queue time during the step, from the change in vllm:request_queue_time_seconds; absent when the engine does not expose it.", step),
		powerWatts: d("slaprobe_sweep_power_watts",
			"GPU power during the step, summed over the target's GPUs (stat: mean, max); absent without power readings.", stepStat),
		energyPerToken: d("slaprobe_sweep_energy_per_output_token_joules",
			"GPU energy per output token during the step; absent without power readings.", step),
		startedBusy: d("slaprobe_sweep_step_started_busy",
			"1 when the step started while the engine still had requests running or waiting (the drain wait, sweep.drain.timeout, ran out): it measured leftovers or other traffic and is left out of capacity.", step),
		drainWait: d("slaprobe_sweep_step_drain_wait_seconds",
			"How long the step waited for the engine to empty before it started (or the cooldown, without engine metrics).", step),
		scenarioInfo: d("slaprobe_sweep_scenario_info",
			"Always 1: the shape of each scenario the last sweep ran, its prompt (input_tokens) and output length, so that charts can put context length on an axis.", []string{"target", "model", "scenario", "input_tokens", "output_tokens"}),
		efficiency: d("slaprobe_scaling_efficiency_ratio",
			"Closed-loop scaling efficiency: system throughput / (N=1 throughput × N); 1 means no per-user loss.", []string{"target", "model", "scenario", "concurrency"}),
		capacity: d("slaprobe_capacity_max_safe_concurrency",
			"Largest N within the limits: for mode=burst the max safe queue depth (TTFT within sweep.capacity.max_safe_ttft), for mode=closed_loop the concurrent users within every scenario threshold. Interpolated between measured N, rounded down; 0 when even the smallest N missed.", []string{"target", "model", "scenario", "mode"}),
		capacityApprox: d("slaprobe_capacity_approximate",
			"1 when slaprobe_capacity_max_safe_concurrency was interpolated between measured N (shown as ~N in reports), else 0.", []string{"target", "model", "scenario", "mode"}),
		maxSafeTTFT: d("slaprobe_capacity_max_safe_ttft_seconds",
			"TTFT limit the last sweep judged max safe queue depth against (sweep.capacity.max_safe_ttft), for the statistic in stat; the threshold line of the capacity charts.", []string{"target", "model", "stat"}),
		capacityMaxTested: d("slaprobe_capacity_max_tested_concurrency",
			"Largest N measured; when it equals slaprobe_capacity_max_safe_concurrency the true capacity may be higher.", []string{"target", "model", "scenario", "mode"}),
		lastTimestamp: d("slaprobe_sweep_last_timestamp_seconds",
			"Unix time the sweep whose results are exported finished.", []string{"target"}),
		lastDuration: d("slaprobe_sweep_last_duration_seconds",
			"How long the sweep whose results are exported took.", []string{"target"}),
		lastAttempt: d("slaprobe_sweep_last_attempt_timestamp_seconds",
			"Unix time the most recent sweep of the target ended, complete or not.", []string{"target"}),
		lastAttemptOK: d("slaprobe_sweep_last_attempt_success",
			"Whether the most recent sweep of the target ran to the end (1) or was stopped (0: paused too long, window closed, shutdown).", []string{"target"}),
		running: d("slaprobe_sweep_running",
			"Whether a sweep is running now.", nil),
		paused: d("slaprobe_sweep_paused",
			"Whether the running sweep is paused for this target and reason (requests_waiting, kv_cache_usage, engine_metrics_unavailable).", []string{"target", "reason"}),
		change: d("slaprobe_sweep_change_ratio",
			"Relative change (new − previous) / previous of the last sweep against the previous complete sweep of the target, per scenario and metric: for ttft, itl, e2e, decode and prefill the median per request of the scenario's most adverse closed-loop step (at N > 1 the median of its slices' medians; a significant regression first; bursts are left out: a burst's requests share one queue, and its verdicts, when repeated, are in the report), for max_safe_queue and use_case_capacity the capacity. Signed: a positive ttft, itl or e2e and a negative decode, prefill or capacity are worse. Absent before a second sweep.", []string{"target", "model", "scenario", "metric"}),
		changeSignificant: d("slaprobe_sweep_change_significant",
			"1 when slaprobe_sweep_change_ratio is a significant change: its 95% bootstrap interval excludes zero and it is at least 5% (a capacity: it moved past a measured N and by at least 5%); 0 otherwise.", []string{"target", "model", "scenario", "metric"}),
		probesHeld: d("slaprobe_sweep_probes_held",
			"Whether the target's scheduled probes are held (1) because a sweep is loading it; the probe metrics get no new samples until its sweep ends.", []string{"target"}),
		nextScheduled: d("slaprobe_sweep_next_scheduled_timestamp_seconds",
			"Unix time the schedule (sweep.schedule) starts its next sweep. In the past while a due sweep has not started: an earlier one still runs, a start failed, or a window closed unused; it stays at the missed time until a sweep starts. Absent when sweeps are off or run only on demand.", nil),
		enabled: d("slaprobe_sweep_enabled",
			"Whether sweeps are enabled (sweep.enabled); while 0 none runs, scheduled or on demand (POST /-/sweep answers 403).", nil),
	}
}

// Describe implements prometheus.Collector.
func (c *SweepCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.decode, c.ttft, c.itl, c.e2e, c.prefill, c.system, c.success, c.requests, c.queueWait,
		c.powerWatts, c.energyPerToken, c.startedBusy, c.drainWait, c.efficiency, c.capacity, c.capacityApprox, c.capacityMaxTested, c.maxSafeTTFT,
		c.change, c.changeSignificant,
		c.lastTimestamp, c.lastDuration, c.lastAttempt, c.lastAttemptOK, c.running, c.paused, c.enabled,
		c.probesHeld, c.scenarioInfo, c.nextScheduled,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *SweepCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.snapshot()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.enabled, sweepBool(snap.Enabled))
	gauge(c.running, sweepBool(snap.Running))
	if !snap.NextScheduled.IsZero() {
		gauge(c.nextScheduled, sweepUnix(snap.NextScheduled))
	}
	for _, ts := range snap.Targets {
		if !ts.LastAttempt.Finished.IsZero() {
			gauge(c.lastAttempt, sweepUnix(ts.LastAttempt.Finished), ts.Target)
			gauge(c.lastAttemptOK, sweepBool(ts.LastAttempt.Complete), ts.Target)
		}
		for _, reason := range sweeper.PauseReasons {
			gauge(c.paused, sweepBool(snap.Paused[ts.Target] == reason), ts.Target, reason)
		}
		gauge(c.probesHeld, sweepBool(snap.Holding == ts.Target), ts.Target)
		if r := ts.Result; r != nil {
			gauge(c.lastTimestamp, sweepUnix(r.Meta.FinishedAt), ts.Target)
			gauge(c.lastDuration, r.Meta.FinishedAt.Sub(r.Meta.StartedAt).Seconds(), ts.Target)
			c.result(gauge, ts.Target, r)
			c.changes(gauge, ts.Target, r)
		}
	}
	// A target being swept for the first time has no entry yet.
	if snap.Holding != "" && !sweepHasTarget(snap.Targets, snap.Holding) {
		gauge(c.probesHeld, 1, snap.Holding)
	}
	for target, reason := range snap.Paused {
		if !sweepHasTarget(snap.Targets, target) {
			for _, r := range sweeper.PauseReasons {
				gauge(c.paused, sweepBool(reason == r), target, r)
			}
		}
	}
}

func (c *SweepCollector) result(gauge func(*prometheus.Desc, float64, ...string), target string, r *report.Report) {
	model := r.Meta.Model
	th := r.Config.Thresholds
	if th.MaxSafeQueueTTFTSeconds > 0 {
		gauge(c.maxSafeTTFT, th.MaxSafeQueueTTFTSeconds, target, model, string(th.MaxSafeQueueStat))
	}
	for _, sc := range r.Scenarios {
		gauge(c.scenarioInfo, 1, target, model, sc.Name, strconv.Itoa(sc.InputTokens), strconv.Itoa(sc.OutputTokens))
		for _, mode := range []sweep.Mode{sweep.ModeClosedLoop, sweep.ModeBurst} {
			steps := sc.Steps(mode)
			for i := range steps {
				st := &steps[i]
				n := strconv.Itoa(st.Concurrency)
				l := []string{target, model, sc.Name, string(mode), n}
				stat := func(d *prometheus.Desc, name string, v float64) {
					gauge(d, v, append(l[:5:5], name)...)
				}
				gauge(c.requests, float64(st.RequestsSent), l...)
				if st.Measured() { // a step in which no request ended has no rates, only zeros
					gauge(c.success, st.SuccessRate, l...)
					gauge(c.system, st.SystemTokensPerSecond, l...)
				}
				if dr := st.Drain; dr != nil {
					gauge(c.startedBusy, sweepBool(dr.Busy), l...)
					gauge(c.drainWait, dr.WaitedSeconds, l...)
				}
				if st.RequestsOK > 0 {
					// Plain percentiles, as in report.json and the probe
					// histograms; the slow tail of decode speed is p10.
					stat(c.decode, "mean", st.Decode.Mean)
					stat(c.decode, "p10", st.Decode.P10)
					stat(c.decode, "p50", st.Decode.P50)
					stat(c.decode, "p90", st.Decode.P90)
					stat(c.decode, "p99", st.Decode.P99)
					stat(c.ttft, "mean", st.TTFT.Mean)
					stat(c.ttft, "p50", st.TTFT.P50)
					stat(c.ttft, "p90", st.TTFT.P90)
					stat(c.ttft, "p95", st.TTFT.P95)
					stat(c.ttft, "p99", st.TTFT.P99)
					stat(c.itl, "mean", st.ITL.Mean)
					stat(c.itl, "p50", st.ITL.P50)
					stat(c.itl, "p90", st.ITL.P90)
					stat(c.itl, "p99", st.ITL.P99)
					stat(c.e2e, "mean", st.E2E.Mean)
					stat(c.e2e, "p50", st.E2E.P50)
					stat(c.e2e, "p90", st.E2E.P90)
					stat(c.e2e, "p99", st.E2E.P99)
					if st.PrefillTokensPerSecond > 0 {
						stat(c.prefill, "mean", st.PrefillTokensPerSecond)
					}
				}
				if st.QueueWaitSeconds != nil {
					gauge(c.queueWait, *st.QueueWaitSeconds, l...)
				}
				if p := st.Power; p != nil {
					stat(c.powerWatts, "mean", p.AvgWatts)
					stat(c.powerWatts, "max", p.PeakWatts)
					if p.JoulesPerToken > 0 {
						gauge(c.energyPerToken, p.JoulesPerToken, l...)
					}
				}
				if mode == sweep.ModeClosedLoop && st.ScalingEfficiency != nil {
					gauge(c.efficiency, *st.ScalingEfficiency, target, model, sc.Name, n)
				}
			}
		}
	}
	capacity := func(scenario string, mode sweep.Mode, b sweep.Bound, maxTested int) {
		l := []string{target, model, scenario, string(mode)}
		gauge(c.capacity, float64(b.Value), l...)
		gauge(c.capacityApprox, sweepBool(b.Approximate), l...)
		gauge(c.capacityMaxTested, float64(maxTested), l...)
	}
	for _, q := range r.Capacity.MaxSafeQueue {
		capacity(q.Scenario, sweep.ModeBurst, q.Bound, q.MaxTested)
	}
	for _, u := range r.Capacity.UseCases {
		capacity(u.Scenario, u.Mode, u.Bound, u.MaxTested)
	}
}

func sweepHasTarget(ts []sweeper.TargetSnapshot, name string) bool {
	for _, t := range ts {
		if t.Target == name {
			return true
		}
	}
	return false
}

func sweepUnix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func sweepBool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Change metric names of slaprobe_sweep_change_ratio beyond the step
// metrics (report.MetricTTFT …).
const (
	changeMaxSafeQueue = "max_safe_queue"
	changeUseCase      = "use_case_capacity"
)

// changes exports the last sweep's change against the previous one: per
// scenario and step metric the most adverse change, a significant
// regression before any other, and each capacity.
func (c *SweepCollector) changes(gauge func(*prometheus.Desc, float64, ...string), target string, r *report.Report) {
	cmp := r.Comparison
	if cmp == nil {
		return
	}
	model := r.Meta.Model
	export := func(scenario, metric string, change float64, significant bool) {
		gauge(c.change, change, target, model, scenario, metric)
		gauge(c.changeSignificant, sweepBool(significant), target, model, scenario, metric)
	}
	for _, sc := range r.Scenarios {
		for _, metric := range []string{report.MetricTTFT, report.MetricITL, report.MetricE2E, report.MetricDecode, report.MetricPrefill} {
			if m := worstChange(cmp, sc.Name, metric); m != nil {
				export(sc.Name, metric, m.Change, m.Significant())
			}
		}
	}
	// Only the two capacities the metric names: the others (capacity on a
	// rule, in conversations, headroom) share a scenario with them, and one
	// series apiece would be a duplicate, which fails the scrape's gather.
	seen := map[[2]string]bool{}
	for _, cc := range cmp.Capacity {
		if cc.Presence != report.InBoth {
			continue
		}
		var name string
		switch cc.Kind {
		case report.CapacityMaxSafeQueue:
			name = changeMaxSafeQueue
		case report.CapacityUseCase:
			name = changeUseCase
		default:
			continue
		}
		if k := [2]string{cc.Scenario, name}; !seen[k] {
			seen[k] = true
			export(cc.Scenario, name, cc.Change, cc.Significant())
		}
	}
}

// worstChange is the scenario's most adverse change of metric among the
// steps compared with an interval: the largest significant regression
// when there is one, else the largest move in the worse direction.
func worstChange(cmp *report.Comparison, scenario, metric string) *report.MetricChange {
	adverse := func(m *report.MetricChange) float64 {
		if report.HigherIsBetter(metric) {
			return -m.Change
		}
		return m.Change
	}
	var best *report.MetricChange
	for i := range cmp.Steps {
		s := &cmp.Steps[i]
		if s.Scenario != scenario {
			continue
		}
		m := s.Metric(metric)
		if m == nil || m.Low == nil {
			continue
		}
		switch {
		case best == nil:
			best = m
		case (m.Verdict == report.VerdictWorse) != (best.Verdict == report.VerdictWorse):
			if m.Verdict == report.VerdictWorse {
				best = m
			}
		case adverse(m) > adverse(best):
			best = m
		}
	}
	return best
}

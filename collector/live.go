package collector

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/slaprobe/slaprobe/internal/engine"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/prober"
)

// Live joins each probe with the engine's state when it was sent. It is the
// daemon's probe hook (BeforeProbe/AfterProbe) and a Prometheus collector:
//
//   - slaprobe_ttft_by_queue_depth_seconds: TTFT by the queue depth the
//     probe met, the reports' "TTFT vs queue depth" from production traffic;
//   - slaprobe_live_max_safe_queue_depth: where a monotone fit of TTFT
//     against queue depth crosses the scenario's TTFT threshold;
//   - slaprobe_live_scaling_efficiency_ratio: the engine's output-token rate
//     over (single-stream decode speed × running requests), smoothed.
//
// Queue depth is running + waiting requests, read just before the probe is
// sent; where the engine splits waits by reason (vLLM), only those waiting
// for capacity count: a request deferred for a LoRA budget or a KV transfer
// does not hold a probe back. docs/live-signals.md says why, and when each
// signal misleads.
type Live struct {
	pool   *engine.Pool
	opts   LiveOptions
	logger *slog.Logger

	mu        sync.Mutex
	pending   map[liveProbeKey][]livePending
	depth     map[liveSeries]*liveDepth
	decode    map[liveSeries]*liveDecode
	baselines map[liveSeries]liveBaseline
	models    map[string]string // target -> model of its latest probe
	eff       map[string]*liveEfficiency

	ttftByDepth *prometheus.HistogramVec

	maxSafe, maxSafeSamples, maxSafeLowerBound, efficiency, baseline *prometheus.Desc
	baselineSource, baselineSamples                                  *prometheus.Desc

	specAcceptance *prometheus.GaugeVec
}

// Where a single-stream baseline comes from, the source label of
// slaprobe_live_single_stream_decode_source.
const (
	BaselineIdleProbe = "idle_probe" // a probe that ran alone on the engine
	BaselineSweep     = "sweep"      // a closed-loop sweep step at N=1
	BaselineFit       = "fit"        // the decode-vs-running fit at one request
)

// BaselineSources lists every source.
var BaselineSources = []string{BaselineIdleProbe, BaselineSweep, BaselineFit}

// The hook the daemon calls around every probe (internal/daemon.ProbeHook).
var _ interface {
	BeforeProbe(ctx context.Context, t prober.Target, s prober.Scenario)
	AfterProbe(res *prober.Result)
} = (*Live)(nil)

// LiveOptions tune Live. Zero fields take the defaults
// (config.DefaultEngineLiveConfig).
type LiveOptions struct {
	// DepthSamples is the sliding window of probes per target, model and
	// scenario for the max-safe-queue-depth fit (default 200).
	DepthSamples int
	// DepthMaxAge drops older probes from that fit (default 6 h).
	DepthMaxAge time.Duration
	// EfficiencyWindow is the span of the token rate and mean running
	// requests (default 1 min).
	EfficiencyWindow time.Duration
	// EfficiencySmoothing is the EWMA time constant (default 5 min).
	EfficiencySmoothing time.Duration
	// BaselineMaxAge forgets older single-stream decode speeds (default 24 h).
	BaselineMaxAge time.Duration
	Clock          prober.Clock
	Logger         *slog.Logger
}

func (o LiveOptions) withDefaults() LiveOptions {
	if o.DepthSamples <= 0 {
		o.DepthSamples = 200
	}
	if o.DepthMaxAge <= 0 {
		o.DepthMaxAge = 6 * time.Hour
	}
	if o.EfficiencyWindow <= 0 {
		o.EfficiencyWindow = time.Minute
	}
	if o.EfficiencySmoothing < 0 {
		o.EfficiencySmoothing = 0
	} else if o.EfficiencySmoothing == 0 {
		o.EfficiencySmoothing = 5 * time.Minute
	}
	if o.BaselineMaxAge <= 0 {
		o.BaselineMaxAge = 24 * time.Hour
	}
	if o.Clock == nil {
		o.Clock = prober.SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// LiveQueueDepthLabels are the values of the queue_depth label, in order:
// powers of two, as the reports' burst ladder (1, 2, 4 … 256).
var LiveQueueDepthLabels = []string{"0", "1", "2-3", "4-7", "8-15", "16-31", "32-63", "64-127", "128-255", "256+"}

// LiveQueueDepthLabel returns the queue_depth label of depth requests.
func LiveQueueDepthLabel(depth int) string {
	if depth <= 0 {
		return LiveQueueDepthLabels[0]
	}
	i := 1
	for b := 2; depth >= b && i < len(LiveQueueDepthLabels)-1; b *= 2 {
		i++
	}
	return LiveQueueDepthLabels[i]
}

// TTFT buckets of the queue-depth histogram: fewer than slaprobe_ttft_seconds
// (it has ten times the series), with an edge at every scenario threshold.
var liveTTFTBuckets = []float64{0.1, 0.25, 0.5, 1, 2, 3, 5, 8, 10, 12, 15, 20, 30, 60, 120}

type liveProbeKey struct{ target, scenario string }

type liveSeries struct{ target, model, scenario string }

type livePending struct {
	at               time.Time
	scenario         prober.Scenario
	ok               bool // the engine's queue was read
	running, waiting float64
	// depthWaiting is the waiting count of the queue depth: capacity waits
	// only where the engine splits them by reason (Snapshot.DepthWaiting).
	depthWaiting float64
	gen          float64 // generation-token counter before the probe
	genAt        time.Time
	hasGen       bool
	specDraft    float64 // speculative-decoding counters before the probe
	specAccepted float64
	hasSpec      bool
}

type liveDepth struct {
	win       engine.DepthWindow
	threshold time.Duration
}

type liveBaseline struct {
	scenario        string
	inputTokens     int
	tokensPerSecond float64
	at              time.Time
	source          string
	samples         int
}

// liveDecode holds a series' (decode speed, running requests) pairs.
type liveDecode struct {
	win         engine.DecodeWindow
	inputTokens int
}

type liveEfficiency struct {
	model    string
	scenario string // baseline used last
	ewma     engine.EWMA
}

// NewLive returns the hook and collector. pool gives the engine's state per
// target; its watchers' snapshots drive the efficiency estimate.
func NewLive(pool *engine.Pool, opts LiveOptions) *Live {
	opts = opts.withDefaults()
	l := &Live{
		pool:      pool,
		opts:      opts,
		logger:    opts.Logger,
		pending:   map[liveProbeKey][]livePending{},
		depth:     map[liveSeries]*liveDepth{},
		decode:    map[liveSeries]*liveDecode{},
		baselines: map[liveSeries]liveBaseline{},
		models:    map[string]string{},
		eff:       map[string]*liveEfficiency{},
		ttftByDepth: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "slaprobe_ttft_by_queue_depth_seconds",
			Help:    "Probe TTFT by the engine's queue depth (running + waiting requests) when the probe was sent.",
			Buckets: liveTTFTBuckets,
		}, []string{"target", "model", "scenario", "queue_depth"}),
	}
	s := []string{"target", "model", "scenario"}
	l.specAcceptance = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "slaprobe_probe_spec_decode_acceptance_ratio",
		Help: "Speculative decoding acceptance (accepted / draft tokens, from the engine's vllm:spec_decode_* counters) over the last probe's span: the engine's, for all traffic during the probe. Read it with slaprobe_tokens_per_chunk; absent where the engine reports no speculative decoding.",
	}, s)
	l.maxSafe = prometheus.NewDesc("slaprobe_live_max_safe_queue_depth",
		"Queue depth (running + waiting) at which a monotone fit of probe TTFT against queue depth crosses the scenario's TTFT threshold, over a sliding window of probes.", s, nil)
	l.maxSafeSamples = prometheus.NewDesc("slaprobe_live_max_safe_queue_depth_samples",
		"Probes behind slaprobe_live_max_safe_queue_depth: few samples make it a guess.", s, nil)
	l.maxSafeLowerBound = prometheus.NewDesc("slaprobe_live_max_safe_queue_depth_lower_bound",
		"1 when TTFT never crossed the threshold in the window: slaprobe_live_max_safe_queue_depth is then the deepest queue seen, a lower bound.", s, nil)
	l.efficiency = prometheus.NewDesc("slaprobe_live_scaling_efficiency_ratio",
		"Engine output-token rate over (single-stream decode speed of the closest scenario × running requests), smoothed; 1 means no per-user slowdown. Only while requests run.", []string{"target", "model"}, nil)
	l.baseline = prometheus.NewDesc("slaprobe_live_single_stream_decode_tokens_per_second",
		"Single-stream per-user decode speed, the denominator of live scaling efficiency: from a probe that ran alone, a closed-loop sweep at concurrency 1, or else the fit of probes' decode speed against the engine's running requests at one request (see slaprobe_live_single_stream_decode_source).", s, nil)
	l.baselineSource = prometheus.NewDesc("slaprobe_live_single_stream_decode_source",
		"1 for where the single-stream baseline comes from: idle_probe (a probe ran alone), sweep (closed loop at N=1) or fit (decode vs running requests, read at one request; measured ones win).", append(s[:3:3], "source"), nil)
	l.baselineSamples = prometheus.NewDesc("slaprobe_live_single_stream_decode_samples",
		"Measurements behind the single-stream baseline: 1 for an idle probe, the requests of a sweep step, the probes of a fit.", s, nil)
	if pool != nil {
		pool.OnSnapshot(l.onSnapshot)
	}
	return l
}

// BeforeProbe reads the engine's queue just before a probe is sent: a scrape
// bounded by the engine's probe timeout, shared with probes sent together,
// skipped while the endpoint is down.
func (l *Live) BeforeProbe(ctx context.Context, t prober.Target, s prober.Scenario) {
	p := livePending{scenario: s}
	if w := l.pool.Watcher(t.Name); w != nil {
		if snap, err := w.Refresh(ctx); err == nil && snap.HasQueue {
			p.ok, p.running, p.waiting, p.depthWaiting = true, snap.Running, snap.Waiting, snap.DepthWaiting()
			p.gen, p.genAt, p.hasGen = snap.GenerationTokens, snap.Time, snap.HasTokens
			p.specDraft, p.specAccepted, p.hasSpec = snap.SpecDraftTokens, snap.SpecAcceptedTokens, snap.HasSpecDecode
		}
	}
	p.at = l.opts.Clock.Now()
	k := liveProbeKey{t.Name, s.Name}
	l.mu.Lock()
	defer l.mu.Unlock()
	// Drop entries whose AfterProbe never came (a probe abandoned on reload).
	keep := l.pending[k][:0]
	for _, q := range l.pending[k] {
		if p.at.Sub(q.at) < q.scenario.Timeout+2*time.Minute {
			keep = append(keep, q)
		}
	}
	l.pending[k] = append(keep, p)
}

// AfterProbe records the probe's TTFT against the queue it met.
func (l *Live) AfterProbe(res *prober.Result) {
	if res == nil {
		return
	}
	now := l.opts.Clock.Now()
	p, ok := l.record(res, now)
	if !ok {
		return
	}
	if !res.DecodeMeasured() {
		return
	}
	v := res.DecodeSpeed()
	after, haveAfter := l.snapshotAfter(res)
	if haveAfter && p.hasSpec && after.HasSpecDecode {
		if dd := after.SpecDraftTokens - p.specDraft; dd > 0 {
			da := max(0, after.SpecAcceptedTokens-p.specAccepted)
			l.specAcceptance.WithLabelValues(res.Target, res.Model, res.Scenario).Set(min(1, da/dd))
		}
	}
	if haveAfter && after.HasQueue {
		// The requests running during the decode: the mean of what ran just
		// before and just after it, plus the probe itself.
		n := (p.running+after.Running)/2 + 1
		l.mu.Lock()
		ser := liveSeries{res.Target, res.Model, res.Scenario}
		d := l.decode[ser]
		if d == nil {
			d = &liveDecode{win: engine.DecodeWindow{Window: engine.Window[engine.DecodeSample]{Max: l.opts.DepthSamples, MaxAge: l.opts.DepthMaxAge}}}
			l.decode[ser] = d
		}
		d.inputTokens = p.scenario.InputTokens
		if res.PromptTokens > 0 {
			d.inputTokens = res.PromptTokens
		}
		d.win.Add(engine.DecodeSample{Time: now, Running: n, ITL: 1 / v})
		l.mu.Unlock()
	}
	// A probe sent while the engine was idle is a single-stream (N=1)
	// candidate; it counts only if it also ran alone to the end.
	if p.running+p.waiting != 0 || !l.ranAlone(res, p, after, haveAfter) {
		return
	}
	in := p.scenario.InputTokens
	if res.PromptTokens > 0 {
		in = res.PromptTokens
	}
	l.mu.Lock()
	l.baselines[liveSeries{res.Target, res.Model, res.Scenario}] = liveBaseline{scenario: res.Scenario, inputTokens: in,
		tokensPerSecond: v, at: now, source: BaselineIdleProbe, samples: 1}
	l.mu.Unlock()
}

// ranAlone reports whether, between the scrape before the probe and one
// after it, the engine generated no tokens but the probe's. Another request that
// arrived during the probe would have slowed it, so its speed would not be
// a single-stream speed. Without token counters the idle start must do.
func (l *Live) ranAlone(res *prober.Result, p livePending, after engine.Snapshot, ok bool) bool {
	if !p.hasGen {
		return true
	}
	if !ok || !after.HasTokens || !after.Time.After(p.genAt) {
		return false
	}
	others := after.GenerationTokens - p.gen - float64(res.OutputTokens)
	// vLLM counts every generated token once; a little slack for engines
	// that count the prefill token apart.
	return others >= -1 && others <= max(2, 0.01*float64(res.OutputTokens))
}

// snapshotAfter reads the engine once the probe's last token is out: a
// snapshot from before it would miss some of the probe's own tokens,
// however fresh.
func (l *Live) snapshotAfter(res *prober.Result) (engine.Snapshot, bool) {
	w := l.pool.Watcher(res.Target)
	if w == nil || res.LastToken.IsZero() {
		return engine.Snapshot{}, false
	}
	// A scrape already in flight may have started before the last token;
	// joining it gives an older snapshot, so scrape once more then.
	for range 2 {
		after, err := w.RefreshAfter(context.Background(), res.LastToken)
		if err != nil {
			return engine.Snapshot{}, false
		}
		if !after.Time.Before(res.LastToken) {
			return after, true
		}
	}
	return engine.Snapshot{}, false
}

// record files the probe under its queue depth; it returns the pending entry.
func (l *Live) record(res *prober.Result, now time.Time) (livePending, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if res.Model != "" {
		// A target has one model at a time: what was kept of the one
		// before goes, so that a target whose model changes keeps no
		// more than one model's state.
		if old := l.models[res.Target]; old != "" && old != res.Model {
			l.forgetModelLocked(res.Target, old)
		}
		l.models[res.Target] = res.Model
	}
	p, found := l.popPending(liveProbeKey{res.Target, res.Scenario}, res.Start)
	// A probe cancelled by a reload or shutdown measured nothing.
	if !found || !p.ok || errors.Is(res.Err, context.Canceled) {
		return p, false
	}
	depth := math.Round(p.running + p.depthWaiting)
	ser := liveSeries{res.Target, res.Model, res.Scenario}

	ttft, hasTTFT := 0.0, false
	// A cut prompt's TTFT is that of a shorter prompt than the scenario's.
	if !res.Start.IsZero() && !res.FirstToken.IsZero() && res.TTFT() > 0 && res.Reason != prober.ReasonPromptTruncated {
		ttft, hasTTFT = res.TTFT().Seconds(), true
		l.ttftByDepth.WithLabelValues(res.Target, res.Model, res.Scenario, LiveQueueDepthLabel(int(depth))).Observe(ttft)
	}

	if thr := p.scenario.Thresholds.TTFT; thr > 0 {
		sample, ok := engine.DepthSample{Time: now, Depth: depth, TTFT: ttft}, hasTTFT
		// A probe that timed out before its first token waited at least the
		// timeout: leaving it out would make an overloaded server look safe.
		if !hasTTFT && res.Reason == prober.ReasonTimeout && res.FirstToken.IsZero() {
			sample.TTFT, ok = math.Max(p.scenario.Timeout.Seconds(), thr.Seconds()), true
		}
		if ok {
			d := l.depth[ser]
			if d == nil {
				d = &liveDepth{win: engine.DepthWindow{Window: engine.Window[engine.DepthSample]{Max: l.opts.DepthSamples, MaxAge: l.opts.DepthMaxAge}}}
				l.depth[ser] = d
			}
			d.threshold = thr
			d.win.Add(sample)
		}
	}
	return p, true
}

// popPending removes and returns the pending entry of the probe that
// started at start: the latest one taken before start, else the oldest.
func (l *Live) popPending(k liveProbeKey, start time.Time) (livePending, bool) {
	q := l.pending[k]
	if len(q) == 0 {
		return livePending{}, false
	}
	i := 0
	if !start.IsZero() {
		for j, p := range q {
			if !p.at.After(start) {
				i = j
			}
		}
	}
	p := q[i]
	q = append(q[:i], q[i+1:]...)
	if len(q) == 0 {
		delete(l.pending, k)
	} else {
		l.pending[k] = q
	}
	return p, true
}

// SetBaseline records a single-stream decode speed measured elsewhere, for
// example by a closed-loop sweep step at concurrency 1, so efficiency is
// available on servers that are never idle when a probe is sent.
func (l *Live) SetBaseline(target, model, scenario string, inputTokens int, tokensPerSecond float64, samples int) {
	if tokensPerSecond <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.baselines[liveSeries{target, model, scenario}] = liveBaseline{
		scenario: scenario, inputTokens: inputTokens, tokensPerSecond: tokensPerSecond, at: l.opts.Clock.Now(),
		source: BaselineSweep, samples: samples}
}

// SetBaselinesFromSweep takes, as single-stream decode speeds, the mean
// per-user decode speed of a sweep's closed-loop steps at concurrency 1
// (the sweep holds the target's probes, so those ran alone). It fits
// sweeper.Options.OnResult.
func (l *Live) SetBaselinesFromSweep(r *sweep.Result) {
	for _, sc := range r.Scenarios {
		for _, st := range sc.ClosedLoop {
			if st.Concurrency == 1 && st.Succeeded > 0 && !st.StartedBusy() {
				l.SetBaseline(r.Target, r.Model, sc.Name, sc.InputTokens, st.Decode.Mean, st.Succeeded)
			}
		}
	}
}

// onSnapshot updates the target's efficiency from the engine's recent
// snapshots. It runs after every successful scrape.
func (l *Live) onSnapshot(target string, s engine.Snapshot) {
	w := l.pool.Watcher(target)
	if w == nil {
		return
	}
	r, ok := engine.WindowRates(w.Window(l.opts.EfficiencyWindow))
	// A rate over a short span is noise (on-demand scrapes come in bursts).
	// An idle engine has no efficiency: it is computed while requests run
	// (running >= 1 now), over a window busy at least half the time, so the
	// denominator is never near zero.
	if !ok || r.Span < l.opts.EfficiencyWindow/2 || r.LastRunning < 1 || r.MeanRunning < 0.5 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	model := l.models[target]
	if model == "" {
		return
	}
	b, ok := l.closestBaseline(target, model, r, s.Time)
	if !ok {
		return
	}
	v := r.GenerationRate() / (b.tokensPerSecond * r.MeanRunning)
	e := l.eff[target]
	if e == nil || e.model != model {
		e = &liveEfficiency{model: model, ewma: engine.EWMA{Tau: l.opts.EfficiencySmoothing}}
		l.eff[target] = e
	}
	e.scenario = b.scenario
	e.ewma.Update(s.Time, v)
}

// closestBaseline picks the single-stream speed of the scenario whose prompt
// length is closest (in ratio) to the mean prompt of the engine's recent
// requests; without that mean, the shortest scenario (the fastest decode,
// so the efficiency is not flattered).
func (l *Live) closestBaseline(target, model string, r engine.Rates, now time.Time) (liveBaseline, bool) {
	var cands []liveBaseline
	for k, b := range l.currentBaselines(now) {
		if k.target == target && k.model == model {
			cands = append(cands, b)
		}
	}
	if len(cands) == 0 {
		return liveBaseline{}, false
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].inputTokens != cands[j].inputTokens {
			return cands[i].inputTokens < cands[j].inputTokens
		}
		return cands[i].scenario < cands[j].scenario
	})
	mean, ok := r.MeanPromptTokens()
	if !ok || mean <= 0 {
		return cands[0], true
	}
	best, bestD := cands[0], math.Inf(1)
	for _, c := range cands {
		if d := math.Abs(math.Log(float64(max(c.inputTokens, 1)) / mean)); d < bestD {
			best, bestD = c, d
		}
	}
	return best, true
}

// currentBaselines returns, per series, the measured single-stream speed
// (idle probe or sweep) when there is a fresh one, else the fit of the
// probes' decode speed against running requests at one request. l.mu is held.
func (l *Live) currentBaselines(now time.Time) map[liveSeries]liveBaseline {
	out := make(map[liveSeries]liveBaseline, len(l.baselines)+len(l.decode))
	for k, b := range l.baselines {
		if now.Sub(b.at) <= l.opts.BaselineMaxAge {
			out[k] = b
		}
	}
	for k, d := range l.decode {
		if _, measured := out[k]; measured {
			continue
		}
		d.win.Prune(now)
		f, ok := d.win.SingleStream()
		if !ok {
			continue
		}
		out[k] = liveBaseline{scenario: k.scenario, inputTokens: d.inputTokens, tokensPerSecond: f.TokensPerSecond, at: now,
			source: BaselineFit, samples: f.Samples}
	}
	return out
}

// ForgetTarget drops everything about a target (after a reload removed it).
func (l *Live) ForgetTarget(target string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ttftByDepth.DeletePartialMatch(prometheus.Labels{"target": target})
	l.specAcceptance.DeletePartialMatch(prometheus.Labels{"target": target})
	for k := range l.pending {
		if k.target == target {
			delete(l.pending, k)
		}
	}
	for k := range l.depth {
		if k.target == target {
			delete(l.depth, k)
		}
	}
	for k := range l.baselines {
		if k.target == target {
			delete(l.baselines, k)
		}
	}
	for k := range l.decode {
		if k.target == target {
			delete(l.decode, k)
		}
	}
	delete(l.models, target)
	delete(l.eff, target)
}

// ForgetModel drops a model's series on a target (the server changed model).
func (l *Live) ForgetModel(target, model string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forgetModelLocked(target, model)
}

func (l *Live) forgetModelLocked(target, model string) {
	l.ttftByDepth.DeletePartialMatch(prometheus.Labels{"target": target, "model": model})
	l.specAcceptance.DeletePartialMatch(prometheus.Labels{"target": target, "model": model})
	for k := range l.depth {
		if k.target == target && k.model == model {
			delete(l.depth, k)
		}
	}
	for k := range l.baselines {
		if k.target == target && k.model == model {
			delete(l.baselines, k)
		}
	}
	for k := range l.decode {
		if k.target == target && k.model == model {
			delete(l.decode, k)
		}
	}
	if e := l.eff[target]; e != nil && e.model == model {
		delete(l.eff, target)
	}
}

// Describe implements prometheus.Collector.
func (l *Live) Describe(ch chan<- *prometheus.Desc) {
	l.ttftByDepth.Describe(ch)
	l.specAcceptance.Describe(ch)
	for _, d := range []*prometheus.Desc{l.maxSafe, l.maxSafeSamples, l.maxSafeLowerBound, l.efficiency, l.baseline, l.baselineSource, l.baselineSamples} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (l *Live) Collect(ch chan<- prometheus.Metric) {
	l.ttftByDepth.Collect(ch)
	l.specAcceptance.Collect(ch)
	now := l.opts.Clock.Now()
	for _, m := range l.MaxSafeDepths() {
		lv := []string{m.Target, m.Model, m.Scenario}
		lb := 0.0
		if m.LowerBound {
			lb = 1
		}
		ch <- prometheus.MustNewConstMetric(l.maxSafe, prometheus.GaugeValue, m.Depth, lv...)
		ch <- prometheus.MustNewConstMetric(l.maxSafeSamples, prometheus.GaugeValue, float64(m.Samples), lv...)
		ch <- prometheus.MustNewConstMetric(l.maxSafeLowerBound, prometheus.GaugeValue, lb, lv...)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// An estimate not refreshed for a while means the engine went idle or
	// its metrics went away: stop showing it rather than show a stale value.
	stale := 2 * max(l.opts.EfficiencyWindow, l.pool.Options().Interval)
	for target, e := range l.eff {
		if v, at, ok := e.ewma.Value(); ok && now.Sub(at) <= stale {
			ch <- prometheus.MustNewConstMetric(l.efficiency, prometheus.GaugeValue, v, target, e.model)
		}
	}
	for k, b := range l.currentBaselines(now) {
		ch <- prometheus.MustNewConstMetric(l.baseline, prometheus.GaugeValue, b.tokensPerSecond, k.target, k.model, k.scenario)
		ch <- prometheus.MustNewConstMetric(l.baselineSamples, prometheus.GaugeValue, float64(b.samples), k.target, k.model, k.scenario)
		for _, src := range BaselineSources {
			v := 0.0
			if src == b.source {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(l.baselineSource, prometheus.GaugeValue, v, k.target, k.model, k.scenario, src)
		}
	}
}

// LiveMaxSafeDepth is one scenario's live max safe queue depth.
type LiveMaxSafeDepth struct {
	Target, Model, Scenario string
	Threshold               time.Duration
	Depth                   float64
	LowerBound              bool // the threshold was never crossed
	Samples                 int
}

// MaxSafeDepths fits every window now, sorted by target, model, scenario.
func (l *Live) MaxSafeDepths() []LiveMaxSafeDepth {
	now := l.opts.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []LiveMaxSafeDepth
	for k, d := range l.depth {
		d.win.Prune(now)
		if d.win.Len() == 0 {
			delete(l.depth, k)
			continue
		}
		depth, lb, n := d.win.MaxSafeDepth(d.threshold.Seconds())
		out = append(out, LiveMaxSafeDepth{Target: k.target, Model: k.model, Scenario: k.scenario,
			Threshold: d.threshold, Depth: depth, LowerBound: lb, Samples: n})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Target != b.Target {
			return a.Target < b.Target
		}
		if a.Model != b.Model {
			return a.Model < b.Model
		}
		return a.Scenario < b.Scenario
	})
	return out
}

// LiveEfficiency is a target's smoothed live scaling efficiency.
type LiveEfficiency struct {
	Target, Model string
	Scenario      string // the scenario whose single-stream speed was the baseline
	Ratio         float64
	At            time.Time
}

// Efficiency returns the target's current estimate, if any.
func (l *Live) Efficiency(target string) (LiveEfficiency, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.eff[target]
	if e == nil {
		return LiveEfficiency{}, false
	}
	v, at, ok := e.ewma.Value()
	return LiveEfficiency{Target: target, Model: e.model, Scenario: e.scenario, Ratio: v, At: at}, ok
}

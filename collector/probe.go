// Package collector holds slaprobe's Prometheus collectors, one per file.
package collector

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slaprobe/slaprobe/internal/slo"
	"github.com/slaprobe/slaprobe/prober"
)

const namespace = "slaprobe"

// The classic bucket edges of the probe histograms are internal/slo's:
// the alert rules count good probes from the same edges.

// ClassicBuckets selects the classic buckets of the probe histograms; the
// native buckets are always there.
type ClassicBuckets string

const (
	// ClassicBucketsFull: every edge (the default).
	ClassicBucketsFull ClassicBuckets = "full"
	// ClassicBucketsReduced: the threshold and band edges only.
	ClassicBucketsReduced ClassicBuckets = "reduced"
	// ClassicBucketsNone: native histograms only; the text format then
	// carries _sum, _count and one +Inf bucket. For a Prometheus that
	// ingests native histograms (the rules and dashboards read either).
	ClassicBucketsNone ClassicBuckets = "none"
)

// ProbeMetricsOptions tune NewProbeMetricsWith.
type ProbeMetricsOptions struct {
	// ClassicBuckets; empty is ClassicBucketsFull.
	ClassicBuckets ClassicBuckets
}

// buckets picks full or reduced edges, or none.
func (o ProbeMetricsOptions) buckets(full, reduced []float64) []float64 {
	switch o.ClassicBuckets {
	case ClassicBucketsReduced:
		return reduced
	case ClassicBucketsNone:
		return nil
	}
	return full
}

// probeLabels label every probe series: the target, its model, the
// scenario, and the API it was probed on (chat, completions, responses,
// messages), so one target probed on several APIs keeps them apart.
var probeLabels = []string{"target", "model", "scenario", "api"}

// apiOf is the `api` label of a result: the API it was probed on, which the
// prober always sets (config resolves a target's default).
func apiOf(r *prober.Result) string { return string(r.API) }

// ProbeMetrics turns probe results into the slaprobe_* probe metrics of the
// metrics contract (docs/metrics.md, "Probes"). It is safe for concurrent use.
type ProbeMetrics struct {
	ttft, itl, decode, e2e, prefill, chunk, ttfc *snapHist
	specAcceptance                               *snapHist

	probes, good, errors, cacheHits, tokens, mismatches *prometheus.CounterVec
	usageMismatches, firstChunk                         *prometheus.CounterVec

	success, promptTokens, outputTokens, lastTimestamp, enabled *prometheus.GaugeVec
	threshold, planned, contextNeeded                           *prometheus.GaugeVec

	// Conversation scenarios only (see conversation.go).
	conv conversationMetrics
	// The engine's own timing (see engine_timing.go).
	engine engineTimingMetrics

	stamps *prometheus.CounterVec // slaprobe_probe_timestamps_total (timestamps.go)

	// thresholds judge good probes; SetThresholds sets them.
	mu         sync.RWMutex
	thresholds map[string]prober.Thresholds
}

// newHistogram returns a probe histogram vector; its scrape keeps the
// snapshots of children not observed since the last one (scrape.go).
func newHistogram(name, help string, buckets []float64) *snapHist {
	return newSnapHist(prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace:                       namespace,
		Name:                            name,
		Help:                            help,
		Buckets:                         buckets,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  160,
		NativeHistogramMinResetDuration: time.Hour,
	}, probeLabels))
}

func newCounter(name, help string, extra ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help},
		append(append([]string(nil), probeLabels...), extra...))
}

func newGauge(name, help string, labels ...string) *prometheus.GaugeVec {
	if labels == nil {
		labels = probeLabels
	}
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, labels)
}

// NewProbeMetrics creates the probe metrics, with every classic bucket,
// and registers them with reg.
func NewProbeMetrics(reg prometheus.Registerer) *ProbeMetrics {
	return NewProbeMetricsWith(reg, ProbeMetricsOptions{})
}

// NewProbeMetricsWith is NewProbeMetrics with options.
func NewProbeMetricsWith(reg prometheus.Registerer, o ProbeMetricsOptions) *ProbeMetrics {
	m := &ProbeMetrics{
		ttft: newHistogram("ttft_seconds",
			"Time from sending the request to the first chunk carrying generated output. Successful and short probes with a cold prompt, and the follow-up turns of warm scenarios.", o.buckets(slo.TTFTBuckets, slo.TTFTBucketsReduced)),
		itl: newHistogram("itl_seconds",
			"Mean inter-token latency of a probe: (last token - first token) / (output tokens - first chunk's tokens). Successful probes, and short answers of at least 16 tokens.", o.buckets(slo.ITLBuckets, slo.ITLBucketsReduced)),
		decode: newHistogram("decode_tokens_per_second",
			"Per-user decode speed of a probe, the inverse of its ITL. Successful probes, and short answers of at least 16 tokens.", o.buckets(slo.DecodeBuckets, slo.DecodeBucketsReduced)),
		e2e: newHistogram("e2e_latency_seconds",
			"Time from sending the request to the last token; for an answer the server ended early, TTFT plus its measured ITL over the tokens asked for. Successful and short probes with a cold prompt, and the follow-up turns of warm scenarios.", o.buckets(slo.E2EBuckets, slo.E2EBucketsReduced)),
		prefill: newHistogram("prefill_tokens_per_second",
			"Prompt tokens divided by TTFT (queueing included). Successful and short probes with a cold prompt only.", o.buckets(slo.PrefillBuckets, slo.PrefillBucketsReduced)),
		chunk: newHistogram("tokens_per_chunk",
			"Output tokens carried by each streamed chunk, when the server reports continuous usage.", o.buckets(slo.ChunkBuckets, slo.ChunkBucketsReduced)),
		// No classic buckets in any mode: no panel, rule or alert reads
		// them. _sum / _count give the mean, the native buckets quantiles.
		ttfc: newHistogram("time_to_first_content_seconds",
			"Time to the first non-reasoning output token. Successful probes of reasoning models with a cold prompt only. Native buckets only; the text format carries _sum, _count and +Inf.", nil),
		specAcceptance: newHistogram("spec_decode_acceptance_ratio",
			"Speculative decoding of a probe: accepted / drafted tokens, as the response reported them (vLLM's per-request metrics with the target's per_request_metrics, llama.cpp's timings). Answered probes whose response reported at least one drafted token.", o.buckets(slo.AcceptanceBuckets, slo.AcceptanceBucketsReduced)),

		probes: newCounter("probes_total",
			"Probes run, by outcome: success, error, or short_output (fewer tokens than asked).", "result"),
		good: newCounter("probes_good_total",
			"Good probes, by outcome as in slaprobe_probes_total (success or short_output): they got an answer and met every SLA threshold of their scenario at once (TTFT, the probe's mean ITL, E2E at the asked length, decode speed; those slaprobe_sla_threshold sets). Divided by slaprobe_probes_total, the goodput SLI.", "result"),
		errors: newCounter("probe_errors_total",
			"Failed probes by reason.", "reason"),
		cacheHits: newCounter("probe_cache_hits_total",
			"Successful probes whose prompt was partly served from the prefix cache; their TTFT, E2E and prefill are not recorded."),
		tokens: newCounter("probe_tokens_total",
			"Tokens the prober spent, as the server reported them, by type: prompt or output.", "type"),
		mismatches: newCounter("probe_prompt_length_mismatches_total",
			"Probes whose prompt token count, as the server reported it, was outside the tolerance of the scenario's input tokens."),
		usageMismatches: newCounter("probe_usage_mismatches_total",
			"Probes whose usage.completion_tokens disagreed with what the stream carried (fewer tokens than output chunks, or continuous usage ending elsewhere than the final usage): the server's token accounting is off."),
		firstChunk: newCounter("probe_first_chunk_total",
			"Probes by what their first output chunk carried: content, reasoning or tool_call. A reasoning model whose first chunk is content has its reasoning parser switched off.", "kind"),

		success: newGauge("probe_success",
			"Whether the last probe got an answer (1: success, or short_output when the server ended the answer early) or failed (0)."),
		promptTokens: newGauge("probe_prompt_tokens",
			"Prompt tokens of the last probe, as the server counted them."),
		outputTokens: newGauge("probe_output_tokens",
			"Output tokens of the last probe, as the server counted them."),
		lastTimestamp: newGauge("probe_last_timestamp_seconds",
			"Unix time at which the last probe started."),
		enabled: newGauge("scenario_enabled",
			"Whether the scenario is probed on the target (1) or disabled (0), e.g. because it does not fit the model's max_model_len."),
		threshold: newGauge("sla_threshold",
			"SLA threshold of a scenario, in the metric's base unit (seconds, or tokens per second for a minimum decode speed).", "scenario", "metric"),
		contextNeeded: newGauge("scenario_context_needed_tokens",
			"Present while the server cuts the scenario's prompt to its context window (probes fail with reason prompt_truncated): the context length, prompt plus output tokens, the server must be given for the scenario to fit."),
		planned: newGauge("prober_planned_tokens_per_hour",
			"Prompt plus output tokens the prober plans to spend per hour on the target, from the enabled scenarios and their intervals.", "target"),
	}
	m.stamps = newStampCounter()
	reg.MustRegister(m.stamps)
	m.conv = newConversationMetrics(o)
	reg.MustRegister(m.conv.collectors()...)
	m.engine = newEngineTimingMetrics(o)
	reg.MustRegister(m.engine.collectors()...)
	reg.MustRegister(m.ttft, m.itl, m.decode, m.e2e, m.prefill, m.chunk, m.ttfc, m.specAcceptance)
	// Counters and gauges go to the registry in exposition order (scrape.go).
	for _, c := range []prometheus.Collector{
		m.probes, m.good, m.errors, m.cacheHits, m.tokens, m.mismatches, m.usageMismatches, m.firstChunk,
		m.success, m.promptTokens, m.outputTokens, m.lastTimestamp, m.enabled,
		m.threshold, m.planned, m.contextNeeded,
	} {
		reg.MustRegister(sorted(c))
	}
	return m
}

// Observe records one probe.
//
//   - success: probes_total{result="success"}, ITL, decode speed; and, unless
//     the prompt hit the prefix cache, TTFT, E2E, prefill speed and (for
//     reasoning output) time to first content. A cache hit counts in
//     probe_cache_hits_total instead. A warm follow-up records all of them
//     but prefill speed, and its conversation metrics.
//   - short_output (the server ended the answer early):
//     probes_total{result="short_output"}, and the same timings as a success:
//     TTFT and prefill speed as measured, E2E at the asked length
//     (Result.E2EAtRequested), ITL and decode speed only from
//     prober.MinDecodeTokens tokens on. An empty answer records no timing.
//   - error: probes_total{result="error"} and probe_errors_total{reason}.
//
// A success or short answer that meets every threshold of its scenario
// (prober.Thresholds.MetBy, judged on the figures recorded above) also
// counts in probes_good_total with its result.
//
// Every probe updates the token counters and the last-probe gauges; every
// chunk with a known token count is one tokens_per_chunk observation.
//
// A warm probe is a conversation: its priming turn is kept apart (conversation.go),
// and each follow-up is recorded as a probe of its scenario whose TTFT, E2E
// and prefill count even though it hit the cache, as it is meant to.
//
// TTFT and E2E carry the probe's trace id as an exemplar. Observe is
// ObserveClient followed by ObserveEngine (engine_timing.go).
func (m *ProbeMetrics) Observe(r *prober.Result) {
	m.ObserveClient(r)
	m.ObserveEngine(r)
}

// ObserveClient records everything Observe does except the engine's own
// timing, for a caller that settles that later (a trace join).
func (m *ProbeMetrics) ObserveClient(r *prober.Result) {
	for i := range r.Earlier {
		m.observe(&r.Earlier[i])
	}
	m.observe(r)
	m.conv.observeConversation(r)
}

func (m *ProbeMetrics) observe(r *prober.Result) {
	lv := []string{r.Target, r.Model, r.Scenario, apiOf(r)}
	if r.Turn == 1 && r.Kind == prober.KindSuccess {
		m.conv.observePrime(r)
		m.tokens.WithLabelValues(r.Target, r.Model, r.Scenario, apiOf(r), "prompt").Add(float64(max(r.PromptTokens, 0)))
		m.tokens.WithLabelValues(r.Target, r.Model, r.Scenario, apiOf(r), "output").Add(float64(max(r.OutputTokens, 0)))
		if r.PromptTokens > 0 && !r.PromptLengthOK {
			m.mismatches.WithLabelValues(lv...).Inc()
		}
		return
	}

	kind := r.Kind
	switch kind {
	case prober.KindSuccess, prober.KindShortOutput:
	default:
		kind = prober.KindError
	}
	m.probes.WithLabelValues(r.Target, r.Model, r.Scenario, apiOf(r), string(kind)).Inc()
	m.observeStamps(r)
	if kind != prober.KindError && m.thresholdsOf(r.Scenario).MetBy(r) {
		m.good.WithLabelValues(r.Target, r.Model, r.Scenario, apiOf(r), string(kind)).Inc()
	}

	switch kind {
	case prober.KindSuccess, prober.KindShortOutput:
		// A short answer (the server stopped early) still measured TTFT,
		// prefill and, at the asked length, E2E; ITL and decode speed only
		// once enough tokens came (prober.Result.DecodeMeasured).
		if r.DecodeMeasured() {
			m.itl.WithLabelValues(lv...).Observe(r.ITL().Seconds())
			m.decode.WithLabelValues(lv...).Observe(r.DecodeSpeed())
		}
		if a, ok := r.SpecDecode.Acceptance(); ok {
			m.specAcceptance.WithLabelValues(lv...).Observe(a)
		}
		if r.FollowUp() {
			if kind == prober.KindSuccess {
				m.conv.observeFollowUp(r)
			}
		} else if r.CacheHit() {
			m.cacheHits.WithLabelValues(lv...).Inc()
		}
		if !TTFTRecorded(r) {
			break // a cold prompt served from the cache, or an empty answer: no token, no timing
		}
		if d := r.TTFT(); d > 0 {
			observeWithTrace(m.ttft.WithLabelValues(lv...), d.Seconds(), r.TraceID)
		}
		if d, ok := r.E2EAtRequested(); ok && d > 0 {
			observeWithTrace(m.e2e.WithLabelValues(lv...), d.Seconds(), r.TraceID)
		}
		if v := r.PrefillSpeed(); v > 0 && !r.FollowUp() { // a follow-up's prompt was mostly not prefilled
			m.prefill.WithLabelValues(lv...).Observe(v)
		}
		if d := r.TTFC(); r.Reasoning && d > 0 {
			m.ttfc.WithLabelValues(lv...).Observe(d.Seconds())
		}
	case prober.KindError:
		reason := string(r.Reason)
		if reason == "" {
			reason = "unknown"
		}
		m.errors.WithLabelValues(r.Target, r.Model, r.Scenario, apiOf(r), reason).Inc()
	}

	if len(r.ChunkTokens) > 0 {
		h := m.chunk.WithLabelValues(lv...)
		for _, n := range r.ChunkTokens {
			if n > 0 {
				h.Observe(float64(n))
			}
		}
	}

	m.tokens.WithLabelValues(r.Target, r.Model, r.Scenario, apiOf(r), "prompt").Add(float64(max(r.PromptTokens, 0)))
	m.tokens.WithLabelValues(r.Target, r.Model, r.Scenario, apiOf(r), "output").Add(float64(max(r.OutputTokens, 0)))
	if r.PromptTokens > 0 && !r.PromptLengthOK {
		m.mismatches.WithLabelValues(lv...).Inc()
	}
	if r.UsageMismatch {
		m.usageMismatches.WithLabelValues(lv...).Inc()
	}
	if r.FirstChunkKind != "" {
		m.firstChunk.WithLabelValues(r.Target, r.Model, r.Scenario, apiOf(r), string(r.FirstChunkKind)).Inc()
	}

	var cut *prober.PromptCutError
	switch {
	case r.Reason == prober.ReasonPromptTruncated && errors.As(r.Err, &cut) && cut.Needed > 0:
		m.contextNeeded.WithLabelValues(lv...).Set(float64(cut.Needed))
	case r.Timed():
		m.contextNeeded.DeleteLabelValues(lv...) // the server read the whole prompt
	}

	ok := 0.0
	if kind != prober.KindError { // a short answer is an answer; the result label tells them apart
		ok = 1
	}
	m.success.WithLabelValues(lv...).Set(ok)
	m.promptTokens.WithLabelValues(lv...).Set(float64(r.PromptTokens))
	m.outputTokens.WithLabelValues(lv...).Set(float64(r.OutputTokens))
	start := r.Start
	if start.IsZero() {
		start = time.Now()
	}
	m.lastTimestamp.WithLabelValues(lv...).Set(float64(start.UnixNano()) / 1e9)
}

// SetScenarioEnabled sets slaprobe_scenario_enabled of a scenario probed on
// api (the scenario's API on that target). Enabling a scenario
// also creates the counters rules and panels read at zero, so that rate()
// and absence alerts work from the first scrape.
func (m *ProbeMetrics) SetScenarioEnabled(target, model, scenario, api string, enabled bool) {
	v := 0.0
	if enabled {
		v = 1
		for _, k := range []prober.Kind{prober.KindSuccess, prober.KindError, prober.KindShortOutput} {
			m.probes.WithLabelValues(target, model, scenario, api, string(k))
			if k != prober.KindError { // a failed probe is never good
				m.good.WithLabelValues(target, model, scenario, api, string(k))
			}
		}
		for _, r := range prober.Reasons {
			m.errors.WithLabelValues(target, model, scenario, api, string(r))
		}
		m.cacheHits.WithLabelValues(target, model, scenario, api)
		m.tokens.WithLabelValues(target, model, scenario, api, "prompt")
		m.tokens.WithLabelValues(target, model, scenario, api, "output")
		m.mismatches.WithLabelValues(target, model, scenario, api)
		// slaprobe_probe_usage_mismatches_total and _first_chunk_total are
		// canaries no rule or panel reads: they appear with their first
		// count instead of waiting at zero on every target and scenario.
		m.engine.init(target, model, scenario, api)
	}
	m.enabled.WithLabelValues(target, model, scenario, api).Set(v)
}

// SetThresholds replaces every slaprobe_sla_threshold series with the
// thresholds of scenarios, and judges the probes observed from now on
// against them for slaprobe_probes_good_total. A scenario not among them
// has no threshold: its probes are good when they get an answer.
func (m *ProbeMetrics) SetThresholds(scenarios []prober.Scenario) {
	th := make(map[string]prober.Thresholds, len(scenarios))
	m.threshold.Reset()
	for _, s := range scenarios {
		th[s.Name] = s.Thresholds
		for _, t := range s.Thresholds.Metrics() {
			m.threshold.WithLabelValues(s.Name, t.Metric).Set(t.Value)
		}
	}
	m.mu.Lock()
	m.thresholds = th
	m.mu.Unlock()
}

// thresholdsOf returns the thresholds a probe of scenario is judged by.
func (m *ProbeMetrics) thresholdsOf(scenario string) prober.Thresholds {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.thresholds[scenario]
}

// SetPlannedTokensPerHour sets slaprobe_prober_planned_tokens_per_hour.
func (m *ProbeMetrics) SetPlannedTokensPerHour(target string, v float64) {
	m.planned.WithLabelValues(target).Set(v)
}

// ForgetTarget deletes every series of the target, e.g. when its model
// changed or it left the config, so that stale series do not linger.
func (m *ProbeMetrics) ForgetTarget(target string) {
	l := prometheus.Labels{"target": target}
	for _, v := range m.vecs() {
		v.DeletePartialMatch(l)
	}
	m.stamps.DeletePartialMatch(l)
}

// ForgetModel deletes the series of one target and model, e.g. those
// recorded under model="" while the model was not known yet.
func (m *ProbeMetrics) ForgetModel(target, model string) {
	l := prometheus.Labels{"target": target, "model": model}
	for _, v := range m.vecs() {
		if v == m.planned.MetricVec {
			continue
		}
		v.DeletePartialMatch(l)
	}
}

func (m *ProbeMetrics) vecs() []*prometheus.MetricVec {
	return append(m.engine.vecs(),
		m.ttft.MetricVec, m.itl.MetricVec, m.decode.MetricVec, m.e2e.MetricVec, m.prefill.MetricVec, m.chunk.MetricVec, m.ttfc.MetricVec,
		m.specAcceptance.MetricVec,
		m.probes.MetricVec, m.good.MetricVec, m.errors.MetricVec, m.cacheHits.MetricVec, m.tokens.MetricVec, m.mismatches.MetricVec,
		m.usageMismatches.MetricVec, m.firstChunk.MetricVec,
		m.success.MetricVec, m.promptTokens.MetricVec, m.outputTokens.MetricVec, m.lastTimestamp.MetricVec, m.enabled.MetricVec,
		m.planned.MetricVec, m.contextNeeded.MetricVec,
		m.conv.hitRatio.MetricVec, m.conv.saved.MetricVec, m.conv.savedRatio.MetricVec, m.conv.primeTTFT.MetricVec,
		m.conv.misses.MetricVec,
		m.conv.turns.MetricVec, m.conv.history.MetricVec, m.conv.recomputed.MetricVec, m.conv.cachedRatio.MetricVec, m.conv.conversationSeconds.MetricVec,
	)
}

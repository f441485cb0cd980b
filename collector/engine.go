package collector

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slaprobe/slaprobe/internal/engine"
)

// EngineCollector exports, per target, what slaprobe last read from the
// engine's own /metrics: whether it could read it, and the key gauges in
// base units, so dashboards join them with probe metrics on `target`
// without relabelling the engine's own series.
//
// Values come from the Watchers' last snapshots; a scrape of slaprobe never
// scrapes the engine.
type EngineCollector struct {
	pool *engine.Pool

	up, errors, running, waiting, kvCache, genTokens, promptTokens, finished, lastScrape *prometheus.Desc

	// What explains a slow tail (docs/live-signals.md lists each source).
	waitingByReason, preemptions, promptBySource, cacheByTier                    *prometheus.Desc
	phase, ttft, itl, sleeping, admissionRejections, kvTransfer, kvTransferFails *prometheus.Desc
	specDraft, specAccepted, specAcceptance, slots                               *prometheus.Desc
}

// NewEngineCollector returns the collector for the pool's targets.
func NewEngineCollector(pool *engine.Pool) *EngineCollector {
	t := []string{"target"}
	return &EngineCollector{
		pool:            pool,
		up:              engineDesc("slaprobe_engine_up", t),
		errors:          engineDesc("slaprobe_engine_scrape_errors_total", t),
		running:         engineDesc("slaprobe_engine_requests_running", t),
		waiting:         engineDesc("slaprobe_engine_requests_waiting", t),
		kvCache:         engineDesc("slaprobe_engine_kv_cache_usage_ratio", t),
		genTokens:       engineDesc("slaprobe_engine_generation_tokens_total", t),
		promptTokens:    engineDesc("slaprobe_engine_prompt_tokens_total", t),
		finished:        engineDesc("slaprobe_engine_requests_finished_total", t),
		lastScrape:      engineDesc("slaprobe_engine_last_scrape_timestamp_seconds", t),
		waitingByReason: engineDesc("slaprobe_engine_requests_waiting_by_reason", tr("reason")),
		preemptions:     engineDesc("slaprobe_engine_preemptions_total", t),
		promptBySource:  engineDesc("slaprobe_engine_prompt_tokens_by_source_total", tr("source")),
		cacheByTier:     engineDesc("slaprobe_engine_cache_tokens_by_tier_total", tr("tier")),
		phase:           engineDesc("slaprobe_engine_request_phase_seconds", tr("phase")),
		ttft:            engineDesc("slaprobe_engine_ttft_seconds", t),
		// Not slaprobe_engine_itl_seconds: that name is the engine's mean ITL
		// of each probe (engine_timing.go), with other labels.
		itl:                 engineDesc("slaprobe_engine_inter_token_latency_seconds", t),
		sleeping:            engineDesc("slaprobe_engine_sleeping", t),
		admissionRejections: engineDesc("slaprobe_engine_admission_rejections_total", t),
		kvTransfer:          engineDesc("slaprobe_engine_kv_transfer_seconds", t),
		kvTransferFails:     engineDesc("slaprobe_engine_kv_transfer_failures_total", t),
		specDraft:           engineDesc("slaprobe_engine_spec_decode_draft_tokens_total", t),
		specAccepted:        engineDesc("slaprobe_engine_spec_decode_accepted_tokens_total", t),
		specAcceptance:      engineDesc("slaprobe_engine_spec_decode_acceptance_ratio", t),
		slots:               engineDesc("slaprobe_engine_slots", t),
	}
}

func tr(label string) []string { return []string{"target", label} }

// engineDesc is the Desc of an engine series, with its HELP text from
// engine.SeriesHelp (beside the engines' tables).
func engineDesc(name string, labels []string) *prometheus.Desc {
	help, ok := engine.SeriesHelp[name]
	if !ok {
		panic("collector: no engine.SeriesHelp for " + name)
	}
	return prometheus.NewDesc(name, help, labels, nil)
}

// Describe implements prometheus.Collector.
func (c *EngineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.errors, c.running, c.waiting, c.kvCache, c.genTokens, c.promptTokens, c.finished, c.lastScrape,
		c.waitingByReason, c.preemptions, c.promptBySource, c.cacheByTier, c.phase, c.ttft, c.itl, c.sleeping,
		c.admissionRejections, c.kvTransfer, c.kvTransferFails, c.specDraft, c.specAccepted, c.specAcceptance, c.slots} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *EngineCollector) Collect(ch chan<- prometheus.Metric) {
	for _, w := range c.pool.Watchers() {
		st := w.Status()
		t := st.Target
		up := 0.0
		if st.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, t)
		ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(st.ScrapeErrors), t)
		// Values of the last good snapshot are shown only while the endpoint
		// is up: a stale queue length would look like a live one.
		if !st.Up || !st.HasLatest {
			continue
		}
		s := st.Latest
		if s.HasQueue {
			ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, s.Running, t)
			ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, s.Waiting, t)
		}
		if s.HasKVCache {
			ch <- prometheus.MustNewConstMetric(c.kvCache, prometheus.GaugeValue, s.KVCacheUsage, t)
		}
		if s.HasTokens {
			ch <- prometheus.MustNewConstMetric(c.genTokens, prometheus.CounterValue, s.GenerationTokens, t)
			ch <- prometheus.MustNewConstMetric(c.promptTokens, prometheus.CounterValue, s.PromptTokens, t)
		}
		if s.HasRequestsFinished {
			ch <- prometheus.MustNewConstMetric(c.finished, prometheus.CounterValue, s.RequestsFinished, t)
		}
		ch <- prometheus.MustNewConstMetric(c.lastScrape, prometheus.GaugeValue, float64(s.Time.UnixNano())/1e9, t)
		c.collectTail(ch, t, s)
		if st.HasProps {
			ch <- prometheus.MustNewConstMetric(c.slots, prometheus.GaugeValue, float64(st.Props.TotalSlots), t)
		}
	}
}

// collectTail exports the signals that explain a slow tail, each only where
// the engine gives it.
func (c *EngineCollector) collectTail(ch chan<- prometheus.Metric, t string, s engine.Snapshot) {
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{t}, lv...)...)
	}
	counter := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append([]string{t}, lv...)...)
	}
	hist := func(d *prometheus.Desc, h *engine.Histogram, lv ...string) {
		if h == nil {
			return
		}
		ch <- prometheus.MustNewConstHistogram(d, h.Count, h.Sum, h.Buckets, append([]string{t}, lv...)...)
	}
	if s.HasWaitingByReason {
		gauge(c.waitingByReason, s.WaitingCapacity, "capacity")
		gauge(c.waitingByReason, s.WaitingDeferred, "deferred")
	}
	if s.HasPreemptions {
		counter(c.preemptions, s.Preemptions)
	}
	if s.HasPromptBySource {
		counter(c.promptBySource, s.PromptComputed, engine.SourceComputed)
		counter(c.promptBySource, s.PromptCacheHit, engine.SourceCacheHit)
		if s.HasPromptKVTransfer {
			counter(c.promptBySource, s.PromptKVTransfer, engine.SourceKVTransfer)
		}
	}
	tiers := make([]string, 0, len(s.CacheTokensByTier))
	for tier := range s.CacheTokensByTier {
		tiers = append(tiers, tier)
	}
	sort.Strings(tiers)
	for _, tier := range tiers {
		counter(c.cacheByTier, s.CacheTokensByTier[tier], tier)
	}
	if s.HasSleepState {
		v := 0.0
		if s.Sleeping {
			v = 1
		}
		gauge(c.sleeping, v)
	}
	if s.HasAdmissionRejections {
		counter(c.admissionRejections, s.AdmissionRejections)
	}
	if s.HasKVTransferFailures {
		counter(c.kvTransferFails, s.KVTransferFailures)
	}
	if s.HasSpecDecode {
		counter(c.specDraft, s.SpecDraftTokens)
		counter(c.specAccepted, s.SpecAcceptedTokens)
	}
	if s.HasSpecAcceptRate {
		gauge(c.specAcceptance, s.SpecAcceptRate)
	}
	if h := s.Hists; h != nil {
		for _, p := range engine.Phases {
			if x, ok := h.Phase[p]; ok {
				hist(c.phase, &x, p)
			}
		}
		hist(c.ttft, h.TTFT)
		hist(c.itl, h.ITL)
		hist(c.kvTransfer, h.KVTransfer)
	}
}

package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ErrNoEngineMetrics means the endpoint answered with valid exposition text
// that holds no vLLM or SGLang family: it is not an engine we can read.
var ErrNoEngineMetrics = errors.New("no vLLM or SGLang metrics in the exposition")

// maxBodyBytes bounds what one scrape reads. A vLLM /metrics page is tens of
// KiB; a page this large is a misconfigured URL, not an engine.
const maxBodyBytes = 16 << 20

// acceptHeader asks for the classic text format. prometheus_client (vLLM,
// SGLang) would otherwise answer OpenMetrics to a client that offers it,
// and the text parser reads counters there under different family names.
const acceptHeader = "text/plain;version=0.0.4;q=1,*/*;q=0.1"

// Scrape fetches url with client and parses it into a Snapshot stamped with
// the time the response arrived. A nil client means http.DefaultClient; the
// deadline comes from ctx.
func Scrape(ctx context.Context, client *http.Client, url string) (Snapshot, error) {
	return scrapeAt(ctx, client, url, time.Now)
}

func scrapeAt(ctx context.Context, client *http.Client, url string, now func() time.Time) (Snapshot, error) {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Snapshot{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	req.Header.Set("Accept", acceptHeader)
	resp, err := client.Do(req)
	if err != nil {
		return Snapshot{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	// Stamp the snapshot when the answer arrived: the engine's gauges were
	// read at about this time, not when the body finished parsing.
	at := now()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return Snapshot{}, fmt.Errorf("scrape %s: HTTP %s", url, resp.Status)
	}
	snap, err := Parse(io.LimitReader(resp.Body, maxBodyBytes))
	if err != nil {
		return Snapshot{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	snap.Time = at
	return snap, nil
}

// Parse reads Prometheus text exposition into a Snapshot (Time left zero).
// It returns ErrNoEngineMetrics when no known family is present.
func Parse(r io.Reader) (Snapshot, error) {
	// The zero TextParser has no name validation scheme and panics on the
	// first name it checks. vLLM and SGLang names contain ':', which the
	// legacy scheme allows in metric names; UTF-8 also accepts whatever a
	// proxy or a newer engine may put in label names.
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Snapshot{}, fmt.Errorf("parse metrics: %w", err)
	}
	return FromFamilies(fams)
}

// names lists the families that carry one signal, current name first. The
// first family present wins, so an engine that exports both an old and a new
// name (as some simulators do) is not counted twice.
type names []string

var (
	vllmRunning     = names{"vllm:num_requests_running"}
	vllmWaiting     = names{"vllm:num_requests_waiting"}
	vllmKVCache     = names{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}
	vllmGenTokens   = names{"vllm:generation_tokens_total", "vllm:generation_tokens"}
	vllmPromptToks  = names{"vllm:prompt_tokens_total", "vllm:prompt_tokens"}
	vllmQueueTime   = names{"vllm:request_queue_time_seconds"}
	vllmTTFT        = names{"vllm:time_to_first_token_seconds"}
	vllmITL         = names{"vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"}
	vllmE2E         = names{"vllm:e2e_request_latency_seconds"}
	vllmPrefixQuery = names{"vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries",
		"vllm:gpu_prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries"}
	vllmPrefixHits = names{"vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits",
		"vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits"}
	vllmSpecDraft  = names{"vllm:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_draft_tokens"}
	vllmSpecAccept = names{"vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_accepted_tokens"}

	sglRunning    = names{"sglang:num_running_reqs"}
	sglWaiting    = names{"sglang:num_queue_reqs"}
	sglKVCache    = names{"sglang:token_usage"}
	sglGenTokens  = names{"sglang:generation_tokens_total", "sglang:generation_tokens"}
	sglPromptToks = names{"sglang:prompt_tokens_total", "sglang:prompt_tokens"}
	sglQueueTime  = names{"sglang:queue_time_seconds"}
	sglTTFT       = names{"sglang:time_to_first_token_seconds"}
	sglITL        = names{"sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"}
	sglE2E        = names{"sglang:e2e_request_latency_seconds"}
	sglCacheHit   = names{"sglang:cache_hit_rate"}
)

// FromFamilies builds a Snapshot from parsed metric families.
func FromFamilies(fams map[string]*dto.MetricFamily) (Snapshot, error) {
	var s Snapshot
	switch {
	case hasPrefix(fams, "vllm:"):
		s.Flavor = "vllm"
		s.Running, s.Series, s.HasQueue = sumOf(fams, vllmRunning)
		s.Waiting, _, _ = sumOf(fams, vllmWaiting)
		s.KVCacheUsage, s.HasKVCache = meanOf(fams, vllmKVCache)
		s.GenerationTokens, _, s.HasTokens = sumOf(fams, vllmGenTokens)
		s.PromptTokens, _, _ = sumOf(fams, vllmPromptToks)
		s.QueueTimeSum, s.QueueTimeCount, s.HasQueueTime = histOf(fams, vllmQueueTime)
		s.TTFTSum, s.TTFTCount, s.HasTTFT = histOf(fams, vllmTTFT)
		s.ITLSum, s.ITLCount, s.HasITL = histOf(fams, vllmITL)
		_, s.RequestsFinished, s.HasRequestsFinished = histOf(fams, vllmE2E)
		var hasQ, hasH bool
		s.PrefixCacheQueries, _, hasQ = sumOf(fams, vllmPrefixQuery)
		s.PrefixCacheHits, _, hasH = sumOf(fams, vllmPrefixHits)
		s.HasPrefixCache = hasQ && hasH
		var hasD, hasA bool
		s.SpecDraftTokens, _, hasD = sumOf(fams, vllmSpecDraft)
		s.SpecAcceptedTokens, _, hasA = sumOf(fams, vllmSpecAccept)
		s.HasSpecDecode = hasD && hasA
	case hasPrefix(fams, "sglang:"):
		s.Flavor = "sglang"
		s.Running, s.Series, s.HasQueue = sumOf(fams, sglRunning)
		s.Waiting, _, _ = sumOf(fams, sglWaiting)
		s.KVCacheUsage, s.HasKVCache = meanOf(fams, sglKVCache)
		s.GenerationTokens, _, s.HasTokens = sumOf(fams, sglGenTokens)
		s.PromptTokens, _, _ = sumOf(fams, sglPromptToks)
		s.QueueTimeSum, s.QueueTimeCount, s.HasQueueTime = histOf(fams, sglQueueTime)
		s.TTFTSum, s.TTFTCount, s.HasTTFT = histOf(fams, sglTTFT)
		s.ITLSum, s.ITLCount, s.HasITL = histOf(fams, sglITL)
		_, s.RequestsFinished, s.HasRequestsFinished = histOf(fams, sglE2E)
		s.CacheHitRate, s.HasCacheHitRate = meanOf(fams, sglCacheHit)
	default:
		return Snapshot{}, ErrNoEngineMetrics
	}
	return s, nil
}

func hasPrefix(fams map[string]*dto.MetricFamily, prefix string) bool {
	for name := range fams {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// first returns the first family of ns that is present.
func first(fams map[string]*dto.MetricFamily, ns names) *dto.MetricFamily {
	for _, n := range ns {
		if mf, ok := fams[n]; ok && len(mf.GetMetric()) > 0 {
			return mf
		}
	}
	return nil
}

// sumOf sums a gauge or counter over all its label sets (data-parallel
// engines, several model names).
func sumOf(fams map[string]*dto.MetricFamily, ns names) (sum float64, n int, ok bool) {
	mf := first(fams, ns)
	if mf == nil {
		return 0, 0, false
	}
	for _, m := range mf.GetMetric() {
		v := scalar(m)
		if math.IsNaN(v) {
			continue // a NaN gauge says "unknown"; do not let it poison the sum
		}
		sum += v
		n++
	}
	return sum, n, n > 0
}

// meanOf averages a ratio gauge over its label sets: the KV cache usage of
// two engines at 0.5 each is 0.5, not 1.
func meanOf(fams map[string]*dto.MetricFamily, ns names) (float64, bool) {
	sum, n, ok := sumOf(fams, ns)
	if !ok || n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

// histOf returns the summed sample sum and count of a histogram. An
// exposition without a TYPE line leaves _sum and _count as untyped
// families of their own; those are read too.
func histOf(fams map[string]*dto.MetricFamily, ns names) (sum, count float64, ok bool) {
	for _, n := range ns {
		if mf, found := fams[n]; found && len(mf.GetMetric()) > 0 {
			for _, m := range mf.GetMetric() {
				switch {
				case m.GetHistogram() != nil:
					sum += m.GetHistogram().GetSampleSum()
					count += float64(m.GetHistogram().GetSampleCount())
				case m.GetSummary() != nil:
					sum += m.GetSummary().GetSampleSum()
					count += float64(m.GetSummary().GetSampleCount())
				}
			}
			return sum, count, true
		}
		if mc, found := fams[n+"_count"]; found && len(mc.GetMetric()) > 0 {
			count, _, _ = sumOf(fams, names{n + "_count"})
			sum, _, _ = sumOf(fams, names{n + "_sum"})
			return sum, count, true
		}
	}
	return 0, 0, false
}

func scalar(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

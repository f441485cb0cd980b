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
// that holds no vLLM, SGLang or llama.cpp server family: it is not an
// engine we can read.
var ErrNoEngineMetrics = errors.New("no vLLM, SGLang or llama.cpp server metrics (vllm:, sglang:, llamacpp:) in the exposition")

// NoEngineError is ErrNoEngineMetrics with the families the page did hold
// (a few, sorted), so the one log line about it says what answered: another
// application's metrics, a proxy's, an engine slaprobe cannot read.
type NoEngineError struct {
	Seen  []string // at most maxSeenFamilies names, each at most maxSeenName bytes
	Total int      // families on the page
}

const (
	maxSeenFamilies = 8
	maxSeenName     = 80
)

func noEngineError(fams map[string]*dto.MetricFamily) *NoEngineError {
	return noEngineErrorOf(familyNames(fams))
}

func familyNames(fams map[string]*dto.MetricFamily) []string {
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	return names
}

func (e *NoEngineError) Error() string {
	seen := "none"
	if e.Total > 0 {
		seen = strings.Join(e.Seen, ", ")
		if e.Total > len(e.Seen) {
			seen += fmt.Sprintf(", … (%d in all)", e.Total)
		}
	}
	return "no engine signals: " + ErrNoEngineMetrics.Error() + "; families seen: " + seen
}

// Is makes errors.Is(err, ErrNoEngineMetrics) hold.
func (e *NoEngineError) Is(target error) bool { return target == ErrNoEngineMetrics }

// acceptHeader asks for the classic text format. prometheus_client (vLLM,
// SGLang) would otherwise answer OpenMetrics to a client that offers it,
// and the text parser reads counters there under different family names.
const acceptHeader = "text/plain;version=0.0.4;q=1,*/*;q=0.1"

// Scrape fetches url with client and parses it into a Snapshot stamped with
// the time the response arrived. A nil client means http.DefaultClient; the
// deadline comes from ctx. No redirect is followed, whatever the client's
// CheckRedirect: a 3xx fails the scrape and names its Location, so the
// client's credentials never go to another origin. Parse bounds the page.
func Scrape(ctx context.Context, client *http.Client, url string) (Snapshot, error) {
	return scrapeAt(ctx, client, url, time.Now)
}

func scrapeAt(ctx context.Context, client *http.Client, url string, now func() time.Time) (Snapshot, error) {
	client = noRedirect(client)
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
	if err := redirectError(resp); err != nil {
		return Snapshot{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return Snapshot{}, fmt.Errorf("scrape %s: HTTP %s", url, resp.Status)
	}
	snap, err := Parse(resp.Body)
	if err != nil {
		return Snapshot{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	snap.Time = at
	return snap, nil
}

// Parse reads Prometheus text exposition into a Snapshot (Time left zero).
// It returns ErrNoEngineMetrics when no known family is present, and
// ErrPageTooLarge past maxBodyBytes. Only the families slaprobe reads are
// parsed: the others are dropped line by line as the page streams in
// (filter.go), so memory follows what is kept, not the page.
func Parse(r io.Reader) (Snapshot, error) {
	// The zero TextParser has no name validation scheme and panics on the
	// first name it checks. vLLM and SGLang names contain ':', which the
	// legacy scheme allows in metric names; UTF-8 also accepts whatever a
	// proxy or a newer engine may put in label names.
	p := expfmt.NewTextParser(model.UTF8Validation)
	f := newPageFilter(&capReader{r: r, left: maxBodyBytes})
	fams, err := p.TextToMetricFamilies(f)
	if err != nil {
		if errors.Is(err, ErrPageTooLarge) {
			return Snapshot{}, ErrPageTooLarge
		}
		return Snapshot{}, fmt.Errorf("parse metrics: %w", err)
	}
	has := func(prefix string) bool { return f.prefixes[prefix] || hasPrefix(fams, prefix) }
	return fromFamilies(fams, has, func() *NoEngineError { return f.noEngine(familyNames(fams)) })
}

// The families of the engines not yet read through a table (flavor.go),
// current name first; the first family present wins.
//
// Where each name comes from (docs/engines.md has the full table; the
// fixtures in testdata follow these sources, testdata/README.md):
//   - SGLang: sgl-project/sglang python/sglang/srt/metrics/collector.py
//     (commit 00ae9c1590d2) and test/srt/test_metrics.py (essential_metrics,
//     commit 00a2f8074611). cached_tokens_total has no sample before the
//     first cache hit; spec_accept_rate and spec_accept_length read 0 on an
//     engine without speculative decoding.
//   - llama.cpp server: ggml-org/llama.cpp tools/server (the metrics result's
//     Prometheus rendering; tools/server/README.md's table). spec_decode_*
//     came with PR #26389, prompt_tokens_cached_total with commit decaf508b
//     (2026-08); kv_cache_usage_ratio was removed upstream (PR #13660) and
//     is read from older builds only.
var (
	sglRunning    = family("sglang:num_running_reqs")
	sglWaiting    = family("sglang:num_queue_reqs")
	sglKVCache    = family("sglang:token_usage")
	sglGenTokens  = family("sglang:generation_tokens_total", "sglang:generation_tokens")
	sglPromptToks = family("sglang:prompt_tokens_total", "sglang:prompt_tokens")
	sglQueueTime  = family("sglang:queue_time_seconds")
	sglTTFT       = family("sglang:time_to_first_token_seconds")
	sglITL        = family("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds")
	sglE2E        = family("sglang:e2e_request_latency_seconds")
	sglCacheHit   = family("sglang:cache_hit_rate")

	sglRetracted    = family("sglang:num_retracted_requests_total", "sglang:num_retracted_requests")
	sglCachedTokens = family("sglang:cached_tokens_total", "sglang:cached_tokens")
	sglStageLatency = family("sglang:per_stage_req_latency_seconds")
	sglSpecAccept   = family("sglang:spec_accept_rate")

	lcppRunning      = family("llamacpp:requests_processing")
	lcppWaiting      = family("llamacpp:requests_deferred")
	lcppKVCache      = family("llamacpp:kv_cache_usage_ratio")
	lcppGenTokens    = family("llamacpp:tokens_predicted_total")
	lcppPromptToks   = family("llamacpp:prompt_tokens_total") // excludes cached tokens
	lcppPromptCached = family("llamacpp:prompt_tokens_cached_total")
	lcppSpecDraft    = family("llamacpp:spec_decode_num_draft_tokens_total")
	lcppSpecAccept   = family("llamacpp:spec_decode_num_accepted_tokens_total")
)

// SGLang's cache tiers, and its per-stage latency stages that map to
// slaprobe's phases.
var (
	sglCacheTiers  = map[string]bool{"device": true, "host": true, "storage": true}
	sglStagePhases = []struct{ stage, phase string }{
		{"prefill_forward", PhasePrefill},
		{"decode_loop", PhaseDecode},
	}
)

// sglSpecAcceptLn is SGLang's mean accept length: below 1 (SGLang exports 0
// without speculative decoding), its spec_accept_rate says nothing. Kept
// apart from the table above; where that table registers the families the
// page filter keeps, this one must be registered too.
var sglSpecAcceptLn = family("sglang:spec_accept_length")

// Where a prompt token's KV came from, the source label of
// slaprobe_engine_prompt_tokens_by_source_total.
const (
	SourceComputed   = "computed"
	SourceCacheHit   = "cache_hit"
	SourceKVTransfer = "kv_transfer"
)

// FromFamilies builds a Snapshot from parsed metric families.
func FromFamilies(fams map[string]*dto.MetricFamily) (Snapshot, error) {
	has := func(prefix string) bool { return hasPrefix(fams, prefix) }
	return fromFamilies(fams, has, func() *NoEngineError { return noEngineError(fams) })
}

// fromFamilies builds a Snapshot from fams; has says whether the page had
// a family of an engine's prefix, and none builds the error of a page
// without one.
func fromFamilies(fams map[string]*dto.MetricFamily, has func(prefix string) bool, none func() *NoEngineError) (Snapshot, error) {
	if f := detect(has); f != nil {
		return f.read(fams), nil
	}
	var s Snapshot
	switch {
	case has("sglang:"):
		s.Flavor = "sglang"
		s.Running, s.Series, s.HasQueue = sumOf(fams, sglRunning, nil)
		s.Waiting, _, _ = sumOf(fams, sglWaiting, nil)
		s.KVCacheUsage, s.HasKVCache = meanOf(fams, sglKVCache, nil)
		s.GenerationTokens, _, s.HasTokens = sumOf(fams, sglGenTokens, nil)
		s.PromptTokens, _, _ = sumOf(fams, sglPromptToks, nil)
		s.QueueTimeSum, s.QueueTimeCount, s.HasQueueTime = histOf(fams, sglQueueTime, nil)
		s.TTFTSum, s.TTFTCount, s.HasTTFT = histOf(fams, sglTTFT, nil)
		s.ITLSum, s.ITLCount, s.HasITL = histOf(fams, sglITL, nil)
		_, s.RequestsFinished, s.HasRequestsFinished = histOf(fams, sglE2E, nil)
		s.CacheHitRate, s.HasCacheHitRate = meanOf(fams, sglCacheHit, nil)
		readSGLangTail(fams, &s)
	case has("llamacpp:"):
		s.Flavor = "llamacpp"
		readLlamaCpp(fams, &s)
	default:
		return Snapshot{}, none()
	}
	if s.Hists.empty() {
		s.Hists = nil
	}
	return s, nil
}

// readSGLangTail reads SGLang's families that explain a slow tail.
func readSGLangTail(fams map[string]*dto.MetricFamily, s *Snapshot) {
	// The retraction counter appears only after the first retraction: on a
	// page with other sglang: families, its absence means none yet.
	s.Preemptions, _, _ = sumOf(fams, sglRetracted, nil)
	s.HasPreemptions = true

	if mf := first(fams, sglCachedTokens); mf != nil {
		s.CacheTokensByTier = map[string]float64{}
		var cached float64
		for _, m := range mf.GetMetric() {
			v := scalar(m)
			if math.IsNaN(v) {
				continue
			}
			cached += v
			// Only SGLang's known tiers become label values: a page cannot
			// make slaprobe export series without bound.
			if tier, _ := labelValue(m, "cache_source"); sglCacheTiers[tier] {
				s.CacheTokensByTier[tier] += v
			}
		}
		if len(s.CacheTokensByTier) == 0 {
			s.CacheTokensByTier = nil
		}
		if total, _, ok := sumOf(fams, sglPromptToks, nil); ok {
			s.PromptCacheHit, s.PromptComputed = cached, math.Max(0, total-cached)
			s.HasPromptBySource = true
		}
	}
	s.SpecAcceptRate, s.HasSpecAcceptRate = meanOf(fams, sglSpecAccept, nil)
	// Without speculative decoding SGLang still exports both gauges, at 0;
	// with it, a step emits at least one token (accept length >= 1).
	if l, ok := meanOf(fams, sglSpecAcceptLn, nil); ok && l < 1 {
		s.SpecAcceptRate, s.HasSpecAcceptRate = 0, false
	}

	// Tensor-parallel ranks observe the same requests: where a tp_rank label
	// exists, rank 0 alone is read, so a request is not counted once per rank.
	h := &Histograms{Phase: map[string]Histogram{}}
	if x, ok := histogramOf(fams, sglQueueTime, tpRank0, s); ok {
		h.Phase[PhaseQueue] = x
	}
	if mf := first(fams, sglStageLatency); mf != nil {
		for _, sp := range sglStagePhases {
			stage, phase := sp.stage, sp.phase
			keep := func(m *dto.Metric) bool {
				st, _ := labelValue(m, "stage")
				return st == stage && tpRank0(m)
			}
			x, ok, err := sumHistograms(mf, keep)
			if err != nil {
				s.Notes = append(s.Notes, fmt.Sprintf("stage %s: %v", stage, err))
				continue
			}
			if ok {
				h.Phase[phase] = x
			}
		}
	}
	h.TTFT = histogramPtr(histogramOf(fams, sglTTFT, tpRank0, s))
	h.ITL = histogramPtr(histogramOf(fams, sglITL, tpRank0, s))
	s.Hists = h
}

// tpRank0 keeps a label set without tp_rank, or with tp_rank "0".
func tpRank0(m *dto.Metric) bool {
	r, ok := labelValue(m, "tp_rank")
	return !ok || r == "0"
}

// readLlamaCpp reads llama.cpp server's families (--metrics; no labels).
func readLlamaCpp(fams map[string]*dto.MetricFamily, s *Snapshot) {
	var hasW bool
	s.Running, s.Series, s.HasQueue = sumOf(fams, lcppRunning, nil)
	s.Waiting, _, hasW = sumOf(fams, lcppWaiting, nil)
	s.HasQueue = s.HasQueue && hasW
	s.KVCacheUsage, s.HasKVCache = meanOf(fams, lcppKVCache, nil)
	gen, _, hasG := sumOf(fams, lcppGenTokens, nil)
	computed, _, hasP := sumOf(fams, lcppPromptToks, nil)
	cached, _, hasC := sumOf(fams, lcppPromptCached, nil)
	// llama.cpp's prompt_tokens_total leaves cached tokens out; vLLM's and
	// SGLang's count them. PromptTokens keeps vLLM's meaning.
	s.GenerationTokens, s.PromptTokens, s.HasTokens = gen, computed+cached, hasG && hasP
	if hasP && hasC {
		s.PromptComputed, s.PromptCacheHit, s.HasPromptBySource = computed, cached, true
	}
	var hasD, hasA bool
	s.SpecDraftTokens, _, hasD = sumOf(fams, lcppSpecDraft, nil)
	s.SpecAcceptedTokens, _, hasA = sumOf(fams, lcppSpecAccept, nil)
	s.HasSpecDecode = hasD && hasA
}

// histogramOf sums the first present family of ns as a typed histogram; a
// family that cannot be summed is noted on s and left out.
func histogramOf(fams map[string]*dto.MetricFamily, ns names, keep func(*dto.Metric) bool, s *Snapshot) (Histogram, bool) {
	mf := first(fams, ns)
	if mf == nil {
		return Histogram{}, false
	}
	h, ok, err := sumHistograms(mf, keep)
	if err != nil {
		s.Notes = append(s.Notes, err.Error())
		return Histogram{}, false
	}
	return h, ok
}

func histogramPtr(h Histogram, ok bool) *Histogram {
	if !ok {
		return nil
	}
	return &h
}

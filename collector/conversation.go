package collector

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slaprobe/slaprobe/prober"
)

// conversationMetrics are the slaprobe_conversation_* series of conversation
// scenarios (`conversation:` in the config, `warm:` before): whether the
// server's prefix cache served a follow-up turn, and what it saved. They
// exist only for conversation scenarios (created at their first follow-up),
// so cold scenarios add no series.
//
// turns classes each follow-up by the share of what the engine had already
// seen of its conversation that came from its cache
// (prober.Result.ConversationCache); summed over its classes it counts the
// successful follow-ups. conversationSeconds times whole conversations.
type conversationMetrics struct {
	hitRatio, saved, savedRatio, primeTTFT *prometheus.GaugeVec
	misses                                 *prometheus.CounterVec

	turns                            *prometheus.CounterVec
	history, recomputed              *prometheus.CounterVec
	cachedRatio, conversationSeconds *snapHist
}

// Classic buckets of the conversation histograms. The cached share has edges
// at the miss and hit lines (0.1, 0.9); a conversation's waiting time spans
// a two-turn chat (about a second) to 64 long turns.
var (
	cachedRatioBuckets         = []float64{0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1}
	conversationBuckets        = []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600}
	conversationBucketsReduced = []float64{1, 5, 10, 30, 60, 300, 1200, 3600}
)

func newConversationMetrics(o ProbeMetricsOptions) conversationMetrics {
	return conversationMetrics{
		turns: newCounter("conversation_turns_total",
			"Successful follow-up turns of conversation scenarios by the share of what the engine had already seen of the conversation (the turn before's prompt and answer) that it served from its cache: hit (at least 0.9), partial, miss (under 0.1), unknown (neither reported by the server nor inferable from the turn's TTFT within an error of 0.1).", "cache"),
		cachedRatio: newHistogram("conversation_cached_ratio",
			"Share of what the engine had already seen of a conversation (the turn before's prompt and answer) that it served from its cache, per successful follow-up turn whose share is known: reported by the server, else inferred from the turn's TTFT.",
			o.buckets(cachedRatioBuckets, cachedRatioBuckets)),
		conversationSeconds: newHistogram("conversation_seconds",
			"Waiting time of each conversation whose every turn succeeded: the sum of its turns' E2E latencies, priming turn included.",
			o.buckets(conversationBuckets, conversationBucketsReduced)),
		history: newCounter("conversation_history_tokens_total",
			"Prompt tokens that successful follow-up turns of conversation scenarios could have reused from the prefix cache: what the engine had already seen of the conversation (the turn before's prompt and answer), summed over the turns whose cached share is known; source says where the share came from (reported by the server, or inferred from the turn's TTFT).", "source"),
		recomputed: newCounter("conversation_recomputed_tokens_total",
			"Prompt tokens that successful follow-up turns of conversation scenarios prefilled beyond their new tokens (prompt minus cached minus new tokens, at least 0): the part of slaprobe_conversation_history_tokens_total the engine computed again for want of cache, e.g. behind a router without session affinity.", "source"),
		hitRatio: newGauge("conversation_cache_hit_ratio",
			"Share of the last conversation follow-up's prompt the server served from its prefix cache (cached_tokens / prompt_tokens). Absent when the server does not report cached tokens."),
		saved: newGauge("conversation_ttft_saved_seconds",
			"TTFT the last conversation follow-up saved against its conversation's priming turn, a cold prompt of the context: priming TTFT minus follow-up TTFT (negative when the follow-up was slower)."),
		savedRatio: newGauge("conversation_ttft_saved_ratio",
			"slaprobe_conversation_ttft_saved_seconds divided by the priming turn's TTFT: near 1 when prefix caching works, 0 or below when a follow-up costs what a cold prompt costs."),
		primeTTFT: newGauge("conversation_prime_ttft_seconds",
			"TTFT of the last priming turn of a conversation scenario: a cold prompt of the conversation's context, sent with a fresh cache_salt."),
		misses: newCounter("conversation_cache_misses_total",
			"Successful conversation follow-up turns whose prompt the server reported as not cached at all (cached_tokens 0): a result, not an error."),
	}
}

func (w conversationMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{sorted(w.hitRatio), sorted(w.saved), sorted(w.savedRatio), sorted(w.primeTTFT),
		sorted(w.misses), sorted(w.turns), sorted(w.history), sorted(w.recomputed), w.cachedRatio, w.conversationSeconds}
}

// recomputedSources are the source label's values of the history and
// recomputed token counters: the server's cached count, or the share
// inferred from TTFT.
var recomputedSources = []string{"reported", "inferred"}

func recomputedSource(m prober.CachedMethod) string {
	if m == prober.CachedReportedMethod {
		return "reported"
	}
	return "inferred"
}

// observePrime records a successful priming turn.
func (w conversationMetrics) observePrime(r *prober.Result) {
	if d := r.TTFT(); d > 0 {
		w.primeTTFT.WithLabelValues(r.Target, r.Model, r.Scenario, apiOf(r)).Set(d.Seconds())
	}
}

// observeFollowUp records a successful follow-up turn.
func (w conversationMetrics) observeFollowUp(r *prober.Result) {
	lv := []string{r.Target, r.Model, r.Scenario, apiOf(r)}
	misses := w.misses.WithLabelValues(lv...)     // created with the first follow-up, so rate() sees every miss after it
	for _, c := range prober.ConversationCaches { // all four from the first follow-up on, so rate() sees every class
		w.turns.WithLabelValues(r.Target, r.Model, r.Scenario, apiOf(r), string(c))
	}
	w.turns.WithLabelValues(r.Target, r.Model, r.Scenario, apiOf(r), string(r.ConversationCache())).Inc()
	for _, s := range recomputedSources { // both from the first follow-up on, as the classes
		w.history.WithLabelValues(r.Target, r.Model, r.Scenario, apiOf(r), s)
		w.recomputed.WithLabelValues(r.Target, r.Model, r.Scenario, apiOf(r), s)
	}
	if history, recomputed, m := r.Recomputed(); m != prober.CachedNoMethod {
		s := recomputedSource(m)
		w.history.WithLabelValues(r.Target, r.Model, r.Scenario, apiOf(r), s).Add(history)
		w.recomputed.WithLabelValues(r.Target, r.Model, r.Scenario, apiOf(r), s).Add(recomputed)
	}
	if share, ok := r.SeenCachedShare(); ok {
		w.cachedRatio.WithLabelValues(lv...).Observe(share)
	}
	if share, ok := r.CachedShare(); ok {
		w.hitRatio.WithLabelValues(lv...).Set(share)
		if r.CachedTokens == 0 {
			misses.Inc()
		}
	}
	if saved, ok := r.TTFTSaved(); ok {
		w.saved.WithLabelValues(lv...).Set(saved.Seconds())
		w.savedRatio.WithLabelValues(lv...).Set(saved.Seconds() / r.PrimeTTFT.Seconds())
	}
}

// observeConversation records the waiting time of a whole conversation: r
// is the last turn a conversation probe returned, r.Earlier the turns before.
// Only a conversation whose every turn succeeded is timed.
func (w conversationMetrics) observeConversation(r *prober.Result) {
	if !r.FollowUp() || r.Kind != prober.KindSuccess {
		return
	}
	total := r.E2E()
	for i := range r.Earlier {
		if r.Earlier[i].Kind != prober.KindSuccess {
			return
		}
		total += r.Earlier[i].E2E()
	}
	w.conversationSeconds.WithLabelValues(r.Target, r.Model, r.Scenario, apiOf(r)).Observe(total.Seconds())
}

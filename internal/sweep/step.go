package sweep

// This file holds one step: its Mode (closed loop or burst), its name
// (StepInfo), its result (StepResult) and how that is summarised from the
// requests the step sent.

import (
	"time"

	"github.com/slaprobe/slaprobe/prober"
)

// Samples are a step's per-request values over its successful requests,
// in base units: Decode and ITL of the requests that decoded more than one
// chunk, Prefill of those not served from the prefix cache.
type Samples struct {
	TTFT, ITL, Decode, E2E, Prefill []float64
	// Good holds one value per sampled request, failed ones included, in
	// the order they ended: 1 when it was good (prober.Thresholds.MetBy),
	// else 0. In RoundMedians, each round's share of good requests.
	Good []float64
	// CachedShare holds, in a conversation step, each follow-up's share of
	// what the engine had already seen of its conversation that it served
	// from its cache (prober.Result.SeenCachedShare), for the follow-ups
	// whose server reported cached tokens; PrimingTTFT the TTFT of each
	// conversation's priming (cold) turn that succeeded. In RoundMedians,
	// each round's mean cached share (no priming TTFT).
	CachedShare, PrimingTTFT []float64
	// RoundMedians holds, for a burst step of two or more rounds
	// (BurstRepeat), each round's median of every metric, one value per
	// round that measured it. A burst's requests share one queue, so they
	// are not independent samples; its rounds are, and a comparison
	// resamples those. Nil otherwise.
	RoundMedians *Samples
}

// StepResult is what one (scenario, mode, N) step measured.
type StepResult struct {
	Scenario    string    `json:"scenario"`
	Mode        Mode      `json:"mode"`
	Concurrency int       `json:"concurrency"`
	Started     time.Time `json:"started"`
	Finished    time.Time `json:"finished"`
	// WindowSeconds is the span system throughput is measured over: the
	// steady window (closed loop) or release to last token (burst).
	WindowSeconds float64 `json:"window_seconds"`

	Requests     int                   `json:"requests"` // measured requests sent
	Succeeded    int                   `json:"succeeded"`
	Errors       map[prober.Reason]int `json:"errors,omitempty"`
	SuccessRatio float64               `json:"success_ratio"`
	CacheHits    int                   `json:"cache_hits,omitempty"` // successes served partly from the prefix cache
	// ShortOutputs counts the requests the server ended before the tokens
	// asked for (it ignores ignore_eos). They count as succeeded and in the
	// distributions below as Result.Timed and DecodeMeasured allow.
	ShortOutputs int `json:"short_outputs,omitempty"`
	// Good counts the requests that succeeded and met every threshold of
	// the scenario at once (prober.Thresholds.MetBy, as
	// slaprobe_probes_good_total counts probes); GoodShare is Good /
	// Requests, and GoodPerSecond is Good per second of WindowSeconds
	// (goodput, as vLLM's bench serve --goodput reports it): the good
	// requests started in the steady window per second of it (closed
	// loop), or per second from release to last token (burst).
	Good          int     `json:"good"`
	GoodShare     float64 `json:"good_share"`
	GoodPerSecond float64 `json:"good_requests_per_second"`

	// Per-request distributions over successful requests.
	Decode  Summary `json:"decode_tokens_per_second"`
	ITL     Summary `json:"itl_seconds"`
	TTFT    Summary `json:"ttft_seconds"`
	E2E     Summary `json:"e2e_seconds"`
	Prefill Summary `json:"prefill_tokens_per_second"` // prompt tokens / TTFT; cache hits left out
	// Samples are the per-request values the summaries above describe, in
	// the order the requests were sent: what a report keeps so that two
	// runs can be compared with a confidence interval.
	Samples Samples `json:"-"`
	// PrefillExclQueue is mean prompt tokens / (mean TTFT − mean queue
	// wait): the per-user prefill speed with the engine's queueing taken
	// out, as the reports define it. 0 when queue wait is unknown.
	PrefillExclQueue float64 `json:"prefill_excl_queue_tokens_per_second,omitempty"`
	promptTokens     float64 // mean prompt tokens of successes, for PrefillExclQueue

	OutputTokens     float64 `json:"output_tokens"` // output tokens inside the window
	SystemThroughput float64 `json:"system_tokens_per_second"`
	TokensPerHour    float64 `json:"tokens_per_hour"`
	// ScalingEfficiency is SystemThroughput / (N=1 throughput × N) of the
	// same scenario and mode; 0 when the ladder had no N=1 step.
	ScalingEfficiency float64 `json:"scaling_efficiency,omitempty"`

	// Drain says how the step started: on a drained engine, or busy.
	Drain *DrainResult `json:"drain,omitempty"`

	// NotMeasured says why the step has no figures, when no measured
	// request ended in it (a closed-loop window shorter than a request).
	// Its distributions are zero because nothing was measured: capacity,
	// scaling efficiency and headlines leave it out, reports show "–", and
	// a comparison calls it not measured. Empty when Measured.
	NotMeasured string `json:"not_measured,omitempty"`

	// QueueWaitSeconds is the mean engine queue time over the step, from
	// the change in vllm:request_queue_time_seconds; nil when the engine
	// does not expose it.
	QueueWaitSeconds *float64      `json:"queue_wait_seconds,omitempty"`
	Power            *PowerReading `json:"power,omitempty"`

	MaxInFlight int `json:"max_in_flight"` // client side, highest seen
	// StartSpreadSeconds is the time between the first and the last
	// request start (burst: how "at once" the burst really was); in a
	// conversation step, between the conversations' first turns.
	StartSpreadSeconds float64 `json:"start_spread_seconds"`

	// Conversation is set on a step of a conversation scenario, whose unit
	// of load is a conversation: N conversations in flight (closed loop: a
	// new one starts when one ends), each running its turns. Such a step's
	// requests and distributions above are its follow-up turns (the
	// measurement), and its priming turns that failed (so that a failure is
	// never hidden); the priming turns that succeeded are kept apart here.
	Conversation *ConversationStep `json:"conversation,omitempty"`
}

// ConversationStep is what a step of a conversation scenario measured
// beside its follow-ups: the conversations, their priming turns, and how
// well the follow-ups found their conversation in the prefix cache.
// report.json keeps it as is (report.Step.Conversation).
type ConversationStep struct {
	// Conversations counts the conversations measured (started in the
	// steady window, or sent by the burst); FollowUps their follow-up
	// turns sent.
	Conversations int `json:"conversations"`
	FollowUps     int `json:"follow_ups"`
	// Hit, Partial, Miss and Unknown count the follow-ups by
	// prober.Result.ConversationCache: hit when at least prober.HitShare
	// of what the engine had seen of the conversation came from its cache,
	// miss under prober.MissShare, unknown when the server reported no
	// cached tokens (or the turn failed).
	Hit     int `json:"hit"`
	Partial int `json:"partial"`
	Miss    int `json:"miss"`
	Unknown int `json:"unknown"`
	// HitShare is Hit / (Hit + Partial + Miss): the share of the
	// follow-ups whose cache is known that hit; nil when none is known.
	HitShare *float64 `json:"hit_share,omitempty"`
	// CachedShare is the mean cached share of the follow-ups that
	// reported one (Samples.CachedShare), 0..1.
	CachedShare float64 `json:"cached_share"`
	// PrimingTTFT is the TTFT of the priming (cold) turns that succeeded.
	PrimingTTFT Dist `json:"priming_ttft_seconds"`
	// Seconds describes the conversations' whole length, first request
	// to last token of the last turn sent.
	Seconds Dist `json:"conversation_seconds"`
	// longest is the longest of Seconds, for the advice of NotMeasured.
	longest float64
}

// StartedBusy reports whether the step started on an engine that had not
// drained; such a step measured leftovers or other traffic.
func (s *StepResult) StartedBusy() bool { return s.Drain != nil && s.Drain.Busy }

// Measured reports whether at least one measured request ended in the step,
// so that its figures exist (see NotMeasured).
func (s *StepResult) Measured() bool { return s.Requests > 0 }

// turnsOf returns the requests one Run sent: r alone for a cold probe, the
// turns of a conversation (prober.Result.Earlier, then r) in order.
func turnsOf(r *prober.Result) []prober.Result {
	if len(r.Earlier) == 0 {
		return []prober.Result{*r}
	}
	out := make([]prober.Result, 0, len(r.Earlier)+1)
	out = append(out, r.Earlier...)
	last := *r
	last.Earlier = nil
	return append(out, last)
}

// firstStart is when the first request of one Run's result started.
func firstStart(r *prober.Result) time.Time {
	if len(r.Earlier) > 0 {
		return r.Earlier[0].Start
	}
	return r.Start
}

// conversationTurns splits the results of a conversation step (one per
// conversation) into the requests the step's figures describe, its
// follow-ups and its failed priming turns, in the order the conversations
// ended (with ends, a burst's round ends remapped onto them), and fills cs
// from the rest.
func conversationTurns(rs []prober.Result, ends []int) (turns []prober.Result, turnEnds []int, cs *ConversationStep) {
	cs = &ConversationStep{Conversations: len(rs)}
	var seconds []float64
	e := 0
	for i := range rs {
		all := turnsOf(&rs[i])
		if last := &all[len(all)-1]; !last.LastToken.IsZero() && !all[0].Start.IsZero() {
			seconds = append(seconds, last.LastToken.Sub(all[0].Start).Seconds())
		}
		for _, t := range all {
			switch {
			case t.FollowUp():
				turns = append(turns, t)
				cs.FollowUps++
				switch t.ConversationCache() {
				case prober.CacheHitTurn:
					cs.Hit++
				case prober.CachePartialTurn:
					cs.Partial++
				case prober.CacheMissTurn:
					cs.Miss++
				default:
					cs.Unknown++
				}
			case t.Kind != prober.KindSuccess && !t.Timed():
				turns = append(turns, t) // a failed priming turn: its conversation had no follow-up
			}
		}
		if e < len(ends) && i+1 == ends[e] {
			turnEnds = append(turnEnds, len(turns))
			e++
		}
	}
	if known := cs.Hit + cs.Partial + cs.Miss; known > 0 {
		share := float64(cs.Hit) / float64(known)
		cs.HitShare = &share
	}
	sec := Summarize(seconds)
	cs.Seconds, cs.longest = sec.Dist(), sec.Max
	return turns, turnEnds, cs
}

// summarizeStep turns raw results into a StepResult; th judges which
// requests are good. A conversation step (conversation set) is summarised
// over its follow-up turns, its priming turns kept apart
// (StepResult.Conversation).
func summarizeStep(info StepInfo, th prober.Thresholds, conversation bool, out loadOutcome) StepResult {
	var first, last time.Time
	for i := range out.Sampled {
		if s := firstStart(&out.Sampled[i]); !s.IsZero() {
			if first.IsZero() || s.Before(first) {
				first = s
			}
			if s.After(last) {
				last = s
			}
		}
	}
	var cs *ConversationStep
	conversations := out.Sampled
	if conversation {
		out.Sampled, out.RoundEnds, cs = conversationTurns(out.Sampled, out.RoundEnds)
	}
	st := StepResult{
		Scenario: info.Scenario, Mode: info.Mode, Concurrency: info.Concurrency,
		Started: out.Started, Finished: out.Finished,
		Requests: len(out.Sampled), MaxInFlight: out.MaxInFlight, OutputTokens: out.Tokens,
		Conversation: cs,
	}
	var prompt float64
	for i := range out.Sampled {
		r := &out.Sampled[i]
		if r.Kind != prober.KindSuccess && !r.Timed() {
			if st.Errors == nil {
				st.Errors = map[prober.Reason]int{}
			}
			reason := r.Reason
			if reason == prober.ReasonNone {
				reason = prober.Reason(r.Kind)
			}
			st.Errors[reason]++
			continue
		}
		st.Succeeded++
		if r.Short() {
			st.ShortOutputs++
		}
		prompt += float64(r.PromptTokens)
		if r.CacheHit() {
			st.CacheHits++
		}
	}
	if st.Requests > 0 {
		st.SuccessRatio = float64(st.Succeeded) / float64(st.Requests)
	}
	if st.Succeeded > 0 {
		st.promptTokens = prompt / float64(st.Succeeded)
	}
	st.StartSpreadSeconds = last.Sub(first).Seconds()
	sv := sampleValues(out.Sampled, th)
	st.Decode, st.ITL, st.TTFT, st.E2E, st.Prefill = Summarize(sv.Decode), Summarize(sv.ITL), Summarize(sv.TTFT), Summarize(sv.E2E), Summarize(sv.Prefill)
	st.Samples = sv
	for _, g := range sv.Good {
		st.Good += int(g)
	}
	if st.Requests > 0 {
		st.GoodShare = float64(st.Good) / float64(st.Requests)
	}
	if cs != nil {
		for i := range conversations {
			for _, t := range turnsOf(&conversations[i]) {
				if t.Turn == 1 && t.Kind == prober.KindSuccess {
					st.Samples.PrimingTTFT = append(st.Samples.PrimingTTFT, t.TTFT().Seconds())
				}
			}
		}
		st.Samples.CachedShare = cachedShares(out.Sampled)
		cs.PrimingTTFT, cs.CachedShare = Summarize(st.Samples.PrimingTTFT).Dist(), Summarize(st.Samples.CachedShare).Mean
	}
	if len(out.RoundEnds) > 1 {
		st.Samples.RoundMedians = roundMedians(out.Sampled, out.RoundEnds, th)
	}
	if w := out.SpanEnd.Sub(out.SpanStart).Seconds(); w > 0 {
		st.WindowSeconds = w
		st.SystemThroughput = out.Tokens / w
		st.TokensPerHour = st.SystemThroughput * 3600
		st.GoodPerSecond = float64(st.Good) / w
	}
	return st
}

// sampleValues returns the per-request values of the successful (or timed)
// results among rs, in order: TTFT and E2E of each, ITL and decode speed of
// those that decoded enough tokens, prefill speed of those not served from
// the prefix cache; and whether each of rs was good by th.
func sampleValues(rs []prober.Result, th prober.Thresholds) Samples {
	var s Samples
	for i := range rs {
		r := &rs[i]
		good := 0.0
		if th.MetBy(r) {
			good = 1
		}
		s.Good = append(s.Good, good)
		if r.Kind != prober.KindSuccess && !r.Timed() {
			continue
		}
		s.TTFT = append(s.TTFT, r.TTFT().Seconds())
		if d, ok := r.E2EAtRequested(); ok {
			s.E2E = append(s.E2E, d.Seconds())
		}
		if r.DecodeMeasured() {
			s.Decode = append(s.Decode, r.DecodeSpeed())
			s.ITL = append(s.ITL, r.ITL().Seconds())
		}
		if !r.CacheHit() {
			if v := r.PrefillSpeed(); v > 0 {
				s.Prefill = append(s.Prefill, v)
			}
		}
	}
	return s
}

// roundMedians returns, for the results of a burst step of several rounds
// (ends: the end index of each round in rs), each round's median of every
// metric; a round that measured none of a metric adds no value for it.
func roundMedians(rs []prober.Result, ends []int, th prober.Thresholds) *Samples {
	rm := &Samples{}
	add := func(dst *[]float64, v []float64) {
		if len(v) > 0 {
			*dst = append(*dst, Summarize(v).P50)
		}
	}
	start := 0
	for _, end := range ends {
		r := sampleValues(rs[start:end], th)
		cached := cachedShares(rs[start:end])
		start = end
		add(&rm.TTFT, r.TTFT)
		add(&rm.ITL, r.ITL)
		add(&rm.Decode, r.Decode)
		add(&rm.E2E, r.E2E)
		add(&rm.Prefill, r.Prefill)
		if len(r.Good) > 0 {
			rm.Good = append(rm.Good, Summarize(r.Good).Mean)
		}
		if len(cached) > 0 {
			rm.CachedShare = append(rm.CachedShare, Summarize(cached).Mean)
		}
	}
	return rm
}

// StepInfo names one step of a sweep.
type StepInfo struct {
	Scenario    string
	Mode        Mode
	Concurrency int
}

// Mode is how a sweep step loads the target.
type Mode string

const (
	// ModeClosedLoop holds exactly N requests in flight ("when am I the fastest?").
	ModeClosedLoop Mode = "closed_loop"
	// ModeBurst sends N requests at once ("when to scale up").
	ModeBurst Mode = "burst"
)

// cachedShares returns the cached share of each follow-up of rs whose
// server reported cached tokens.
func cachedShares(rs []prober.Result) []float64 {
	var out []float64
	for i := range rs {
		if share, ok := rs[i].SeenCachedShare(); ok {
			out = append(out, share)
		}
	}
	return out
}

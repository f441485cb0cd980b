package vllmsim

import (
	"encoding/json"
	"time"
)

// PerRequestMetrics is vLLM's per-request `metrics` object (--enable-per-request-metrics), as the
// simulator sends it with Config.EnablePerRequestMetrics. Every field is nullable:
//
//   - QueueTimeMs: waiting in the scheduler (Trace.Submitted → Trace.Admitted).
//   - TimeToFirstTokenMs: from being scheduled to the first token (Trace.Admitted →
//     Trace.EngineFirstToken), so the queue is not in it, unlike a client's TTFT.
//   - GenerationTimeMs: first to last token (Trace.EngineFirstToken → Trace.EngineLastToken).
//   - MeanITLMs: GenerationTimeMs / (completion tokens − 1); null below two tokens.
//   - TokensPerSecond: completion tokens / (Trace.EngineLastToken − Trace.Admitted): from being
//     scheduled, so prefill is in it, as vLLM computes it; null when that is zero.
//
// A part the request never reached (an aborted request's last token) is null.
type PerRequestMetrics struct {
	QueueTimeMs        *float64 `json:"queue_time_ms"`
	TimeToFirstTokenMs *float64 `json:"time_to_first_token_ms"`
	GenerationTimeMs   *float64 `json:"generation_time_ms"`
	MeanITLMs          *float64 `json:"mean_itl_ms"`
	TokensPerSecond    *float64 `json:"tokens_per_second"`
	// SpeculativeDecoding is present when the request drafted tokens (Config.TokensPerStep > 1), as
	// vLLM sends it with --per-request-spec-decode-metrics summary (the simulator has no such flag:
	// it always does). omitempty: vLLM leaves it out when off.
	SpeculativeDecoding *SpecDecodeMetrics `json:"speculative_decoding,omitempty"`
}

// SpecDecodeMetrics is vLLM's metrics.speculative_decoding at the summary level, with vLLM's field
// names (vLLM PR #48915; docs/features/per_request_metrics.md and
// docs/features/speculative_decoding/acceptance_metrics.md, vLLM commit 0377ba9ad8eb; docs/engines.md):
//
//   - MeanAcceptanceLength: tokens per verification step with the bonus token,
//     1 + num_accepted_draft_tokens / num_spec_steps.
//   - DraftAcceptanceRate: num_accepted_draft_tokens / num_draft_tokens.
//   - AcceptanceHistogram: dense; index j counts the steps that accepted exactly j draft tokens.
//   - NumSpecSteps, NumAcceptedDraftTokens (bonus tokens excluded), NumDraftTokens, and
//     NumSpecTokens, the configured draft length k.
//
// The simulator drafts k = TokensPerStep − 1 tokens a step and accepts them all but where the
// request's last step needs fewer, so every step but the last falls in bucket k.
type SpecDecodeMetrics struct {
	MeanAcceptanceLength   float64 `json:"mean_acceptance_length"`
	DraftAcceptanceRate    float64 `json:"draft_acceptance_rate"`
	AcceptanceHistogram    []int   `json:"acceptance_histogram"`
	NumSpecSteps           int     `json:"num_spec_steps"`
	NumAcceptedDraftTokens int     `json:"num_accepted_draft_tokens"`
	NumDraftTokens         int     `json:"num_draft_tokens"`
	NumSpecTokens          int     `json:"num_spec_tokens"`
}

// specDecodeMetrics is the request's speculative decoding from its trace; nil when it drafted nothing.
func specDecodeMetrics(t Trace) *SpecDecodeMetrics {
	if t.SpecDraftTokens <= 0 || t.SpecSteps <= 0 || t.SpecDraftTokens%t.SpecSteps != 0 {
		return nil
	}
	k := t.SpecDraftTokens / t.SpecSteps
	m := &SpecDecodeMetrics{
		MeanAcceptanceLength:   1 + float64(t.SpecAcceptedTokens)/float64(t.SpecSteps),
		DraftAcceptanceRate:    float64(t.SpecAcceptedTokens) / float64(t.SpecDraftTokens),
		AcceptanceHistogram:    make([]int, k+1),
		NumSpecSteps:           t.SpecSteps,
		NumAcceptedDraftTokens: t.SpecAcceptedTokens,
		NumDraftTokens:         t.SpecDraftTokens,
		NumSpecTokens:          k,
	}
	last := t.SpecAcceptedTokens - (t.SpecSteps-1)*k
	if last < 0 || last > k {
		return nil // not the simulator's pattern: say nothing rather than a wrong histogram
	}
	m.AcceptanceHistogram[k] = t.SpecSteps - 1
	m.AcceptanceHistogram[last]++
	return m
}

// sendsMetrics reports whether the session's response carries the per-request metrics object.
func (s *session) sendsMetrics() bool {
	c := s.e.cfg
	return c.EnablePerRequestMetrics && (!c.RequireIncludeMetrics || s.j.includeMetrics)
}

func msBetween(a, b time.Time) *float64 {
	if a.IsZero() || b.IsZero() || b.Before(a) {
		return nil
	}
	v := float64(b.Sub(a)) / float64(time.Millisecond)
	return &v
}

// perRequestMetrics computes the object from a request's trace and its completion tokens.
func perRequestMetrics(t Trace, completion int) PerRequestMetrics {
	m := PerRequestMetrics{
		QueueTimeMs:        msBetween(t.Submitted, t.Admitted),
		TimeToFirstTokenMs: msBetween(t.Admitted, t.EngineFirstToken),
		GenerationTimeMs:   msBetween(t.EngineFirstToken, t.EngineLastToken),
	}
	if g := m.GenerationTimeMs; g != nil {
		if completion >= 2 {
			v := *g / float64(completion-1)
			m.MeanITLMs = &v
		}
	}
	if d := msBetween(t.Admitted, t.EngineLastToken); d != nil && *d > 0 {
		v := float64(completion) / (*d / 1000)
		m.TokensPerSecond = &v
	}
	m.SpeculativeDecoding = specDecodeMetrics(t)
	return m
}

// appendPerRequestMetrics appends `,"metrics":{…}` for the session's request.
func (s *session) appendPerRequestMetrics(b []byte, completion int) []byte {
	m, _ := json.Marshal(perRequestMetrics(s.r.trace.snapshot(), completion))
	b = append(b, `,"metrics":`...)
	return append(b, m...)
}

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
	// SpeculativeDecoding is present when the request drafted tokens (Config.TokensPerStep > 1).
	// vLLM's own name and fields for it are not verified: slaprobe reads it leniently.
	SpeculativeDecoding *SpecDecodeMetrics `json:"speculative_decoding,omitempty"`
}

// SpecDecodeMetrics is a request's speculative decoding: tokens drafted and accepted.
type SpecDecodeMetrics struct {
	NumDraftTokens    int `json:"num_draft_tokens"`
	NumAcceptedTokens int `json:"num_accepted_tokens"`
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
	if t.SpecDraftTokens > 0 {
		m.SpeculativeDecoding = &SpecDecodeMetrics{NumDraftTokens: t.SpecDraftTokens, NumAcceptedTokens: t.SpecAcceptedTokens}
	}
	return m
}

// appendPerRequestMetrics appends `,"metrics":{…}` for the session's request.
func (s *session) appendPerRequestMetrics(b []byte, completion int) []byte {
	m, _ := json.Marshal(perRequestMetrics(s.r.trace.snapshot(), completion))
	b = append(b, `,"metrics":`...)
	return append(b, m...)
}

package prober

// TTFTValid reports whether r's TTFT and E2E are valid measurements of the
// server: r is Timed, and its prompt was not served from the prefix cache,
// unless r is a warm follow-up, which is meant to hit it.
func (r *Result) TTFTValid() bool {
	return r.Timed() && (r.FollowUp() || !r.CacheHit())
}

// MetBy reports whether r is a good probe: it got an answer (a success, or
// a short answer the server ended early) and met every threshold t sets,
// at once. Each threshold is judged on the figure of r that the probe
// histograms record and the per-metric SLO rules count:
//
//   - TTFT: r.TTFT() <= t.TTFT;
//   - ITL: the probe's mean inter-token gap, r.ITL() (what
//     slaprobe_itl_seconds records), <= t.ITL;
//   - E2E: r.E2EAtRequested() (the E2E at the asked length) <= t.E2E;
//   - decode speed: r.DecodeSpeed() >= t.MinDecode.
//
// A figure that is not a measurement cannot show that its threshold was
// met, so r is then not good: no output token (every threshold), a cold
// prompt the prefix cache served (TTFT and E2E, see TTFTValid), a short
// answer under MinDecodeTokens tokens (ITL and decode speed, see
// DecodeMeasured). With no threshold set, a probe is good when it got an
// answer with at least one token.
func (t Thresholds) MetBy(r *Result) bool {
	if !r.Timed() {
		return false
	}
	if t.TTFT > 0 || t.E2E > 0 {
		if !r.TTFTValid() {
			return false
		}
		if t.TTFT > 0 && r.TTFT() > t.TTFT {
			return false
		}
		if t.E2E > 0 {
			if d, ok := r.E2EAtRequested(); !ok || d > t.E2E {
				return false
			}
		}
	}
	if t.ITL > 0 || t.MinDecode > 0 {
		if !r.DecodeMeasured() {
			return false
		}
		if t.ITL > 0 && r.ITL() > t.ITL {
			return false
		}
		if t.MinDecode > 0 && r.DecodeSpeed() < t.MinDecode {
			return false
		}
	}
	return true
}

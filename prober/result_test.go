package prober

import (
	"testing"
	"time"
)

// Which timings of a result count, and E2E judged at the asked length.
func TestResultTimings(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	res := func(kind Kind, out, asked int, ttft, decode time.Duration) Result {
		r := Result{Kind: kind, Start: t0, OutputTokens: out, RequestedTokens: asked, FirstChunkTokens: 1}
		if out > 0 {
			r.FirstToken = t0.Add(ttft)
			r.LastToken = r.FirstToken.Add(decode)
		}
		return r
	}
	ms := time.Millisecond
	tests := []struct {
		name          string
		r             Result
		timed, decode bool
		e2e           time.Duration // 0: not known
		itl           time.Duration
		decodeTokPerS float64
	}{
		{name: "full answer", r: res(KindSuccess, 256, 256, 200*ms, 255*10*ms),
			timed: true, decode: true, e2e: 200*ms + 2550*ms, itl: 10 * ms, decodeTokPerS: 100},
		{name: "short answer of enough tokens: E2E at the asked length, at its own pace",
			r:     res(KindShortOutput, 101, 256, 200*ms, 100*10*ms),
			timed: true, decode: true, e2e: 200*ms + 255*10*ms, itl: 10 * ms, decodeTokPerS: 100},
		{name: "short answer under MinDecodeTokens: TTFT only",
			r:     res(KindShortOutput, MinDecodeTokens-1, 256, 200*ms, 14*10*ms),
			timed: true},
		{name: "one-token answer", r: res(KindShortOutput, 1, 256, 200*ms, 0), timed: true},
		{name: "full answer of one token has no decode", r: res(KindSuccess, 1, 1, 200*ms, 0), timed: true, e2e: 200 * ms},
		{name: "empty answer", r: res(KindShortOutput, 0, 256, 0, 0)},
		{name: "failed probe with a first token", r: func() Result {
			r := res(KindError, 40, 256, 200*ms, 39*10*ms)
			r.Reason = ReasonStreamCut
			return r
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			if got := r.Timed(); got != tc.timed {
				t.Errorf("Timed = %v, want %v", got, tc.timed)
			}
			if got := r.DecodeMeasured(); got != tc.decode {
				t.Errorf("DecodeMeasured = %v, want %v", got, tc.decode)
			}
			e2e, ok := r.E2EAtRequested()
			if ok != (tc.e2e > 0) || (ok && e2e != tc.e2e) {
				t.Errorf("E2EAtRequested = %v, %v; want %v", e2e, ok, tc.e2e)
			}
			if tc.decode {
				if got := r.ITL(); got != tc.itl {
					t.Errorf("ITL = %v, want %v", got, tc.itl)
				}
				if got := r.DecodeSpeed(); got < tc.decodeTokPerS-1e-9 || got > tc.decodeTokPerS+1e-9 {
					t.Errorf("DecodeSpeed = %v, want %v", got, tc.decodeTokPerS)
				}
			}
		})
	}
}

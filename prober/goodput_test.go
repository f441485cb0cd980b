package prober

import (
	"testing"
	"time"
)

// Each threshold passes at its value and fails 10 % beyond it, on the
// figure the probe histograms record; a figure that is not a measurement
// never makes a probe good.
func TestThresholdsMetBy(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	ms := time.Millisecond
	// A full answer of 101 tokens: TTFT 1 s, 100 gaps of 50 ms (ITL 50 ms,
	// decode 20 tokens/s), E2E 6 s.
	probe := func(mut func(r *Result)) *Result {
		r := &Result{Kind: KindSuccess, Start: t0, FirstToken: t0.Add(time.Second),
			LastToken: t0.Add(time.Second + 100*50*ms), OutputTokens: 101, RequestedTokens: 101, FirstChunkTokens: 1}
		if mut != nil {
			mut(r)
		}
		return r
	}
	all := Thresholds{TTFT: time.Second, ITL: 50 * ms, E2E: 6 * time.Second, MinDecode: 20}
	tests := []struct {
		name string
		th   Thresholds
		r    *Result
		want bool
	}{
		{"every threshold met at its value", all, probe(nil), true},
		{"no threshold: an answer is good", Thresholds{}, probe(nil), true},
		{"TTFT 10 % over", all, probe(func(r *Result) {
			r.FirstToken, r.LastToken = r.FirstToken.Add(100*ms), r.LastToken.Add(100*ms)
		}), false},
		{"TTFT 10 % over, only E2E and decode set", Thresholds{E2E: 7 * time.Second, MinDecode: 20}, probe(func(r *Result) {
			r.FirstToken, r.LastToken = r.FirstToken.Add(100*ms), r.LastToken.Add(100*ms)
		}), true},
		{"mean ITL 10 % over (55 ms): ITL and decode fail", Thresholds{ITL: 50 * ms}, probe(func(r *Result) {
			r.LastToken = r.FirstToken.Add(100 * 55 * ms)
		}), false},
		{"decode 10 % under (18.2 tokens/s)", Thresholds{MinDecode: 20}, probe(func(r *Result) {
			r.LastToken = r.FirstToken.Add(100 * 55 * ms)
		}), false},
		{"E2E 10 % over", Thresholds{E2E: 6 * time.Second}, probe(func(r *Result) {
			r.LastToken = r.LastToken.Add(600 * ms)
		}), false},
		{"E2E judged at the asked length on a short answer", Thresholds{E2E: 6 * time.Second}, probe(func(r *Result) {
			r.Kind, r.RequestedTokens = KindShortOutput, 121 // 20 more gaps of 50 ms: 7 s
		}), false},
		{"short answer within every threshold", all, probe(func(r *Result) { r.Kind = KindShortOutput }), true},
		{"failed probe", all, probe(func(r *Result) { r.Kind = KindError }), false},
		{"failed probe, no threshold", Thresholds{}, probe(func(r *Result) { r.Kind = KindError }), false},
		{"empty answer", Thresholds{}, probe(func(r *Result) {
			r.Kind, r.OutputTokens, r.FirstToken, r.LastToken = KindShortOutput, 0, time.Time{}, time.Time{}
		}), false},
		{"short answer too short to measure ITL", Thresholds{ITL: 50 * ms}, probe(func(r *Result) {
			r.Kind, r.OutputTokens, r.LastToken = KindShortOutput, MinDecodeTokens-1, r.FirstToken.Add(time.Duration(MinDecodeTokens-2)*50*ms)
		}), false},
		{"cold prompt served from the cache: TTFT not a measurement", Thresholds{TTFT: time.Second}, probe(func(r *Result) {
			r.CachedTokens = 512
		}), false},
		{"cold prompt served from the cache, judged on decode only", Thresholds{MinDecode: 20}, probe(func(r *Result) {
			r.CachedTokens = 512
		}), true},
		{"warm follow-up hitting the cache is judged on its TTFT", all, probe(func(r *Result) {
			r.CachedTokens, r.Turn = 512, 2
		}), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.th.MetBy(tc.r); got != tc.want {
				t.Errorf("MetBy = %v, want %v (TTFT %v, ITL %v, decode %.2f, E2E %v)",
					got, tc.want, tc.r.TTFT(), tc.r.ITL(), tc.r.DecodeSpeed(), tc.r.E2E())
			}
		})
	}
}

package vllmsim

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/test/testproc"
)

func TestFaultHeader(t *testing.T) {
	testproc.QuietLight(t) // times stalls of 150 ms against gaps of a few
	cfg := fastConfig()
	ts := start(t, cfg)
	tests := []struct {
		header string
		check  func(t *testing.T, res streamResult, tr Trace)
	}{
		{"error_status=503", func(t *testing.T, res streamResult, tr Trace) {
			var e struct {
				Error struct {
					Type string `json:"type"`
					Code int    `json:"code"`
				} `json:"error"`
			}
			if res.status != 503 || json.Unmarshal([]byte(res.body), &e) != nil || e.Error.Code != 503 || e.Error.Type != "ServiceUnavailableError" {
				t.Errorf("status %d body %s", res.status, res.body)
			}
			if tr.Status != 503 || tr.FinishReason != FinishError {
				t.Errorf("trace %+v", tr)
			}
		}},
		{"error_event=3", func(t *testing.T, res streamResult, tr Trace) {
			n := len(res.events)
			if res.status != 200 || !res.done || n < 2 || res.events[n-2].chunk == nil || res.events[n-2].chunk.Error == nil {
				t.Fatalf("want an error event then [DONE], got %v", res.events)
			}
			if tr.CompletionTokens != 3 || tr.FinishReason != FinishError {
				t.Errorf("trace: %d tokens, finish %q", tr.CompletionTokens, tr.FinishReason)
			}
		}},
		{"cut=2", func(t *testing.T, res streamResult, tr Trace) {
			if res.done || res.readErr == nil {
				t.Errorf("cut stream: done=%v readErr=%v", res.done, res.readErr)
			}
			// Tokens, not chunks: a handler that lagged writes two tokens in one chunk.
			got := CountTokens(res.text("text", "reasoning_content", "reasoning", "content"))
			if got != 2 || tr.CompletionTokens != 2 || tr.FinishReason != FinishError || tr.Done.IsZero() {
				t.Errorf("cut after %d streamed tokens; trace %d tokens finish %q", got, tr.CompletionTokens, tr.FinishReason)
			}
		}},
		{"cut=0", func(t *testing.T, res streamResult, tr Trace) {
			if res.done || len(res.outputChunks()) != 0 || tr.CompletionTokens != 0 {
				t.Errorf("cut=0: done=%v, %d output chunks", res.done, len(res.outputChunks()))
			}
		}},
		{"stall=4,150ms", func(t *testing.T, res streamResult, tr Trace) {
			if !res.done || tr.CompletionTokens != 10 {
				t.Fatalf("stalled stream did not complete: %+v", tr)
			}
			// A slow handler may write two tokens in one chunk, so find the chunk that ends
			// with the 4th token: the stall is the gap after it, and only there.
			var gaps []time.Duration
			stallAfter, tokens := -1, 0
			for i, c := range tr.Chunks {
				if tokens += c.Tokens; tokens == 4 {
					stallAfter = i
				}
				if i > 0 {
					gaps = append(gaps, c.At.Sub(tr.Chunks[i-1].At))
				}
			}
			if stallAfter < 0 || stallAfter >= len(gaps) {
				t.Fatalf("no chunk ends with the 4th token: %v", tr.Chunks)
			}
			for i, g := range gaps {
				// The engine stalls 150 ms; the handler's lag at either end moves the writes
				// by a few ms, and other gaps are one ~6 ms step.
				if i == stallAfter && (g < 120*time.Millisecond || g > time.Second) || i != stallAfter && g > 75*time.Millisecond {
					t.Errorf("gaps %v: want a ~150 ms gap after the chunk ending with the 4th token (gap %d) only", gaps, stallAfter)
					break
				}
			}
		}},
		{"stall=0,100ms", func(t *testing.T, res streamResult, tr Trace) {
			// The role chunk goes out at once; the submission waits for the stall.
			if d := tr.Submitted.Sub(tr.Arrived); d < 100*time.Millisecond || !tr.RoleChunkWritten.Before(tr.Submitted) {
				t.Errorf("stall=0: submitted after %v, role chunk after %v", d, tr.RoleChunkWritten.Sub(tr.Arrived))
			}
		}},
		{"omit_usage", func(t *testing.T, res streamResult, tr Trace) {
			if !res.done || res.finalUsage() != nil {
				t.Errorf("omit_usage: done=%v usage %+v", res.done, res.finalUsage())
			}
		}},
		{"malformed=2", func(t *testing.T, res streamResult, tr Trace) {
			bad := 0
			for _, ev := range res.events {
				if ev.chunk == nil && ev.data != "[DONE]" {
					bad++
				}
			}
			if bad != 1 || !res.done || tr.CompletionTokens != 10 {
				t.Errorf("malformed: %d unparsable events, done=%v, tokens %d", bad, res.done, tr.CompletionTokens)
			}
		}},
		{"none", func(t *testing.T, res streamResult, tr Trace) {
			if !res.done || tr.Fault != "" || tr.CompletionTokens != 10 {
				t.Errorf("none: %+v", tr)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			res := ts.post(t, "/v1/chat/completions", chatBody("fault", 10, nil), map[string]string{FaultHeader: tt.header})
			id := res.id()
			if id == "" { // error_status: no stream; the trace is the latest request
				id = "chatcmpl-" + strconv.FormatUint(ts.e.seq.Load(), 10)
			}
			tr, ok := ts.e.Trace(id)
			if !ok {
				t.Fatalf("no trace for %q", id)
			}
			if name, _, _ := strings.Cut(tt.header, "="); name != FaultNone && tr.Fault != name {
				t.Errorf("trace fault %q, want %q", tr.Fault, name)
			}
			tt.check(t, res, tr)
		})
	}
	waitFor(t, "engine idle", func() bool { st := ts.e.Stats(); return st.Running == 0 && st.Waiting == 0 })
	if st := ts.e.Stats(); st.KVCacheTokensUsed != 0 {
		t.Errorf("KV cache not freed after faults: %+v", st)
	}
}

func TestFaultRate(t *testing.T) {
	run := func() []string {
		cfg := fastConfig()
		cfg.Faults = Faults{Rate: 0.5, OmitUsage: true, ErrorStatus: 429}
		ts := start(t, cfg)
		var got []string
		for range 12 {
			res := ts.post(t, "/v1/completions", map[string]any{
				"prompt": "x", "max_tokens": 2, "stream": true, "stream_options": map[string]any{"include_usage": true},
			}, nil)
			switch {
			case res.status == 429:
				got = append(got, "429")
			case res.finalUsage() == nil:
				got = append(got, "no-usage")
			default:
				got = append(got, "ok")
			}
		}
		return got
	}
	a, b := run(), run()
	if strings.Join(a, ",") != strings.Join(b, ",") {
		t.Errorf("random faults not deterministic:\n%v\n%v", a, b)
	}
	counts := map[string]int{}
	for _, s := range a {
		counts[s]++
	}
	if counts["ok"] == 0 || counts["429"] == 0 || counts["no-usage"] == 0 {
		t.Errorf("outcomes %v: want a mix of faults and successes", a)
	}
}

func TestFaultNonStreaming(t *testing.T) {
	ts := start(t, fastConfig())
	body := chatBody("x", 3, map[string]any{"stream": false, "stream_options": nil})
	if res := ts.post(t, "/v1/chat/completions", body, map[string]string{FaultHeader: "error_event"}); res.status != 500 {
		t.Errorf("error_event non-streaming: status %d", res.status)
	}
	if res := ts.post(t, "/v1/chat/completions", body, map[string]string{FaultHeader: "omit_usage"}); strings.Contains(res.body, "usage") {
		t.Errorf("omit_usage non-streaming: %s", res.body)
	}
	if res := ts.post(t, "/v1/chat/completions", body, map[string]string{FaultHeader: "malformed"}); json.Valid([]byte(res.body)) {
		t.Errorf("malformed non-streaming body is valid JSON: %s", res.body)
	}
}

// The alternating faults: of every four requests the first has a slow first token, the third a slow
// stream, the others neither.
func TestFaultAlternate(t *testing.T) {
	testproc.QuietLight(t) // times delays of 300 and 40 ms against steps of about 2 ms
	cfg := fastConfig()
	cfg.Faults.AlternateSlowFirstToken = 300 * time.Millisecond
	cfg.Faults.AlternateSlowToken = 40 * time.Millisecond
	ts := start(t, cfg)
	for i := 1; i <= 8; i++ {
		res := ts.post(t, "/v1/chat/completions", chatBody("alternate", 10, nil), nil)
		tr, ok := ts.e.Trace(res.id())
		if !ok || !res.done || tr.CompletionTokens != 10 {
			t.Fatalf("request %d: done=%v trace %v %+v", i, res.done, ok, tr)
		}
		ttft := tr.FirstTokenWritten.Sub(tr.Arrived)
		gap := tr.LastTokenWritten.Sub(tr.FirstTokenWritten) / 9
		slowFirst, slowStream := ttft >= 300*time.Millisecond, gap >= 40*time.Millisecond
		wantFirst, wantStream := i%4 == 1, i%4 == 3
		if slowFirst != wantFirst || slowStream != wantStream || ttft > time.Second || gap > 100*time.Millisecond {
			t.Errorf("request %d: TTFT %v, mean gap %v; want a slow first token %v (>= 300 ms), a slow stream %v (>= 40 ms)",
				i, ttft, gap, wantFirst, wantStream)
		}
	}

	bad := cfg
	bad.Faults.AlternateSlowToken = 0
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "alternate_slow_first_token and alternate_slow_token") {
		t.Errorf("only the slow first token set: %v, want an error naming both fields", err)
	}
}

func TestFaultHeaderSlowStream(t *testing.T) {
	for _, tc := range []struct {
		header string
		f      Faults
		want   time.Duration
		err    bool
	}{
		{"slow_stream", Faults{}, 50 * time.Millisecond, false},
		{"slow_stream", Faults{AlternateSlowFirstToken: time.Second, AlternateSlowToken: 70 * time.Millisecond}, 70 * time.Millisecond, false},
		{"slow_stream=30ms", Faults{}, 30 * time.Millisecond, false},
		{"slow_stream=0s", Faults{}, 0, true},
		{"slow_stream=fast", Faults{}, 0, true},
	} {
		p, err := parseFaultHeader(tc.header, tc.f)
		if (err != nil) != tc.err || !tc.err && (p.name != FaultSlowStream || p.stallFor != tc.want) {
			t.Errorf("%s: %+v, %v; want a %v delay (error %v)", tc.header, p, err, tc.want, tc.err)
		}
	}
}

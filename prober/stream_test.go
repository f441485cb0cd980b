package prober

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const msec = time.Millisecond

// TestDecoderTiming checks timestamps and token accounting exactly, with a
// fake clock advanced by the scripted network.
func TestDecoderTiming(t *testing.T) {
	tests := []struct {
		name      string
		requested int
		steps     []netStep
		// want
		ttft, ttfc, e2e  time.Duration
		itl              time.Duration
		out, first       int
		chunks           []int32
		continuous       bool
		reasoning        bool
		finish, response string
	}{
		{
			name:      "role chunk early does not start TTFT",
			requested: 4,
			steps:     sseTokenStream(1024, 4, 1, 80*msec, 10*msec),
			ttft:      80 * msec, ttfc: 80 * msec, e2e: 110 * msec, itl: 10 * msec,
			out: 4, first: 1, chunks: []int32{1, 1, 1, 1}, continuous: true, finish: "length", response: "chatcmpl-42",
		},
		{
			name:      "three tokens per chunk",
			requested: 12,
			steps:     sseTokenStream(1024, 12, 3, 100*msec, 30*msec),
			// 4 chunks: decode time 90 msec over 12-3 = 9 intervals.
			ttft: 100 * msec, ttfc: 100 * msec, e2e: 190 * msec, itl: 10 * msec,
			out: 12, first: 3, chunks: []int32{3, 3, 3, 3}, continuous: true, finish: "length", response: "chatcmpl-42",
		},
		{
			name:      "reasoning_content starts TTFT, content starts TTFC",
			requested: 4,
			steps: []netStep{
				{0, sseChatLine(sseRoleDelta, "", sseUsageJSON(10, 0))},
				{50 * msec, sseChatLine(`{"reasoning_content":"hmm"}`, "", sseUsageJSON(10, 1))},
				{10 * msec, sseChatLine(`{"reasoning_content":" ok","content":null}`, "", sseUsageJSON(10, 2))},
				{10 * msec, sseChatLine(sseContent("A"), "", sseUsageJSON(10, 3))},
				{10 * msec, sseChatLine(sseContent("B"), "length", sseUsageJSON(10, 4))},
				{0, sseUsageLine(10, 4)}, {0, sseDoneLine},
			},
			ttft: 50 * msec, ttfc: 70 * msec, e2e: 80 * msec, itl: 10 * msec,
			out: 4, first: 1, chunks: []int32{1, 1, 1, 1}, continuous: true, reasoning: true, finish: "length", response: "chatcmpl-42",
		},
		{
			name:      "reasoning (new name) starts TTFT",
			requested: 3,
			steps: []netStep{
				{5 * msec, sseChatLine(`{"role":"assistant","content":"","reasoning":null}`, "", sseUsageJSON(10, 0))},
				{40 * msec, sseChatLine(`{"reasoning":"let me think"}`, "", sseUsageJSON(10, 2))},
				{20 * msec, sseChatLine(sseContent("Yes"), "length", sseUsageJSON(10, 3))},
				{0, sseUsageLine(10, 3)}, {0, sseDoneLine},
			},
			ttft: 45 * msec, ttfc: 65 * msec, e2e: 65 * msec, itl: 20 * msec,
			out: 3, first: 2, chunks: []int32{2, 1}, continuous: true, reasoning: true, finish: "length", response: "chatcmpl-42",
		},
		{
			name:      "tool_calls delta is output",
			requested: 3,
			steps: []netStep{
				{1 * msec, sseChatLine(sseRoleDelta, "", "")},
				{30 * msec, sseChatLine(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get","arguments":""}}]}`, "", "")},
				{10 * msec, sseChatLine(`{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}`, "", "")},
				{10 * msec, sseChatLine(`{"tool_calls":[{"index":0,"function":{"arguments":" "}}]}`, "length", "")},
				{0, sseUsageLine(10, 3)}, {0, sseDoneLine},
			},
			// No sseContent: TTFC is zero. No continuous usage: one token per interval.
			ttft: 31 * msec, ttfc: 0, e2e: 51 * msec, itl: 10 * msec,
			out: 3, first: 1, chunks: nil, continuous: false, finish: "length", response: "chatcmpl-42",
		},
		{
			name:      "completions text",
			requested: 3,
			steps: []netStep{
				{25 * msec, sseTextLine(" Once", "", sseUsageJSON(7, 1))},
				{5 * msec, sseTextLine(" upon", "", sseUsageJSON(7, 2))},
				{5 * msec, sseTextLine(" a", "length", sseUsageJSON(7, 3))},
				{0, strings.Replace(sseUsageLine(7, 3), "chatcmpl-42", "cmpl-7", 1)}, {0, sseDoneLine},
			},
			ttft: 25 * msec, ttfc: 25 * msec, e2e: 35 * msec, itl: 5 * msec,
			out: 3, first: 1, chunks: []int32{1, 1, 1}, continuous: true, finish: "length", response: "cmpl-7",
		},
		{
			name:      "usage only at end",
			requested: 5,
			steps: []netStep{
				{2 * msec, sseChatLine(sseRoleDelta, "", "")},
				{40 * msec, sseChatLine(sseContent("a b"), "", "")}, // two tokens, but nothing says so
				{10 * msec, sseChatLine(sseContent(" c"), "", "")},
				{10 * msec, sseChatLine(sseContent(" d e"), "length", "")},
				{1 * msec, sseUsageLine(99, 5)}, {0, sseDoneLine},
			},
			// Without continuous usage the first chunk counts as one token: 20 msec / 4.
			ttft: 42 * msec, ttfc: 42 * msec, e2e: 62 * msec, itl: 5 * msec,
			out: 5, first: 1, chunks: nil, continuous: false, finish: "length", response: "chatcmpl-42",
		},
		{
			name:      "held-back empty chunk tokens belong to the first output chunk",
			requested: 4,
			steps: []netStep{
				{0, sseChatLine(sseRoleDelta, "", sseUsageJSON(10, 0))},
				{30 * msec, sseChatLine(sseContent(""), "", sseUsageJSON(10, 1))}, // detokenizer held the text back
				{10 * msec, sseChatLine(sseContent("Hé"), "", sseUsageJSON(10, 2))},
				{10 * msec, sseChatLine(sseContent("llo"), "", sseUsageJSON(10, 3))},
				{10 * msec, sseChatLine(sseContent("!"), "length", sseUsageJSON(10, 4))},
				{0, sseUsageLine(10, 4)}, {0, sseDoneLine},
			},
			ttft: 40 * msec, ttfc: 40 * msec, e2e: 60 * msec, itl: 10 * msec,
			out: 4, first: 2, chunks: []int32{2, 1, 1}, continuous: true, finish: "length", response: "chatcmpl-42",
		},
		{
			name:      "line split across reads is stamped when its newline arrives",
			requested: 2,
			steps: func() []netStep {
				l := sseChatLine(sseContent("x"), "", sseUsageJSON(1, 1))
				return []netStep{
					{10 * msec, l[:20]}, {15 * msec, l[20 : len(l)-2]}, {5 * msec, l[len(l)-2:]},
					{10 * msec, sseChatLine(sseContent("y"), "length", sseUsageJSON(1, 2)) + sseUsageLine(1, 2) + sseDoneLine},
				}
			}(),
			ttft: 30 * msec, ttfc: 30 * msec, e2e: 40 * msec, itl: 10 * msec,
			out: 2, first: 1, chunks: []int32{1, 1}, continuous: true, finish: "length", response: "chatcmpl-42",
		},
		{
			name:      "CRLF, comments, event lines, data without space",
			requested: 2,
			steps: []netStep{
				{0, ": keep-alive\r\n\r\nevent: message\r\nid: 1\r\nretry: 10\r\n"},
				{20 * msec, strings.ReplaceAll(strings.Replace(sseChatLine(sseContent("a"), "", sseUsageJSON(1, 1)), "data: ", "data:", 1), "\n", "\r\n")},
				{20 * msec, strings.ReplaceAll(sseChatLine(sseContent("b"), "length", sseUsageJSON(1, 2)), "\n", "\r\n")},
				{0, strings.ReplaceAll(sseUsageLine(1, 2)+"data:[DONE]\n\n", "\n", "\r\n")},
			},
			ttft: 20 * msec, ttfc: 20 * msec, e2e: 40 * msec, itl: 20 * msec,
			out: 2, first: 1, chunks: []int32{1, 1}, continuous: true, finish: "length", response: "chatcmpl-42",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := decodeScripted(tc.requested, 0, nil, tc.steps...)
			if r.Kind != KindSuccess || r.Reason != ReasonNone || r.Err != nil {
				t.Fatalf("outcome = %s/%s/%v, want success", r.Kind, r.Reason, r.Err)
			}
			check := func(what string, got, want any) {
				t.Helper()
				if !equalResultField(got, want) {
					t.Errorf("%s = %v, want %v", what, got, want)
				}
			}
			check("TTFT", r.TTFT(), tc.ttft)
			check("TTFC", r.TTFC(), tc.ttfc)
			check("E2E", r.E2E(), tc.e2e)
			check("ITL", r.ITL(), tc.itl)
			check("OutputTokens", r.OutputTokens, tc.out)
			check("FirstChunkTokens", r.FirstChunkTokens, tc.first)
			check("ChunkTokens", r.ChunkTokens, tc.chunks)
			check("ContinuousUsage", r.ContinuousUsage, tc.continuous)
			check("Reasoning", r.Reasoning, tc.reasoning)
			check("FinishReason", r.FinishReason, tc.finish)
			check("ResponseID", r.ResponseID, tc.response)
		})
	}
}

func equalResultField(a, b any) bool {
	if x, ok := a.([]int32); ok {
		return slices.Equal(x, b.([]int32))
	}
	return a == b
}

func TestDecoderUsageFields(t *testing.T) {
	r := decodeScripted(2, 0, nil,
		netStep{10 * msec, sseChatLine(sseContent("a"), "", `{"prompt_tokens":4096,"total_tokens":4097,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":2048}}`)},
		netStep{10 * msec, sseChatLine(sseContent("b"), "length", `{"prompt_tokens":4096,"total_tokens":4098,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":2048}}`)},
		netStep{0, sseDoneLine},
	)
	if r.Kind != KindSuccess || r.PromptTokens != 4096 || r.CachedTokens != 2048 || !r.CachedReported || !r.CacheHit() {
		t.Fatalf("got %+v", r)
	}
	r = decodeScripted(2, 0, nil, sseTokenStream(100, 2, 1, 0, msec)...)
	if r.CachedReported || r.CacheHit() {
		t.Fatalf("cached tokens reported without prompt_tokens_details: %+v", r)
	}
}

// TestDecoderOutcomes covers the decoder's failure reasons and the edge
// cases of stream completion.
func TestDecoderOutcomes(t *testing.T) {
	ok := sseTokenStream(10, 3, 1, 10*msec, 10*msec)
	upToUsage := ok[:len(ok)-1] // everything but [DONE]
	tests := []struct {
		name    string
		maxLine int
		end     error
		steps   []netStep
		kind    Kind
		reason  Reason
		errHas  string
	}{
		{name: "complete", steps: ok, kind: KindSuccess},
		{name: "usage chunk but no [DONE] is complete", steps: upToUsage, kind: KindSuccess},
		{name: "[DONE] without final newline", steps: append(slices.Clone(upToUsage), netStep{0, "data: [DONE]"}), kind: KindSuccess},
		{name: "EOF before [DONE]", steps: ok[:3], kind: KindError, reason: ReasonStreamCut, errHas: "before [DONE]"},
		{name: "connection reset", steps: ok[:3], end: syscall.ECONNRESET, kind: KindError, reason: ReasonStreamCut, errHas: "connection reset"},
		{name: "unexpected EOF", steps: ok[:3], end: io.ErrUnexpectedEOF, kind: KindError, reason: ReasonStreamCut},
		{name: "partial chunk at EOF", steps: append(slices.Clone(ok[:3]), netStep{0, `data: {"id":"x","choices":[`}), kind: KindError, reason: ReasonStreamCut},
		{
			name:  "error event mid-stream",
			steps: append(slices.Clone(ok[:2]), netStep{5 * msec, `data: {"error":{"object":"error","message":"engine dead","type":"InternalServerError","code":500}}` + "\n\n" + sseDoneLine}),
			kind:  KindError, reason: ReasonStreamError, errHas: "engine dead",
		},
		{
			name:  "error as a string",
			steps: []netStep{{0, `data: {"error":"out of memory"}` + "\n\n"}},
			kind:  KindError, reason: ReasonStreamError, errHas: "out of memory",
		},
		{
			name:  "event: error",
			steps: append(slices.Clone(ok[:2]), netStep{0, "event: error\ndata: {\"message\":\"overloaded\"}\n\n"}),
			kind:  KindError, reason: ReasonStreamError, errHas: "overloaded",
		},
		{
			name:  "bare JSON error with HTTP 200",
			steps: []netStep{{0, `{"error":{"message":"bad things","type":"x"}}` + "\n"}},
			kind:  KindError, reason: ReasonStreamError, errHas: "bad things",
		},
		{name: "non-JSON data", steps: append(slices.Clone(ok[:2]), netStep{0, "data: {nope\n\n"}), kind: KindError, reason: ReasonMalformedChunk, errHas: "not JSON"},
		{name: "data is an array", steps: []netStep{{0, "data: [1,2]\n\n"}}, kind: KindError, reason: ReasonMalformedChunk},
		{name: "choices not an array", steps: []netStep{{0, `data: {"choices":{"a":1}}` + "\n\n"}}, kind: KindError, reason: ReasonMalformedChunk},
		{name: "content not a string", steps: []netStep{{0, sseChatLine(`{"content":7}`, "", "")}}, kind: KindError, reason: ReasonMalformedChunk},
		{name: "usage not an object", steps: []netStep{{0, sseChatLine(sseContent("a"), "", `"many"`)}}, kind: KindError, reason: ReasonMalformedChunk},
		{name: "completion_tokens not a number", steps: []netStep{{0, sseChatLine(sseContent("a"), "", `{"completion_tokens":"1"}`)}}, kind: KindError, reason: ReasonMalformedChunk},
		{
			name:  "completion_tokens going back",
			steps: []netStep{{0, sseChatLine(sseContent("a"), "", sseUsageJSON(1, 2))}, {0, sseChatLine(sseContent("b"), "", sseUsageJSON(1, 1))}},
			kind:  KindError, reason: ReasonMalformedChunk, errHas: "went back",
		},
		{name: "not SSE at all", steps: []netStep{{0, "<html>502 Bad Gateway</html>\n"}}, kind: KindError, reason: ReasonMalformedChunk, errHas: "not an SSE line"},
		{
			name:    "oversized line",
			maxLine: 1024,
			steps:   append(slices.Clone(ok[:2]), netStep{0, "data: " + strings.Repeat("x", 4096) + "\n\n"}),
			kind:    KindError, reason: ReasonOversizedLine,
		},
		{
			name:    "oversized line with no newline yet",
			maxLine: 100 << 10,
			steps:   append(slices.Clone(ok[:2]), netStep{0, ": " + strings.Repeat("x", 300<<10)}),
			kind:    KindError, reason: ReasonOversizedLine,
		},
		{
			name:    "long line within the limit",
			maxLine: 200 << 10,
			steps:   append([]netStep{{0, ": " + strings.Repeat("x", 150<<10) + "\n"}}, ok...),
			kind:    KindSuccess,
		},
		{
			name:  "missing usage",
			steps: []netStep{{0, sseChatLine(sseContent("a"), "", "")}, {0, sseChatLine(sseContent("b"), "", "")}, {0, sseChatLine(sseContent("c"), "length", "")}, {0, sseDoneLine}},
			kind:  KindError, reason: ReasonMissingUsage,
		},
		{
			name:  "short output",
			steps: []netStep{{0, sseChatLine(sseContent("a"), "", sseUsageJSON(1, 1))}, {0, sseChatLine(sseContent("b"), "stop", sseUsageJSON(1, 2))}, {0, sseUsageLine(1, 2)}, {0, sseDoneLine}},
			kind:  KindShortOutput, errHas: "2 output tokens, asked for 3",
		},
		{
			// The model's first token was its end of answer (Ollama counts it).
			name:  "empty answer",
			steps: []netStep{{0, sseChatLine(sseRoleDelta, "", sseUsageJSON(1, 0))}, {0, sseChatLine(`{"content":""}`, "stop", sseUsageJSON(1, 1))}, {0, sseUsageLine(1, 1)}, {0, sseDoneLine}},
			kind:  KindShortOutput, errHas: "the answer was empty",
		},
		{
			name:  "usage counts tokens no chunk showed",
			steps: []netStep{{0, sseChatLine(sseRoleDelta, "", sseUsageJSON(1, 0))}, {0, sseUsageLine(1, 3)}, {0, sseDoneLine}},
			kind:  KindError, reason: ReasonMalformedChunk, errHas: "no chunk carried output",
		},
		{name: "empty body", steps: nil, kind: KindError, reason: ReasonStreamCut},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := decodeScripted(3, tc.maxLine, tc.end, tc.steps...)
			if r.Kind != tc.kind || r.Reason != tc.reason {
				t.Fatalf("outcome = %s/%q (%v), want %s/%q", r.Kind, r.Reason, r.Err, tc.kind, tc.reason)
			}
			if tc.kind == KindSuccess && r.Err != nil {
				t.Fatalf("success with Err %v", r.Err)
			}
			if tc.errHas != "" && (r.Err == nil || !strings.Contains(r.Err.Error(), tc.errHas)) {
				t.Fatalf("Err = %v, want it to mention %q", r.Err, tc.errHas)
			}
		})
	}
}

// validProbeOutcome reports whether a Result's Kind and Reason are consistent.
func validProbeOutcome(r *Result) bool {
	switch r.Kind {
	case KindSuccess:
		return r.Reason == ReasonNone && r.Err == nil
	case KindShortOutput:
		return r.Reason == ReasonNone && r.Err != nil
	case KindError:
		return slices.Contains(Reasons, r.Reason) && r.Err != nil
	}
	return false
}

// FuzzStreamDecoder feeds arbitrary bytes, delivered in arbitrary read sizes,
// to the decoder: it must never panic and must always settle on a valid
// outcome.
func FuzzStreamDecoder(f *testing.F) {
	var seed bytes.Buffer
	for _, s := range sseTokenStream(10, 4, 2, msec, msec) {
		seed.WriteString(s.data)
	}
	f.Add(seed.Bytes(), uint8(7), uint16(0))
	f.Add([]byte(sseChatLine(`{"reasoning":"x","tool_calls":[{}]}`, "length", sseUsageJSON(1, 4))+sseDoneLine), uint8(1), uint16(64))
	f.Add([]byte("event: error\ndata: oops\n\n"), uint8(3), uint16(0))
	f.Add([]byte(`{"error":{"message":"x"}}`), uint8(0), uint16(0))
	f.Add([]byte("data: {\"choices\":[null],\"usage\":{\"completion_tokens\":-1}}\r\n"), uint8(5), uint16(16))
	f.Add([]byte("data: [DONE]"), uint8(2), uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, split uint8, maxLine uint16) {
		var steps []netStep
		chunk := int(split%64) + 1
		for rest := data; len(rest) > 0; {
			n := min(chunk, len(rest))
			steps = append(steps, netStep{msec, string(rest[:n])})
			rest = rest[n:]
		}
		r := decodeScripted(4, int(maxLine), nil, steps...)
		if !validProbeOutcome(&r) {
			t.Fatalf("invalid outcome %s/%q/%v for %q", r.Kind, r.Reason, r.Err, data)
		}
		if r.Kind == KindSuccess && (r.FirstToken.IsZero() || r.OutputTokens != 4 || r.LastToken.Before(r.FirstToken)) {
			t.Fatalf("success with inconsistent result %+v for %q", r, data)
		}
		if r.ContinuousUsage {
			var sum int32
			for _, k := range r.ChunkTokens {
				if k < 0 {
					t.Fatalf("negative chunk tokens %v", r.ChunkTokens)
				}
				sum += k
			}
			if int(sum) > r.OutputTokens {
				t.Fatalf("chunk tokens %v exceed output %d", r.ChunkTokens, r.OutputTokens)
			}
		}
	})
}

// benchVLLMChunk is a realistic vLLM chat chunk with continuous usage stats.
func benchVLLMChunk(completion int) []byte {
	return []byte(`data: {"id":"chatcmpl-8f3a1c2e9b7d4e5fa6b1c0d2e3f4a5b6","object":"chat.completion.chunk","created":1763776000,` +
		`"model":"Qwen/Qwen3-30B-A3B-Instruct-2507","choices":[{"index":0,"delta":{"content":" the"},"logprobs":null,` +
		`"finish_reason":null}],"usage":{"prompt_tokens":1024,"total_tokens":` + strconv.Itoa(1024+completion) +
		`,"completion_tokens":` + strconv.Itoa(completion) + `}}` + "\n\n")
}

// chunkPerRead delivers one pre-built chunk per Read, as a network that
// flushes every chunk would.
type chunkPerRead struct {
	chunks  [][]byte
	i       int
	pending []byte
}

func (f *chunkPerRead) Read(p []byte) (int, error) {
	if len(f.pending) == 0 {
		if f.i == len(f.chunks) {
			return 0, io.EOF
		}
		f.pending = f.chunks[f.i]
		f.i++
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// BenchmarkStreamChunk measures the probe path per streamed chunk: stamping
// reader (real clock, stall timer armed and reset on every read), line
// splitting, JSON parsing and bookkeeping. One op is one chunk; streams of
// 1024 chunks are decoded back to back, so the per-stream setup (pooled
// decoder, role and usage chunks) is amortised as it is in a real probe.
func BenchmarkStreamChunk(b *testing.B) {
	const perStream = 1024
	chunks := make([][]byte, 0, perStream+3)
	chunks = append(chunks, []byte(sseChatLine(sseRoleDelta, "", sseUsageJSON(1024, 0))))
	for i := 1; i <= perStream; i++ {
		chunks = append(chunks, benchVLLMChunk(i))
	}
	chunks = append(chunks, []byte(sseUsageLine(1024, perStream)), []byte(sseDoneLine))
	var bytesPerChunk int
	for _, c := range chunks[1 : perStream+1] {
		bytesPerChunk += len(c)
	}
	b.SetBytes(int64(bytesPerChunk / perStream))
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += perStream {
		feeder := &chunkPerRead{chunks: chunks}
		res := Result{RequestedTokens: perStream, ChunkTokens: make([]int32, 0, perStream)}
		d := newStreamDecoder(feeder, SystemClock{}, 0, &res)
		d.sr.stall, d.sr.onStall = time.Hour, func() {}
		end := d.decode()
		d.settle(end, nil)
		d.release()
		if res.Kind != KindSuccess || len(res.ChunkTokens) != perStream {
			b.Fatalf("bench stream: %s/%s/%v, %d chunks", res.Kind, res.Reason, res.Err, len(res.ChunkTokens))
		}
	}
}

// TestStreamChunkAllocs pins the steady-state allocation budget: at most 2
// allocations per chunk on the probe path (the measured cost is 0 per chunk
// plus a handful per stream).
func TestStreamChunkAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip()
	}
	const perStream = 256
	chunks := [][]byte{[]byte(sseChatLine(sseRoleDelta, "", sseUsageJSON(1024, 0)))}
	for i := 1; i <= perStream; i++ {
		chunks = append(chunks, benchVLLMChunk(i))
	}
	chunks = append(chunks, []byte(sseUsageLine(1024, perStream)), []byte(sseDoneLine))
	run := func() {
		res := Result{RequestedTokens: perStream, ChunkTokens: make([]int32, 0, perStream)}
		d := newStreamDecoder(&chunkPerRead{chunks: chunks}, SystemClock{}, 0, &res)
		d.sr.stall, d.sr.onStall = time.Hour, func() {}
		d.settle(d.decode(), nil)
		d.release()
		if res.Kind != KindSuccess {
			t.Fatalf("stream failed: %v", res.Err)
		}
	}
	run() // warm the pool
	perRun := testing.AllocsPerRun(20, run)
	if perChunk := perRun / perStream; perChunk > 2 {
		t.Fatalf("%.2f allocations per chunk (%.0f per stream), want <= 2", perChunk, perRun)
	}
	t.Logf("%.0f allocations per stream of %d chunks", perRun, perStream)
}

// Test helpers shared by the prober tests: a fake clock, a scripted network
// body, and builders for canned vLLM SSE.

// clockEpoch is the fake clock's epoch.
var clockEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// stepClock is a Clock tests move by hand.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func newStepClock() *stepClock { return &stepClock{now: clockEpoch} }

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// netStep is one network delivery: after wait, data arrives (in one Read if it
// fits the caller's buffer).
type netStep struct {
	wait time.Duration
	data string
}

// scriptedBody plays steps against a fake clock, then returns end (io.EOF if nil).
type scriptedBody struct {
	clock   *stepClock
	steps   []netStep
	pending string
	end     error
}

func (r *scriptedBody) Read(p []byte) (int, error) {
	if r.pending == "" {
		if len(r.steps) == 0 {
			if r.end != nil {
				return 0, r.end
			}
			return 0, io.EOF
		}
		r.clock.advance(r.steps[0].wait)
		r.pending = r.steps[0].data
		r.steps = r.steps[1:]
		if r.pending == "" {
			return 0, nil
		}
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// decodeScripted runs the decoder over a scripted stream.
func decodeScripted(requested, maxLine int, end error, steps ...netStep) Result {
	clk := newStepClock()
	res := Result{RequestedTokens: requested, Start: clockEpoch}
	// A fresh decoder rather than a pooled one keeps runs deterministic,
	// which the fuzzer's input minimisation relies on.
	d := &streamDecoder{br: bufio.NewReaderSize(nil, readBufSize)}
	d.reset(&scriptedBody{clock: clk, steps: steps, end: end}, clk, maxLine, &res)
	d.settle(d.decode(), nil)
	return res
}

// SSE builders for canned vLLM streams.

const sseDoneLine = "data: [DONE]\n\n"

// sseUsageJSON is a usage object.
func sseUsageJSON(prompt, completion int) string {
	return fmt.Sprintf(`{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}`, prompt, prompt+completion, completion)
}

// sseChatLine is one chat chunk as vLLM frames it; usage "" leaves it out.
func sseChatLine(delta, finish, usage string) string {
	fr := "null"
	if finish != "" {
		fr = `"` + finish + `"`
	}
	s := `{"id":"chatcmpl-42","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[{"index":0,"delta":` +
		delta + `,"logprobs":null,"finish_reason":` + fr + `}]`
	if usage != "" {
		s += `,"usage":` + usage
	}
	return "data: " + s + "}\n\n"
}

// sseTextLine is one completions chunk.
func sseTextLine(text, finish, usage string) string {
	fr := "null"
	if finish != "" {
		fr = `"` + finish + `"`
	}
	s := `{"id":"cmpl-7","object":"text_completion","created":1735689600,"model":"m","choices":[{"index":0,"text":` +
		fmt.Sprintf("%q", text) + `,"logprobs":null,"finish_reason":` + fr + `,"stop_reason":null}]`
	if usage != "" {
		s += `,"usage":` + usage
	}
	return "data: " + s + "}\n\n"
}

// sseUsageLine is the end-of-stream usage chunk.
func sseUsageLine(prompt, completion int) string {
	return `data: {"id":"chatcmpl-42","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[],"usage":` +
		sseUsageJSON(prompt, completion) + "}\n\n"
}

func sseContent(s string) string { return fmt.Sprintf(`{"content":%q}`, s) }

const sseRoleDelta = `{"role":"assistant","content":""}`

// sseTokenStream is a well-formed continuous-usage chat stream: a role chunk,
// then chunks of perChunk tokens every gap after first, then usage and [DONE].
func sseTokenStream(prompt, n, perChunk int, first, gap time.Duration) []netStep {
	steps := []netStep{{0, sseChatLine(sseRoleDelta, "", sseUsageJSON(prompt, 0))}}
	wait := first
	for done := 0; done < n; {
		k := min(perChunk, n-done)
		done += k
		fin := ""
		if done == n {
			fin = "length"
		}
		steps = append(steps, netStep{wait, sseChatLine(sseContent(strings.Repeat(" tok", k)), fin, sseUsageJSON(prompt, done))})
		wait = gap
	}
	return append(steps, netStep{0, sseUsageLine(prompt, n)}, netStep{0, sseDoneLine})
}

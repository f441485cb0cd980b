package prober

import (
	"testing"
)

// The semantic canaries read off every stream: the first output chunk's
// kind, and usage that disagrees with what the stream carried.
func TestDecoderCanaries(t *testing.T) {
	chat := func(deltas ...string) []netStep {
		steps := []netStep{{0, sseChatLine(sseRoleDelta, "", "")}}
		for _, d := range deltas {
			steps = append(steps, netStep{msec, sseChatLine(d, "", "")})
		}
		return steps
	}
	end := func(steps []netStep, completion int) []netStep {
		return append(steps, netStep{0, sseUsageLine(10, completion)}, netStep{0, sseDoneLine})
	}
	toolDelta := `{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}`
	for _, tc := range []struct {
		name      string
		steps     []netStep
		requested int
		kind      ChunkKind
		mismatch  bool
		outcome   Kind
	}{
		{"content first", end(chat(sseContent("a"), sseContent("b"), sseContent("c")), 3), 3, ChunkContent, false, KindSuccess},
		{"reasoning first", end(chat(`{"reasoning_content":"hm"}`, sseContent("b"), sseContent("c")), 3), 3, ChunkReasoning, false, KindSuccess},
		{"tool call first", end(chat(toolDelta, sseContent("b")), 2), 2, ChunkToolCall, false, KindSuccess},
		// Three chunks with text, but the usage counts two tokens: by usage a
		// short output, and the canary says the count is wrong.
		{"usage below the chunks", end(chat(sseContent("a"), sseContent("b"), sseContent("c")), 2), 3, ChunkContent, true, KindShortOutput},
		// Continuous usage says 3 on the last text chunk, the final usage 4.
		{"continuous usage ends elsewhere", append(sseTokenStream(10, 3, 1, msec, msec)[:4],
			netStep{0, sseUsageLine(10, 4)}, netStep{0, sseDoneLine}), 4, ChunkContent, true, KindSuccess},
		{"multi-token chunks are no mismatch", sseTokenStream(10, 8, 4, msec, msec), 8, ChunkContent, false, KindSuccess},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := decodeScripted(tc.requested, 0, nil, tc.steps...)
			if res.FirstChunkKind != tc.kind || res.UsageMismatch != tc.mismatch || res.Kind != tc.outcome {
				t.Errorf("first chunk %q, usage mismatch %v, outcome %s (%v); want %q, %v, %s",
					res.FirstChunkKind, res.UsageMismatch, res.Kind, res.Err, tc.kind, tc.mismatch, tc.outcome)
			}
		})
	}
}

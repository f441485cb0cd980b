package prober

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// decodeScriptedAPI runs the decoder of api over a scripted stream.
func decodeScriptedAPI(api API, requested int, end error, steps ...netStep) Result {
	clk := newStepClock()
	res := Result{RequestedTokens: requested, Start: clockEpoch}
	d := &streamDecoder{br: bufio.NewReaderSize(nil, readBufSize)}
	d.reset(&scriptedBody{clock: clk, steps: steps, end: end}, clk, 0, &res)
	d.api = api
	d.settle(d.decode(), nil)
	return res
}

func sseEvent(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }

// responsesStream is a Responses stream as vLLM and Ollama send it: framing
// at once, then one text delta per token 10 ms apart (the first after a
// 100 ms prefill), then response.completed with usage.
func responsesStream(tokens, usageOut int, extra string) []netStep {
	steps := []netStep{{0, sseEvent("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress"}}`) +
		sseEvent("response.in_progress", `{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_1"}}`) +
		sseEvent("response.output_item.added", `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"type":"message"}}`) +
		sseEvent("response.content_part.added", `{"type":"response.content_part.added","sequence_number":3,"part":{"type":"output_text","text":""}}`)}}
	for i := range tokens {
		wait := 10 * msec
		if i == 0 {
			wait = 100 * msec
		}
		steps = append(steps, netStep{wait, sseEvent("response.output_text.delta",
			fmt.Sprintf(`{"type":"response.output_text.delta","sequence_number":%d,"item_id":"m","output_index":0,"content_index":0,"delta":" w%d"}`, 4+i, i))})
	}
	steps = append(steps, netStep{msec, sseEvent("response.output_text.done", `{"type":"response.output_text.done","text":"…"}`) +
		sseEvent("response.completed", `{"type":"response.completed","response":{"id":"resp_1","status":"completed","usage":`+
			fmt.Sprintf(`{"input_tokens":1000,"input_tokens_details":{"cached_tokens":0},"output_tokens":%d,"total_tokens":%d}`, usageOut, 1000+usageOut)+`}`+extra+`}`)})
	return steps
}

// messagesStream is a Messages stream: message_start and the block's start
// at once (as a server may send them before any token), a ping, one
// text_delta per token, then message_delta with the stop reason and usage,
// and message_stop.
func messagesStream(tokens, usageOut int, stop string) []netStep {
	steps := []netStep{{0, sseEvent("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"usage":{"input_tokens":990,"cache_read_input_tokens":10,"output_tokens":1}}}`) +
		sseEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		sseEvent("ping", `{"type":"ping"}`)}}
	for i := range tokens {
		wait := 10 * msec
		if i == 0 {
			wait = 100 * msec
		}
		steps = append(steps, netStep{wait, sseEvent("content_block_delta",
			fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" w%d"}}`, i))})
	}
	steps = append(steps, netStep{msec, sseEvent("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		sseEvent("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`, stop, usageOut)) +
		sseEvent("message_stop", `{"type":"message_stop"}`)})
	return steps
}

// cutBefore returns steps without the last one (the terminal events).
func cutBefore(steps []netStep) []netStep { return steps[:len(steps)-1] }

// TestTypedStreams decodes the Responses and Messages streams: TTFT is the
// first text delta, never a framing event; tokens come from the final usage;
// each API's error events, malformed events and cut streams fail with their
// reason.
func TestTypedStreams(t *testing.T) {
	respEvent := func(typ, body string) netStep {
		return netStep{msec, sseEvent(typ, `{"type":"`+typ+`"`+body+`}`)}
	}
	tests := []struct {
		name   string
		api    API
		steps  []netStep
		end    error
		kind   Kind
		reason Reason
		errHas string
		check  func(t *testing.T, r *Result)
	}{
		{name: "responses: a full answer", api: APIResponses, steps: responsesStream(8, 8, ""), kind: KindSuccess,
			check: func(t *testing.T, r *Result) {
				if r.TTFT() != 100*msec || r.ITL() != 10*msec || r.PromptTokens != 1000 || !r.CachedReported || r.ResponseID != "resp_1" {
					t.Errorf("TTFT %v ITL %v prompt %d cached %v id %q; want 100ms, 10ms, 1000, reported, resp_1", r.TTFT(), r.ITL(), r.PromptTokens, r.CachedReported, r.ResponseID)
				}
				if r.FinishReason != "length" || r.FirstChunkKind != ChunkContent || r.Engine.Source != TimingNone {
					t.Errorf("finish %q, first chunk %q, engine %q", r.FinishReason, r.FirstChunkKind, r.Engine.Source)
				}
			}},
		{name: "responses: vLLM's per-request metrics on response.completed", api: APIResponses, kind: KindSuccess,
			steps: responsesStream(4, 4, `,"metrics":{"queue_time_ms":2,"time_to_first_token_ms":90,"generation_time_ms":30,"mean_itl_ms":10,"tokens_per_second":33.3}`),
			check: func(t *testing.T, r *Result) {
				if sp, ok := r.Split(); !ok || sp.Queue != 2*msec || sp.Prefill != 90*msec || sp.Outside != 8*msec {
					t.Errorf("split %+v (%v), want 8 ms outside, 2 ms queue, 90 ms prefill", sp, ok)
				}
			}},
		{name: "responses: the model ended early", api: APIResponses, steps: responsesStream(3, 3, ""), kind: KindShortOutput,
			check: func(t *testing.T, r *Result) {
				if r.FinishReason != "stop" || r.OutputTokens != 3 {
					t.Errorf("finish %q, %d tokens", r.FinishReason, r.OutputTokens)
				}
			}},
		{name: "responses: reasoning first", api: APIResponses, kind: KindSuccess,
			steps: append([]netStep{respEvent("response.reasoning_text.delta", `,"delta":"hmm"`)}, responsesStream(7, 8, "")...),
			check: func(t *testing.T, r *Result) {
				if r.FirstChunkKind != ChunkReasoning || !r.Reasoning || r.TTFC() <= r.TTFT() {
					t.Errorf("first chunk %q, reasoning %v, TTFC %v TTFT %v", r.FirstChunkKind, r.Reasoning, r.TTFC(), r.TTFT())
				}
			}},
		{name: "responses: error event mid-stream", api: APIResponses, kind: KindError, reason: ReasonStreamError, errHas: "server_error: engine died",
			steps: append(cutBefore(responsesStream(4, 4, "")), netStep{msec, sseEvent("error", `{"type":"error","code":"server_error","message":"engine died","sequence_number":9}`)})},
		{name: "responses: response.failed", api: APIResponses, kind: KindError, reason: ReasonStreamError, errHas: "out of memory",
			steps: append(cutBefore(responsesStream(4, 4, "")), respEvent("response.failed", `,"response":{"id":"resp_1","status":"failed","error":{"code":"server_error","message":"out of memory"}}`))},
		{name: "responses: cut before the final usage", api: APIResponses, kind: KindError, reason: ReasonStreamCut,
			steps: cutBefore(responsesStream(4, 4, ""))},
		{name: "responses: completed without usage", api: APIResponses, kind: KindError, reason: ReasonMissingUsage,
			steps: append(cutBefore(responsesStream(4, 4, "")), respEvent("response.completed", `,"response":{"id":"resp_1","status":"completed"}`))},
		{name: "responses: an event without a type", api: APIResponses, kind: KindError, reason: ReasonMalformedChunk, errHas: "no type",
			steps: append(cutBefore(responsesStream(2, 2, "")), netStep{msec, "data: {\"delta\":\"x\"}\n\n"})},
		{name: "responses: a delta that is not a string", api: APIResponses, kind: KindError, reason: ReasonMalformedChunk,
			steps: append(cutBefore(responsesStream(2, 2, "")), respEvent("response.output_text.delta", `,"delta":{"text":"x"}`))},
		{name: "responses: not JSON", api: APIResponses, kind: KindError, reason: ReasonMalformedChunk,
			steps: []netStep{{msec, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"del\n\n"}}},
		{name: "responses: more tokens than asked", api: APIResponses, steps: responsesStream(8, 8, ""), kind: KindError, reason: ReasonTooManyTokens},

		{name: "messages: a full answer", api: APIMessages, steps: messagesStream(8, 8, "max_tokens"), kind: KindSuccess,
			check: func(t *testing.T, r *Result) {
				if r.TTFT() != 100*msec || r.ITL() != 10*msec || r.PromptTokens != 1000 || r.CachedTokens != 10 || r.ResponseID != "msg_1" {
					t.Errorf("TTFT %v ITL %v prompt %d cached %d id %q; want 100ms, 10ms, 1000, 10, msg_1", r.TTFT(), r.ITL(), r.PromptTokens, r.CachedTokens, r.ResponseID)
				}
				if r.FinishReason != "length" || r.FirstChunkKind != ChunkContent {
					t.Errorf("finish %q, first chunk %q", r.FinishReason, r.FirstChunkKind)
				}
			}},
		{name: "messages: end_turn early", api: APIMessages, steps: messagesStream(3, 3, "end_turn"), kind: KindShortOutput,
			check: func(t *testing.T, r *Result) {
				if r.FinishReason != "stop" {
					t.Errorf("finish %q", r.FinishReason)
				}
			}},
		{name: "messages: thinking first", api: APIMessages, kind: KindSuccess,
			steps: append([]netStep{{msec, sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`)}}, messagesStream(7, 8, "max_tokens")...),
			check: func(t *testing.T, r *Result) {
				if r.FirstChunkKind != ChunkReasoning || !r.Reasoning {
					t.Errorf("first chunk %q, reasoning %v", r.FirstChunkKind, r.Reasoning)
				}
			}},
		{name: "messages: overloaded_error mid-stream", api: APIMessages, kind: KindError, reason: ReasonStreamError, errHas: "overloaded_error: Overloaded",
			steps: append(cutBefore(messagesStream(4, 4, "max_tokens")), netStep{msec, sseEvent("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)})},
		{name: "messages: cut before message_delta", api: APIMessages, kind: KindError, reason: ReasonStreamCut,
			steps: cutBefore(messagesStream(4, 4, "max_tokens"))},
		{name: "messages: message_stop without usage", api: APIMessages, kind: KindError, reason: ReasonMissingUsage,
			steps: append(cutBefore(messagesStream(4, 4, "max_tokens")), netStep{msec, sseEvent("message_stop", `{"type":"message_stop"}`)})},
		{name: "messages: a content_block_delta without a delta", api: APIMessages, kind: KindError, reason: ReasonMalformedChunk,
			steps: append(cutBefore(messagesStream(2, 2, "")), netStep{msec, sseEvent("content_block_delta", `{"type":"content_block_delta","index":0}`)})},
		{name: "messages: output_tokens not a count", api: APIMessages, kind: KindError, reason: ReasonMalformedChunk,
			steps: append(cutBefore(messagesStream(4, 4, "")), netStep{msec, sseEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":"four"}}`)})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			requested := 4
			if tc.kind == KindSuccess || strings.Contains(tc.name, "early") {
				requested = 8
			}
			if tc.name == "responses: vLLM's per-request metrics on response.completed" {
				requested = 4
			}
			r := decodeScriptedAPI(tc.api, requested, tc.end, tc.steps...)
			if r.Kind != tc.kind || r.Reason != tc.reason {
				t.Fatalf("outcome = %s/%q (%v), want %s/%q", r.Kind, r.Reason, r.Err, tc.kind, tc.reason)
			}
			if !validProbeOutcome(&r) {
				t.Fatalf("invalid outcome %s/%q/%v", r.Kind, r.Reason, r.Err)
			}
			if tc.errHas != "" && (r.Err == nil || !strings.Contains(r.Err.Error(), tc.errHas)) {
				t.Fatalf("Err = %v, want it to mention %q", r.Err, tc.errHas)
			}
			if tc.check != nil {
				tc.check(t, &r)
			}
		})
	}
}

// FuzzTypedStreamDecoder feeds arbitrary bytes, in arbitrary read sizes, to
// the Responses and Messages decoders (api picks one): they must never panic
// and always settle on a valid outcome; a success has its tokens from usage.
func FuzzTypedStreamDecoder(f *testing.F) {
	join := func(steps []netStep) []byte {
		var b bytes.Buffer
		for _, s := range steps {
			b.WriteString(s.data)
		}
		return b.Bytes()
	}
	f.Add(join(responsesStream(4, 4, "")), uint8(7), false)
	f.Add(join(messagesStream(4, 4, "max_tokens")), uint8(13), true)
	f.Add([]byte(sseEvent("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)), uint8(3), true)
	f.Add([]byte(sseEvent("response.failed", `{"type":"response.failed","response":{"error":null}}`)), uint8(2), false)
	f.Add([]byte("data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":-1}}\n\n"), uint8(5), true)
	f.Fuzz(func(t *testing.T, data []byte, split uint8, messages bool) {
		api := APIResponses
		if messages {
			api = APIMessages
		}
		var steps []netStep
		chunk := int(split%64) + 1
		for rest := data; len(rest) > 0; {
			n := min(chunk, len(rest))
			steps = append(steps, netStep{msec, string(rest[:n])})
			rest = rest[n:]
		}
		r := decodeScriptedAPI(api, 4, nil, steps...)
		if !validProbeOutcome(&r) {
			t.Fatalf("invalid outcome %s/%q/%v for %q", r.Kind, r.Reason, r.Err, data)
		}
		if r.Kind == KindSuccess && (r.FirstToken.IsZero() || r.OutputTokens != 4 || r.LastToken.Before(r.FirstToken)) {
			t.Fatalf("success with inconsistent result %+v for %q", r, data)
		}
		if r.ContinuousUsage || r.ChunkTokens != nil {
			t.Fatalf("a typed stream has no per-chunk usage: %+v", r)
		}
	})
}

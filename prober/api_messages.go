package prober

// This file holds the Anthropic Messages API (POST /v1/messages): the probe's
// request and the decoding of its stream of typed events.
//
// A stream is message_start (the message, with usage.input_tokens), then per
// content block content_block_start, content_block_delta… and
// content_block_stop, with ping events anywhere, then message_delta (the
// stop_reason and the cumulative usage.output_tokens) and message_stop. An
// error arrives as `event: error` with {"type":"error","error":{"type":
// "overloaded_error","message":…}}. TTFT is the first content_block_delta
// that carries text (text_delta), thinking (thinking_delta) or tool input
// (input_json_delta): never message_start or content_block_start, which a
// server may send before any token.
//
// Why not the official anthropic-sdk-go's decoder: as with openai-go, its
// stream hands out events without their arrival times and allocates per
// event; the event and field names are those of its
// MessageStreamEventUnion.

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/valyala/fastjson"
)

// APIMessages is POST /v1/messages.
const APIMessages API = "messages"

func init() { registerAPI(APIMessages, messagesAPI{}) }

type messagesAPI struct{}

// The Messages API has tool calls but no cache_salt (the nonce keeps a
// prompt cold); every request carries anthropic-version; its prompts are
// calibrated with its own usage counts.
func (messagesAPI) info() apiInfo {
	return apiInfo{order: 40, path: "/v1/messages", about: "Anthropic Messages", tools: true,
		header: "Anthropic-Version", headerValue: anthropicVersion}
}

func (messagesAPI) marshal(r requestSpec) ([]byte, error) { return marshalMessagesRequest(r) }

func (messagesAPI) event(d *streamDecoder, v *fastjson.Value, at time.Time) (streamEnd, bool) {
	return d.messagesEvent(v, at)
}

func (messagesAPI) errorText(v *fastjson.Value) string { return typedErrorMessage(v) }

// messagesRequest is a streaming Messages API request. The API has no
// cache_salt, min_tokens or ignore_eos: the nonce that opens every prompt
// keeps it cold, and an answer that ends early is a short answer.
type messagesRequest struct {
	Model     string            `json:"model"`
	MaxTokens int               `json:"max_tokens"`
	Messages  []messagesMessage `json:"messages"`
	Tools     []messagesTool    `json:"tools,omitempty"`
	Stream    bool              `json:"stream,omitempty"`
}

type messagesMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"` // a string, or content blocks (conversation.go)
}

// anthropicVersion is the anthropic-version header every Messages request
// carries; servers that need none ignore it.
const anthropicVersion = "2023-06-01"

func marshalMessagesRequest(r requestSpec) ([]byte, error) {
	return json.Marshal(messagesRequest{
		Model: r.Model, MaxTokens: r.MaxTokens, Stream: r.Stream,
		Messages: messagesHistory(r.Prompt, r.Steps, r.Tools), Tools: messagesTools(r.Tools),
	})
}

// messagesStopReason maps Anthropic's stop_reason to the OpenAI
// finish_reason the rest of the prober reads.
func messagesStopReason(s string) string {
	switch s {
	case "end_turn", "stop_sequence":
		return "stop"
	case "max_tokens":
		return "length"
	case "tool_use":
		return "tool_calls"
	}
	return s
}

// messagesUsage reads an Anthropic usage object. The prompt is input_tokens
// plus the tokens read from and written to the prompt cache (Anthropic
// counts those apart); cache_read_input_tokens is the cached share.
func (d *streamDecoder) messagesUsage(u *fastjson.Value) (streamEnd, bool) {
	if u == nil || u.Type() != fastjson.TypeObject {
		return streamEnd{}, false
	}
	r := d.res
	if in, ok := jsonCount(u.Get("input_tokens")); ok && in > 0 {
		read, readOK := jsonCount(u.Get("cache_read_input_tokens"))
		created, _ := jsonCount(u.Get("cache_creation_input_tokens"))
		r.PromptTokens = in + read + created
		if readOK {
			r.CachedTokens, r.CachedReported = read, true
		}
	}
	if ov := u.Get("output_tokens"); ov != nil {
		out, ok := jsonCount(ov)
		if !ok {
			return malformedChunk("usage.output_tokens is not a count")
		}
		d.usageSeen, d.completion = true, out
	}
	return streamEnd{}, false
}

// messagesEvent handles one event of a Messages stream.
func (d *streamDecoder) messagesEvent(v *fastjson.Value, at time.Time) (streamEnd, bool) {
	typ, end, stop := eventType(v)
	if stop {
		return end, stop
	}
	r := d.res
	switch string(typ) {
	case "content_block_delta":
		delta := v.Get("delta")
		if delta == nil || delta.Type() != fastjson.TypeObject {
			return malformedChunk("content_block_delta without a delta object")
		}
		switch string(delta.GetStringBytes("type")) {
		case "text_delta":
			return d.deltaText(delta.Get("text"), ChunkContent, at)
		case "thinking_delta":
			return d.deltaText(delta.Get("thinking"), ChunkReasoning, at)
		case "input_json_delta":
			return d.deltaText(delta.Get("partial_json"), ChunkToolCall, at)
		}
	case "message_start":
		msg := v.Get("message")
		if msg == nil || msg.Type() != fastjson.TypeObject {
			return malformedChunk("message_start without a message object")
		}
		if id := msg.GetStringBytes("id"); len(id) > 0 && r.ResponseID == "" {
			r.ResponseID = string(id)
		}
		// output_tokens here is 0 or 1 before any token: not yet a count.
		if end, stop := d.messagesUsage(msg.Get("usage")); stop {
			return end, stop
		}
		d.usageSeen, d.completion = false, 0
	case "message_delta":
		if s := v.GetStringBytes("delta", "stop_reason"); len(s) > 0 {
			r.FinishReason = messagesStopReason(string(s))
		}
		if end, stop := d.messagesUsage(v.Get("usage")); stop {
			return end, stop
		}
	case "message_stop":
		for _, m := range []*fastjson.Value{v.Get("metrics"), v.Get("message", "metrics")} {
			if e, ok := vllmMetrics(m); ok {
				r.Engine = e
			}
		}
		d.finalUsage = d.usageSeen
		return streamEnd{done: true}, true
	case "error":
		return streamEnd{reason: ReasonStreamError, err: errors.New(typedErrorMessage(v))}, true
	}
	return streamEnd{}, false
}

// The history as Messages user and assistant messages; with tools the
// assistant's content is a text block (when the answer has text) and a
// tool_use block, and the next user message is one tool_result block
// (conversation.go).

// Messages API content blocks and tool.
type (
	messagesBlock struct {
		Type      string          `json:"type"`                  // text, tool_use, tool_result
		Text      string          `json:"text,omitempty"`        // text
		ID        string          `json:"id,omitempty"`          // tool_use
		Name      string          `json:"name,omitempty"`        // tool_use
		Input     json.RawMessage `json:"input,omitempty"`       // tool_use
		ToolUseID string          `json:"tool_use_id,omitempty"` // tool_result
		Content   *string         `json:"content,omitempty"`     // tool_result
	}
	messagesTool struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
)

func messagesTools(tools bool) []messagesTool {
	if !tools {
		return nil
	}
	return []messagesTool{{Name: probeToolName, Description: probeToolDesc, InputSchema: probeToolParams}}
}

// messagesHistory is the history as Messages messages.
func messagesHistory(first string, steps []convStep, tools bool) []messagesMessage {
	msgs := make([]messagesMessage, 0, 1+2*len(steps))
	msgs = append(msgs, messagesMessage{Role: "user", Content: first})
	for _, st := range steps {
		if !tools {
			msgs = append(msgs, messagesMessage{Role: "assistant", Content: st.Answer}, messagesMessage{Role: "user", Content: st.New})
			continue
		}
		var blocks []messagesBlock
		if st.Answer != "" {
			blocks = append(blocks, messagesBlock{Type: "text", Text: st.Answer})
		}
		blocks = append(blocks, messagesBlock{Type: "tool_use", ID: toolCallID(st.Turn), Name: probeToolName, Input: json.RawMessage(toolCallArgs(st.Turn))})
		out := st.New
		msgs = append(msgs, messagesMessage{Role: "assistant", Content: blocks},
			messagesMessage{Role: "user", Content: []messagesBlock{{Type: "tool_result", ToolUseID: toolCallID(st.Turn), Content: &out}}})
	}
	return msgs
}

package prober

// This file holds the OpenAI Responses API (POST /v1/responses): the probe's
// request and the decoding of its stream of typed events.
//
// A stream is a sequence of SSE events whose JSON carries its own "type":
// framing (response.created, response.in_progress, response.output_item.added,
// response.content_part.added, …), deltas (response.output_text.delta,
// response.reasoning_text.delta, response.reasoning_summary_text.delta,
// response.function_call_arguments.delta), then one terminal event:
// response.completed or response.incomplete (with usage), or response.failed
// and error. TTFT is the first delta that carries text, never a framing
// event. Usage comes once, on the terminal event, so ITL is timed from the
// deltas and counted with usage.output_tokens.
//
// Why not the official openai-go's decoder: its ssestream reader hands out
// decoded events without their arrival times, and its typed unmarshal
// allocates per event; slaprobe's timed reader (stampReader) and fastjson
// keep the arrival stamp of each line at no allocation. The event and field
// names are those of openai-go's ResponseStreamEventUnion.

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

// APIResponses is POST /v1/responses.
const APIResponses API = "responses"

func init() { registerAPI(APIResponses, responsesAPI{}) }

type responsesAPI struct{}

// The Responses API has tool calls and vLLM's cache_salt; its prompts are
// calibrated with its own usage counts (vLLM's /tokenize has no form for
// its input items).
func (responsesAPI) info() apiInfo {
	return apiInfo{order: 30, path: "/v1/responses", about: "OpenAI Responses", tools: true, cacheSalt: true}
}

func (responsesAPI) marshal(r requestSpec) ([]byte, error) { return marshalResponsesRequest(r) }

func (responsesAPI) event(d *streamDecoder, v *fastjson.Value, at time.Time) (streamEnd, bool) {
	return d.responsesEvent(v, at)
}

func (responsesAPI) errorText(v *fastjson.Value) string { return typedErrorMessage(v) }

// responsesRequest is a streaming Responses API request with vLLM's
// extensions (ignored by servers that lack them). store is false: a probe's
// answer must not be kept by the server.
type responsesRequest struct {
	Model           string          `json:"model"`
	Input           any             `json:"input"` // a string, or a conversation's items (conversation.go)
	Tools           []responsesTool `json:"tools,omitempty"`
	ToolChoice      string          `json:"tool_choice,omitempty"` // "none" with tools (chatToolChoice)
	MaxOutputTokens int             `json:"max_output_tokens"`
	Stream          bool            `json:"stream,omitempty"`
	Store           bool            `json:"store"`
	MinTokens       int             `json:"min_tokens,omitempty"`
	IgnoreEOS       bool            `json:"ignore_eos,omitempty"`
	CacheSalt       string          `json:"cache_salt,omitempty"`
}

func marshalResponsesRequest(r requestSpec) ([]byte, error) {
	return json.Marshal(responsesRequest{
		Model: r.Model, Input: responsesInput(r.Prompt, r.Steps, r.Tools), Tools: responsesTools(r.Tools), ToolChoice: responsesToolChoice(r.Tools),
		MaxOutputTokens: r.MaxTokens, Stream: r.Stream,
		MinTokens: r.MinTokens, IgnoreEOS: r.MinTokens > 0, CacheSalt: r.CacheSalt,
	})
}

// responsesUsage reads a Responses usage object: input_tokens,
// output_tokens and input_tokens_details.cached_tokens.
func (d *streamDecoder) responsesUsage(u *fastjson.Value) (streamEnd, bool) {
	if u == nil || u.Type() != fastjson.TypeObject {
		return streamEnd{}, false
	}
	out, ok := jsonCount(u.Get("output_tokens"))
	if !ok {
		return malformedChunk("usage.output_tokens is missing or not a count")
	}
	r := d.res
	if in, ok := jsonCount(u.Get("input_tokens")); ok {
		r.PromptTokens = in
	}
	if n, ok := jsonCount(u.Get("input_tokens_details", "cached_tokens")); ok {
		r.CachedTokens, r.CachedReported = n, true
	}
	d.usageSeen, d.completion = true, out
	return streamEnd{}, false
}

// responsesEvent handles one event of a Responses stream.
func (d *streamDecoder) responsesEvent(v *fastjson.Value, at time.Time) (streamEnd, bool) {
	typ, end, stop := eventType(v)
	if stop {
		return end, stop
	}
	r := d.res
	switch string(typ) {
	case "response.output_text.delta":
		return d.deltaText(v.Get("delta"), ChunkContent, at)
	case "response.reasoning_text.delta", "response.reasoning_summary_text.delta":
		return d.deltaText(v.Get("delta"), ChunkReasoning, at)
	case "response.function_call_arguments.delta":
		return d.deltaText(v.Get("delta"), ChunkToolCall, at)
	case "response.created", "response.in_progress":
		if id := v.GetStringBytes("response", "id"); len(id) > 0 && r.ResponseID == "" {
			r.ResponseID = string(id)
		}
	case "response.completed", "response.incomplete":
		resp := v.Get("response")
		if resp == nil || resp.Type() != fastjson.TypeObject {
			return malformedChunk("%s without a response object", typ)
		}
		if id := resp.GetStringBytes("id"); len(id) > 0 && r.ResponseID == "" {
			r.ResponseID = string(id)
		}
		if end, stop := d.responsesUsage(resp.Get("usage")); stop {
			return end, stop
		}
		// vLLM's per-request metrics: on this event when streaming.
		for _, m := range []*fastjson.Value{v.Get("metrics"), resp.Get("metrics")} {
			if e, ok := vllmMetrics(m); ok {
				r.Engine = e
			}
		}
		switch {
		case string(typ) == "response.incomplete":
			r.FinishReason = "length" // incomplete_details.reason: max_output_tokens
			if reason := resp.GetStringBytes("incomplete_details", "reason"); len(reason) > 0 && string(reason) != "max_output_tokens" {
				r.FinishReason = string(reason)
			}
		case d.usageSeen && d.completion >= r.RequestedTokens && r.RequestedTokens > 0:
			r.FinishReason = "length"
		default:
			r.FinishReason = "stop"
		}
		d.finalUsage = true
		return streamEnd{done: true}, true
	case "response.failed":
		msg := "response.failed"
		if m, ok := jsonErrorMessage(v.Get("response", "error")); ok {
			msg = m
		}
		return streamEnd{reason: ReasonStreamError, err: errors.New(msg)}, true
	case "error":
		return streamEnd{reason: ReasonStreamError, err: errors.New(typedErrorMessage(v))}, true
	}
	return streamEnd{}, false
}

// eventType is the "type" of a typed API's event (Responses, Messages);
// stop is set, with the failure, when v is not an object with a type.
func eventType(v *fastjson.Value) ([]byte, streamEnd, bool) {
	if v.Type() != fastjson.TypeObject {
		end, stop := malformedChunk("event is a JSON %s, not an object", v.Type())
		return nil, end, stop
	}
	typ := v.GetStringBytes("type")
	if len(typ) == 0 {
		end, stop := malformedChunk("event has no type: %q", clipForErr(v.MarshalTo(nil)))
		return nil, end, stop
	}
	return typ, streamEnd{}, false
}

// deltaText handles a delta event whose text is the string dv: an output
// chunk of kind k when the text is not empty.
func (d *streamDecoder) deltaText(dv *fastjson.Value, k ChunkKind, at time.Time) (streamEnd, bool) {
	text, ok := jsonOptString(dv)
	if !ok {
		return malformedChunk("delta is a %s, not a string", dv.Type())
	}
	if len(text) == 0 {
		return streamEnd{}, false
	}
	if !utf8.Valid(text) {
		return malformedChunk("generated text is not valid UTF-8: %q", clipForErr(text))
	}
	if k == ChunkContent && d.keepText {
		if end, stop := d.keep(text); stop {
			return end, stop
		}
	}
	d.output(k, at)
	if want := d.res.RequestedTokens; want > 0 && d.outChunks > want {
		return streamEnd{reason: ReasonTooManyTokens, err: tooManyTokens(d.outChunks, want)}, true
	}
	return streamEnd{}, false
}

// typedErrorMessage is the text of an error event: "type: message", from the
// event itself ({"type":"error","code":…,"message":…}) or its "error" object
// (Anthropic's {"type":"error","error":{"type":"overloaded_error",…}}).
func typedErrorMessage(v *fastjson.Value) string {
	e := v
	if inner := v.Get("error"); inner != nil && inner.Type() == fastjson.TypeObject {
		e = inner
	}
	msg := string(e.GetStringBytes("message"))
	kind := string(e.GetStringBytes("code"))
	if t := string(e.GetStringBytes("type")); t != "" && t != "error" {
		kind = t
	}
	switch {
	case kind != "" && msg != "":
		return shortenMsg(kind + ": " + msg)
	case msg != "":
		return shortenMsg(msg)
	case kind != "":
		return kind
	}
	return fmt.Sprintf("error event: %s", clipForErr(v.MarshalTo(nil)))
}

// The history as Responses input items {"role": "user"|"assistant",
// "content": …}; with tools a function_call item follows the answer and the
// new text is its function_call_output (conversation.go).

// Responses API input items and tool.
type (
	responsesMessageItem struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	responsesCallItem struct {
		Type      string `json:"type"` // function_call
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	responsesOutputItem struct {
		Type   string `json:"type"` // function_call_output
		CallID string `json:"call_id"`
		Output string `json:"output"`
	}
	responsesTool struct {
		Type        string          `json:"type"` // function
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
)

func responsesTools(tools bool) []responsesTool {
	if !tools {
		return nil
	}
	return []responsesTool{{Type: "function", Name: probeToolName, Description: probeToolDesc, Parameters: probeToolParams}}
}

// responsesInput is the history as Responses input: the prompt string alone
// on the priming turn (the cold probe's form), else a list of items.
func responsesInput(first string, steps []convStep, tools bool) any {
	if len(steps) == 0 {
		return first
	}
	items := make([]any, 0, 1+3*len(steps))
	items = append(items, responsesMessageItem{Role: "user", Content: first})
	for _, st := range steps {
		items = append(items, responsesMessageItem{Role: "assistant", Content: st.Answer})
		if !tools {
			items = append(items, responsesMessageItem{Role: "user", Content: st.New})
			continue
		}
		items = append(items,
			responsesCallItem{Type: "function_call", CallID: toolCallID(st.Turn), Name: probeToolName, Arguments: toolCallArgs(st.Turn)},
			responsesOutputItem{Type: "function_call_output", CallID: toolCallID(st.Turn), Output: st.New})
	}
	return items
}

func responsesToolChoice(tools bool) string {
	if !tools {
		return ""
	}
	return "none"
}

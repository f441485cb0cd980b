package vllmsim

// This file holds the two APIs whose streams are typed events rather than
// chat chunks: the OpenAI Responses API (POST /v1/responses) and the
// Anthropic Messages API (POST /v1/messages), as vLLM serves them. Both go
// through the chat template (they are chat requests in another dress); only
// the wire format differs.
//
// Responses stream: response.created, response.in_progress,
// response.output_item.added and response.content_part.added, written with
// the first token (as vLLM writes the role chunk); then one
// response.output_text.delta (response.reasoning_text.delta for reasoning
// tokens) per chunk; then response.output_text.done, response.content_part.done,
// response.output_item.done and response.completed (status "incomplete"
// when max_output_tokens cut the answer), whose response carries usage and,
// with EnablePerRequestMetrics, the event carries vLLM's metrics object. No
// [DONE]. An error is `event: error` {"type":"error","code","message"}.
//
// Messages stream: message_start (usage.input_tokens), content_block_start
// and a ping with the first token; one content_block_delta (text_delta, or
// thinking_delta for reasoning) per chunk; then content_block_stop,
// message_delta (stop_reason end_turn or max_tokens; usage with input_tokens,
// with EnablePromptTokensDetails cache_read_input_tokens apart from them as
// Anthropic counts, and output_tokens) and message_stop. An error is `event: error` {"type":"error","error":
// {"type":"api_error","message"}}.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// apiFormat is the wire format of a generation response.
type apiFormat int

const (
	formatChat apiFormat = iota
	formatCompletions
	formatResponses
	formatMessages
)

func (f apiFormat) typed() bool { return f == formatResponses || f == formatMessages }

// Wire types of the typed APIs' requests.
type (
	responsesWire struct {
		Model           string          `json:"model"`
		Input           json.RawMessage `json:"input"`
		Instructions    string          `json:"instructions"`
		Tools           json.RawMessage `json:"tools"`
		MaxOutputTokens *int            `json:"max_output_tokens"`
		Stream          bool            `json:"stream"`
		MinTokens       *int            `json:"min_tokens"`
		IgnoreEOS       bool            `json:"ignore_eos"`
		CacheSalt       *string         `json:"cache_salt"`
	}
	messagesWire struct {
		Model     string             `json:"model"`
		MaxTokens *int               `json:"max_tokens"`
		Messages  []anthropicMessage `json:"messages"`
		System    json.RawMessage    `json:"system"`
		Tools     json.RawMessage    `json:"tools"`
		Stream    bool               `json:"stream"`
	}
)

// responsesRequest turns a Responses request into the chat request it is:
// instructions as a system message, input a string (one user message) or a
// list of messages. Usage is always streamed.
func responsesRequest(w *responsesWire) (*genRequest, error) {
	req := &genRequest{Model: w.Model, Stream: w.Stream, MaxTokens: w.MaxOutputTokens, MinTokens: w.MinTokens,
		IgnoreEOS: w.IgnoreEOS, CacheSalt: w.CacheSalt, StreamOptions: usageAlways(w.Stream), Tools: w.Tools}
	if w.Instructions != "" {
		b, _ := json.Marshal(w.Instructions)
		req.Messages = append(req.Messages, wireMessage{Role: "system", Content: b})
	}
	in := bytes.TrimSpace(w.Input)
	switch {
	case len(in) == 0 || string(in) == "null":
		return nil, badRequest("input", "input is required")
	case in[0] == '"':
		req.Messages = append(req.Messages, wireMessage{Role: "user", Content: in})
	default:
		msgs, err := responsesItems(in)
		if err != nil {
			return nil, err
		}
		req.Messages = append(req.Messages, msgs...)
	}
	return req, nil
}

// messagesRequest turns a Messages request into the chat request it is:
// system as a system message; max_tokens is required, as Anthropic's API has it.
func messagesRequest(w *messagesWire) (*genRequest, error) {
	if w.MaxTokens == nil {
		return nil, badRequest("max_tokens", "max_tokens is required")
	}
	req := &genRequest{Model: w.Model, Stream: w.Stream, MaxTokens: w.MaxTokens, StreamOptions: usageAlways(w.Stream), Tools: w.Tools}
	if sys := bytes.TrimSpace(w.System); len(sys) > 0 && string(sys) != "null" {
		req.Messages = append(req.Messages, wireMessage{Role: "system", Content: sys})
	}
	msgs, err := anthropicMessages(w.Messages)
	if err != nil {
		return nil, err
	}
	req.Messages = append(req.Messages, msgs...)
	return req, nil
}

// usageAlways: a typed stream always ends with its usage.
func usageAlways(stream bool) *streamOptions {
	if !stream {
		return nil
	}
	return &streamOptions{IncludeUsage: true}
}

// sseTyped appends one typed SSE event.
func sseTyped(b []byte, name string, data func(b []byte) []byte) []byte {
	b = append(b, "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: "...)
	b = data(b)
	return append(b, "\n\n"...)
}

func (s *session) seqNo() []byte {
	s.seq++
	return strconv.AppendInt(nil, int64(s.seq-1), 10)
}

// typedStart appends the framing events a typed stream opens with.
func (s *session) typedStart(b []byte) []byte {
	id := appendJSONString(nil, s.r.id)
	if s.j.format == formatMessages {
		b = sseTyped(b, "message_start", func(b []byte) []byte {
			b = append(b, `{"type":"message_start","message":{"id":`...)
			b = append(b, id...)
			b = append(b, `,"type":"message","role":"assistant","model":`...)
			b = appendJSONString(b, s.e.cfg.ModelName)
			b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":`...)
			b = s.messagesInputUsage(b)
			return append(b, `,"output_tokens":0}}}`...)
		})
		b = sseTyped(b, "content_block_start", func(b []byte) []byte {
			return append(b, `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`...)
		})
		return sseTyped(b, "ping", func(b []byte) []byte { return append(b, `{"type":"ping"}`...) })
	}
	resp := func(b []byte, status string) []byte {
		b = append(b, `{"id":`...)
		b = append(b, id...)
		b = append(b, `,"object":"response","created_at":`...)
		b = strconv.AppendInt(b, s.j.created, 10)
		b = append(b, `,"model":`...)
		b = appendJSONString(b, s.e.cfg.ModelName)
		return append(b, `,"status":"`+status+`","output":[]}`...)
	}
	b = sseTyped(b, "response.created", func(b []byte) []byte {
		b = append(b, `{"type":"response.created","sequence_number":`...)
		b = append(b, s.seqNo()...)
		return append(resp(append(b, `,"response":`...), "in_progress"), '}')
	})
	b = sseTyped(b, "response.in_progress", func(b []byte) []byte {
		b = append(b, `{"type":"response.in_progress","sequence_number":`...)
		b = append(b, s.seqNo()...)
		return append(resp(append(b, `,"response":`...), "in_progress"), '}')
	})
	b = sseTyped(b, "response.output_item.added", func(b []byte) []byte {
		b = append(b, `{"type":"response.output_item.added","sequence_number":`...)
		b = append(b, s.seqNo()...)
		return append(b, `,"output_index":0,"item":{"id":"msg_`+s.r.id+`","type":"message","status":"in_progress","role":"assistant","content":[]}}`...)
	})
	return sseTyped(b, "response.content_part.added", func(b []byte) []byte {
		b = append(b, `{"type":"response.content_part.added","sequence_number":`...)
		b = append(b, s.seqNo()...)
		return append(b, `,"item_id":"msg_`+s.r.id+`","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`...)
	})
}

// messagesInputUsage appends `{"input_tokens":N` and, with
// EnablePromptTokensDetails, `,"cache_read_input_tokens":C`: Anthropic counts
// the tokens read from the prompt cache apart from input_tokens.
func (s *session) messagesInputUsage(b []byte) []byte {
	cached := 0
	if s.e.cfg.EnablePromptTokensDetails {
		cached = s.cachedTokens()
	}
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(s.r.promptTokens-cached), 10)
	if s.e.cfg.EnablePromptTokensDetails {
		b = append(b, `,"cache_read_input_tokens":`...)
		b = strconv.AppendInt(b, int64(cached), 10)
	}
	return b
}

// typedDelta appends the delta event of one chunk's text, reasoning or not.
func (s *session) typedDelta(b []byte, text []byte, reasoning bool) []byte {
	if s.j.format == formatMessages {
		return sseTyped(b, "content_block_delta", func(b []byte) []byte {
			if reasoning {
				b = append(b, `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":`...)
			} else {
				b = append(b, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`...)
			}
			b = appendJSONString(b, string(text))
			return append(b, "}}"...)
		})
	}
	name := "response.output_text.delta"
	if reasoning {
		name = "response.reasoning_text.delta"
	}
	return sseTyped(b, name, func(b []byte) []byte {
		b = append(b, `{"type":"`+name+`","sequence_number":`...)
		b = append(b, s.seqNo()...)
		b = append(b, `,"item_id":"msg_`+s.r.id+`","output_index":0,"content_index":0,"delta":`...)
		b = appendJSONString(b, string(text))
		return append(b, '}')
	})
}

// typedEnd appends the events that end a typed stream: its usage (unless
// the omit_usage fault drops it) and, on Responses, vLLM's metrics.
func (s *session) typedEnd(b []byte, reason string) []byte {
	usage := s.r.fault.name != FaultOmitUsage
	if s.j.format == formatMessages {
		stop := "end_turn"
		if reason == "length" {
			stop = "max_tokens"
		}
		b = sseTyped(b, "content_block_stop", func(b []byte) []byte { return append(b, `{"type":"content_block_stop","index":0}`...) })
		b = sseTyped(b, "message_delta", func(b []byte) []byte {
			b = append(b, `{"type":"message_delta","delta":{"stop_reason":"`+stop+`","stop_sequence":null}`...)
			if usage {
				// The final counts: message_start may go out before admission
				// (RoleChunkEarly), when the prompt-cache hit is not known yet.
				b = append(b, `,"usage":`...)
				b = s.messagesInputUsage(b)
				b = append(b, `,"output_tokens":`...)
				b = strconv.AppendInt(b, int64(s.written), 10)
				b = append(b, '}')
			}
			return append(b, '}')
		})
		return sseTyped(b, "message_stop", func(b []byte) []byte { return append(b, `{"type":"message_stop"}`...) })
	}
	b = sseTyped(b, "response.output_text.done", func(b []byte) []byte {
		b = append(b, `{"type":"response.output_text.done","sequence_number":`...)
		b = append(b, s.seqNo()...)
		return append(b, `,"item_id":"msg_`+s.r.id+`","output_index":0,"content_index":0}`...)
	})
	b = sseTyped(b, "response.output_item.done", func(b []byte) []byte {
		b = append(b, `{"type":"response.output_item.done","sequence_number":`...)
		b = append(b, s.seqNo()...)
		return append(b, `,"output_index":0,"item":{"id":"msg_`+s.r.id+`","type":"message","status":"completed","role":"assistant"}}`...)
	})
	status, name := "completed", "response.completed"
	if reason == "length" {
		status, name = "incomplete", "response.incomplete"
	}
	return sseTyped(b, name, func(b []byte) []byte {
		b = append(b, `{"type":"`+name+`","sequence_number":`...)
		b = append(b, s.seqNo()...)
		b = append(b, `,"response":{"id":`...)
		b = appendJSONString(b, s.r.id)
		b = append(b, `,"object":"response","status":"`+status+`"`...)
		if status == "incomplete" {
			b = append(b, `,"incomplete_details":{"reason":"max_output_tokens"}`...)
		}
		if usage {
			b = append(b, `,"usage":{"input_tokens":`...)
			b = strconv.AppendInt(b, int64(s.r.promptTokens), 10)
			b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
			b = strconv.AppendInt(b, int64(s.cachedTokens()), 10)
			b = append(b, `},"output_tokens":`...)
			b = strconv.AppendInt(b, int64(s.written), 10)
			b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
			b = strconv.AppendInt(b, int64(s.reasoningSent), 10)
			b = append(b, `},"total_tokens":`...)
			b = strconv.AppendInt(b, int64(s.r.promptTokens+s.written), 10)
			b = append(b, '}')
		}
		b = append(b, '}')
		if usage && s.sendsMetrics() {
			b = s.appendPerRequestMetrics(b, s.written)
		}
		return append(b, '}')
	})
}

// typedError appends an API's error event.
func (s *session) typedError(b []byte, status int, msg string) []byte {
	return sseTyped(b, "error", func(b []byte) []byte {
		if s.j.format == formatMessages {
			kind := "api_error"
			if status == http.StatusServiceUnavailable {
				kind = "overloaded_error"
			}
			b = append(b, `{"type":"error","error":{"type":"`+kind+`","message":`...)
			b = appendJSONString(b, msg)
			return append(b, "}}"...)
		}
		b = append(b, `{"type":"error","code":"server_error","message":`...)
		b = appendJSONString(b, msg)
		b = append(b, `,"sequence_number":`...)
		b = append(b, s.seqNo()...)
		return append(b, '}')
	})
}

// typedBody is a non-streaming typed response.
func (s *session) typedBody(reasoning, content string, reason string, avail int) map[string]any {
	usage := s.r.fault.name != FaultOmitUsage
	if s.j.format == formatMessages {
		stop := "end_turn"
		if reason == "length" {
			stop = "max_tokens"
		}
		blocks := []any{}
		if reasoning != "" {
			blocks = append(blocks, map[string]any{"type": "thinking", "thinking": reasoning})
		}
		blocks = append(blocks, map[string]any{"type": "text", "text": content})
		out := map[string]any{"id": s.r.id, "type": "message", "role": "assistant", "model": s.e.cfg.ModelName,
			"content": blocks, "stop_reason": stop, "stop_sequence": nil}
		if usage {
			u := map[string]any{"input_tokens": s.r.promptTokens, "output_tokens": avail}
			if s.e.cfg.EnablePromptTokensDetails {
				cached := s.cachedTokens()
				u["input_tokens"], u["cache_read_input_tokens"] = s.r.promptTokens-cached, cached
			}
			out["usage"] = u
		}
		return out
	}
	status := "completed"
	if reason == "length" {
		status = "incomplete"
	}
	out := map[string]any{"id": s.r.id, "object": "response", "created_at": s.j.created, "model": s.e.cfg.ModelName,
		"status": status, "output": []any{map[string]any{"type": "message", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": content, "annotations": []any{}}}}}}
	if usage {
		out["usage"] = map[string]any{"input_tokens": s.r.promptTokens, "output_tokens": avail,
			"input_tokens_details": map[string]any{"cached_tokens": s.cachedTokens()}, "total_tokens": s.r.promptTokens + avail}
		if s.sendsMetrics() {
			out["metrics"] = perRequestMetrics(s.r.trace.snapshot(), avail)
		}
	}
	return out
}

// handleTyped reads a Responses or Messages request and serves it as the
// chat request it is.
func (e *Engine) handleTyped(w http.ResponseWriter, hr *http.Request, f apiFormat) {
	arrived := time.Now()
	var req *genRequest
	var err error
	if f == formatResponses {
		var rw responsesWire
		if err = readBody(w, hr, &rw); err == nil {
			req, err = responsesRequest(&rw)
		}
	} else {
		var mw messagesWire
		if err = readBody(w, hr, &mw); err == nil {
			req, err = messagesRequest(&mw)
		}
	}
	e.generate(w, hr, arrived, time.Now(), req, f, err)
}

package prober

// This file holds the OpenAI chat completions API (POST /v1/chat/completions):
// its request with vLLM's extensions, its /tokenize form, and the decoding of
// its stream of chunks, which the completions API (api_completions.go)
// shares.

import (
	"encoding/json"
	"errors"
	"time"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
	"github.com/valyala/fastjson"
)

// APIChat is POST /v1/chat/completions.
const APIChat API = "chat"

func init() { registerAPI(APIChat, chatAPI{}) }

type chatAPI struct{}

func (chatAPI) info() apiInfo {
	return apiInfo{order: 10, path: "/v1/chat/completions", tools: true, cacheSalt: true}
}

// The request body is go-openai's request type embedded in a struct of our
// own that adds the vLLM extensions go-openai lacks. encoding/json promotes
// the embedded fields, and a field at depth 0 wins over one with the same JSON
// name at depth 1, which is how stream_options is shadowed.

// vllmStreamOptions replaces go-openai's StreamOptions, which has no
// continuous_usage_stats.
type vllmStreamOptions struct {
	IncludeUsage         bool `json:"include_usage"`
	ContinuousUsageStats bool `json:"continuous_usage_stats,omitempty"`
}

// streamOptions asks a streaming request for usage on every chunk.
func streamOptions(r requestSpec) *vllmStreamOptions {
	if !r.Stream {
		return nil
	}
	return &vllmStreamOptions{IncludeUsage: true, ContinuousUsageStats: true}
}

// vllmChatRequest is a chat completion request with vLLM's extensions.
type vllmChatRequest struct {
	openai.ChatCompletionRequest
	// Messages shadows the embedded request's: chatMessage always writes
	// its content, "" included (conversation.go).
	Messages      []chatMessage      `json:"messages"`
	StreamOptions *vllmStreamOptions `json:"stream_options,omitempty"`
	MinTokens     int                `json:"min_tokens,omitempty"`
	IgnoreEOS     bool               `json:"ignore_eos,omitempty"`
	CacheSalt     string             `json:"cache_salt,omitempty"`
	// IncludeMetrics asks vLLM for its per-request `metrics` object.
	IncludeMetrics bool `json:"include_metrics,omitempty"`
}

// tokenizeChatRequest is vLLM's POST /tokenize chat form; the server applies
// the chat template, so the count matches the real request's prompt_tokens.
type tokenizeChatRequest struct {
	Model               string        `json:"model"`
	Messages            []chatMessage `json:"messages"`
	AddGenerationPrompt bool          `json:"add_generation_prompt"`
	Tools               []openai.Tool `json:"tools,omitempty"`
}

func (chatAPI) marshal(r requestSpec) ([]byte, error) {
	return json.Marshal(vllmChatRequest{
		ChatCompletionRequest: openai.ChatCompletionRequest{
			Model:      r.Model,
			MaxTokens:  r.MaxTokens,
			Stream:     r.Stream,
			Tools:      chatTools(r.Tools),
			ToolChoice: chatToolChoice(r.Tools),
		},
		Messages:      chatMessages(r.Prompt, r.Steps, r.Tools),
		StreamOptions: streamOptions(r),
		MinTokens:     r.MinTokens,
		IgnoreEOS:     r.MinTokens > 0,
		CacheSalt:     r.CacheSalt,

		IncludeMetrics: r.IncludeMetrics,
	})
}

func (chatAPI) tokenize(r requestSpec) ([]byte, error) {
	return json.Marshal(tokenizeChatRequest{
		Model:               r.Model,
		Messages:            chatMessages(r.Prompt, r.Steps, r.Tools),
		AddGenerationPrompt: true,
		Tools:               chatTools(r.Tools),
	})
}

func (chatAPI) event(d *streamDecoder, v *fastjson.Value, at time.Time) (streamEnd, bool) {
	return d.chunk(v, at, false)
}

func (chatAPI) errorText(v *fastjson.Value) string { return openAIErrorText(v) }

// openAIErrorText is the message of an `event: error`'s data in the chat
// and completions streams: its error object's, else its "message".
func openAIErrorText(v *fastjson.Value) string {
	if m, ok := jsonErrorMessage(v.Get("error")); ok {
		return m
	}
	return string(v.GetStringBytes("message"))
}

// chunk handles one parsed chunk of a chat or completions stream. textFirst
// (completions) reads choices[0].text before a delta; chat reads the delta
// first.
//
// Lookups are tuned for fastjson, whose Get finds a present key in one scan
// but, for an absent key, unescapes every key of the object and scans twice.
// The top-level object is walked once with Visit (the "error" key is absent
// from all but one chunk), the choice object, whose keys are present, uses
// Get, and the small delta and usage objects, where most keys asked for are
// absent, are walked with Visit.
func (d *streamDecoder) chunk(v *fastjson.Value, at time.Time, textFirst bool) (streamEnd, bool) {
	obj, err := v.Object()
	if err != nil {
		return malformedChunk("chunk is a JSON %s, not an object", v.Type())
	}
	var errV, idV, choicesV, usageV, metricsV, timingsV *fastjson.Value
	obj.Visit(func(k []byte, x *fastjson.Value) {
		switch string(k) {
		case "error":
			errV = x
		case "id":
			idV = x
		case "choices":
			choicesV = x
		case "usage":
			usageV = x
		case "metrics":
			metricsV = x
		case "timings":
			timingsV = x
		}
	})
	if m, ok := jsonErrorMessage(errV); ok {
		return streamEnd{reason: ReasonStreamError, err: errors.New(m)}, true
	}
	r := d.res
	if r.ResponseID == "" && idV != nil {
		if b, _ := idV.StringBytes(); len(b) > 0 {
			r.ResponseID = string(b)
		}
	}

	var content, reasoning []byte
	var tool, hasChoices bool
	if !isNull(choicesV) {
		arr, err := choicesV.Array()
		if err != nil {
			return malformedChunk("choices is a %s, not an array", choicesV.Type())
		}
		if len(arr) > 0 {
			hasChoices = true
			co, err := arr[0].Object()
			if err != nil {
				return malformedChunk("choices[0] is a %s, not an object", arr[0].Type())
			}
			var deltaV, textV *fastjson.Value
			if textFirst {
				if textV = co.Get("text"); textV == nil {
					deltaV = co.Get("delta")
				}
			} else if deltaV = co.Get("delta"); deltaV == nil {
				textV = co.Get("text")
			}
			var ok bool
			if !isNull(deltaV) {
				do, err := deltaV.Object()
				if err != nil {
					return malformedChunk("delta is a %s, not an object", deltaV.Type())
				}
				var contentV, reasoningV, reasoningContentV, toolV *fastjson.Value
				do.Visit(func(k []byte, x *fastjson.Value) {
					switch string(k) {
					case "content":
						contentV = x
					case "reasoning":
						reasoningV = x
					case "reasoning_content":
						reasoningContentV = x
					case "tool_calls", "function_call":
						if jsonNonEmpty(x) {
							toolV = x
						}
					}
				})
				if content, ok = jsonOptString(contentV); !ok {
					return malformedChunk("delta.content is a %s, not a string", contentV.Type())
				}
				if reasoning, ok = jsonOptString(reasoningContentV); !ok {
					return malformedChunk("delta.reasoning_content is a %s, not a string", reasoningContentV.Type())
				}
				if len(reasoning) == 0 {
					if reasoning, ok = jsonOptString(reasoningV); !ok {
						return malformedChunk("delta.reasoning is a %s, not a string", reasoningV.Type())
					}
				}
				tool = toolV != nil
			}
			if len(content) == 0 {
				if content, ok = jsonOptString(textV); !ok {
					return malformedChunk("choices[0].text is a %s, not a string", textV.Type())
				}
			}
			if finishV := co.Get("finish_reason"); finishV != nil && finishV.Type() == fastjson.TypeString {
				if b, _ := finishV.StringBytes(); r.FinishReason != string(b) {
					r.FinishReason = string(b)
				}
			}
		}
	}

	hasUsage := false
	if !isNull(usageV) {
		uo, err := usageV.Object()
		if err != nil {
			return malformedChunk("usage is a %s, not an object", usageV.Type())
		}
		var ctV, ptV, detV *fastjson.Value
		uo.Visit(func(k []byte, x *fastjson.Value) {
			switch string(k) {
			case "completion_tokens":
				ctV = x
			case "prompt_tokens":
				ptV = x
			case "prompt_tokens_details":
				detV = x
			}
		})
		ct, ok := jsonCount(ctV)
		if !ok {
			return malformedChunk("usage.completion_tokens is missing or not a count")
		}
		if ct < d.completion {
			return malformedChunk("usage.completion_tokens went back from %d to %d", d.completion, ct)
		}
		if pt, ok := jsonCount(ptV); ok {
			r.PromptTokens = pt
		}
		if detV != nil && detV.Type() == fastjson.TypeObject {
			if n, ok := jsonCount(detV.Get("cached_tokens")); ok {
				r.CachedTokens, r.CachedReported = n, true
			}
		}
		hasUsage = true
		d.usageSeen = true
		d.completion = ct
		if !hasChoices {
			d.finalUsage = true
		}
	}

	// The engine's own timing of the request: vLLM's per-request metrics
	// (on the final usage chunk) or llama.cpp's timings. A later report
	// replaces an earlier one; a malformed one is ignored, as it is not
	// what the probe measures.
	if metricsV != nil {
		if e, ok := vllmMetrics(metricsV); ok {
			r.Engine = e
		}
	}
	if timingsV != nil {
		if e, ok := llamaTimings(timingsV); ok {
			r.Engine = e
		}
		// llama.cpp's server counts the prompt tokens it took from its cache
		// there (cache_n); usage's cached_tokens, where also sent, wins.
		if timingsV.Type() == fastjson.TypeObject && !r.CachedReported {
			if n, ok := jsonCount(timingsV.Get("cache_n")); ok {
				r.CachedTokens, r.CachedReported = n, true
			}
		}
	}
	if sd, ok := specDecodeOf(metricsV, timingsV); ok {
		r.SpecDecode = sd
	}

	if !utf8.Valid(content) || !utf8.Valid(reasoning) {
		return malformedChunk("generated text is not valid UTF-8: %q", clipForErr(append(content, reasoning...)))
	}
	if len(content) > 0 && d.keepText {
		if end, stop := d.keep(content); stop {
			return end, stop
		}
	}
	if len(content) > 0 || len(reasoning) > 0 || tool {
		first := r.FirstToken.IsZero()
		switch {
		case len(content) > 0:
			d.output(ChunkContent, at)
		case len(reasoning) > 0:
			d.output(ChunkReasoning, at)
		default:
			d.output(ChunkToolCall, at)
		}
		if first && hasUsage {
			r.FirstChunkTokens = d.completion
		}
		if hasUsage {
			d.outWithUsage++
			r.ChunkTokens = append(r.ChunkTokens, int32(d.completion-d.atLastOutput))
			d.atLastOutput = d.completion
		}
	}
	// A server that ignores max_tokens could stream forever: stop as soon
	// as it is certain (every output chunk carries at least one token).
	if want := r.RequestedTokens; want > 0 && (d.completion > want || d.outChunks > want) {
		return streamEnd{reason: ReasonTooManyTokens, err: tooManyTokens(max(d.completion, d.outChunks), want)}, true
	}
	return streamEnd{}, false
}

// The history as chat messages: user, assistant, user, assistant, user…;
// with tools the assistant message also carries tool_calls and the new text
// is a {"role": "tool", "tool_call_id": …} message (conversation.go).

// chatTools is the tool definition in the chat form.
func chatTools(tools bool) []openai.Tool {
	if !tools {
		return nil
	}
	return []openai.Tool{{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
		Name: probeToolName, Description: probeToolDesc, Parameters: probeToolParams}}}
}

// chatToolChoice is "none" with tools: the definitions are in the prompt
// (vLLM keeps them there unless started with
// --exclude-tools-when-tool-choice-none), but the server parses no tool
// call out of the answer, so whatever the model generates streams as content
// and is replayed exactly as generated. The Messages request leaves
// tool_choice out (auto): not every server that serves it takes "none".
func chatToolChoice(tools bool) any {
	if !tools {
		return nil
	}
	return "none"
}

// chatMessage is one chat message. Unlike go-openai's, it writes its
// content when empty: an assistant message replaying an empty answer (the
// step calibration's, or a reasoning model's that streamed no content) is
// {"role": "assistant", "content": ""}, which servers take; without the
// key Ollama refuses it ("invalid message content type: <nil>").
type chatMessage struct {
	Role       string            `json:"role"`
	Content    string            `json:"content"`
	ToolCalls  []openai.ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
}

// chatMessages is the history as chat messages.
func chatMessages(first string, steps []convStep, tools bool) []chatMessage {
	msgs := make([]chatMessage, 0, 1+2*len(steps))
	msgs = append(msgs, chatMessage{Role: openai.ChatMessageRoleUser, Content: first})
	for _, st := range steps {
		a := chatMessage{Role: openai.ChatMessageRoleAssistant, Content: st.Answer}
		if !tools {
			msgs = append(msgs, a, chatMessage{Role: openai.ChatMessageRoleUser, Content: st.New})
			continue
		}
		a.ToolCalls = []openai.ToolCall{{ID: toolCallID(st.Turn), Type: openai.ToolTypeFunction,
			Function: openai.FunctionCall{Name: probeToolName, Arguments: toolCallArgs(st.Turn)}}}
		msgs = append(msgs, a, chatMessage{Role: openai.ChatMessageRoleTool, Content: st.New, ToolCallID: toolCallID(st.Turn)})
	}
	return msgs
}

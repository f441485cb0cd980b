package prober

// This file holds the request bodies of the chat and completions APIs, and the
// tokenizer requests that calibration sends.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

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

// vllmCompletionRequest is a (legacy) completion request with vLLM's extensions.
type vllmCompletionRequest struct {
	openai.CompletionRequest
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

// tokenizeCompletionRequest is vLLM's POST /tokenize prompt form.
type tokenizeCompletionRequest struct {
	Model  string `json:"model"`
	Prompt string `json:"prompt"`
}

// apiPath is the endpoint of an API.
func apiPath(api API) string {
	switch api {
	case APICompletions:
		return "/v1/completions"
	case APIResponses:
		return "/v1/responses"
	case APIMessages:
		return "/v1/messages"
	}
	return "/v1/chat/completions"
}

// requestSpec is what a request body is built from.
type requestSpec struct {
	API       API
	Model     string
	Prompt    string
	MaxTokens int
	MinTokens int  // forced output length; 0 omits min_tokens and ignore_eos
	Stream    bool // streaming with continuous usage
	CacheSalt string
	// A conversation's follow-up: the history after Prompt (conversation.go),
	// and the tool definitions of conversation.tools.
	Steps []convStep
	Tools bool
	// IncludeMetrics sets include_metrics (chat and completions only).
	IncludeMetrics bool
}

// marshalRequest encodes a probe or calibration request.
func marshalRequest(r requestSpec) ([]byte, error) {
	var opts *vllmStreamOptions
	if r.Stream {
		opts = &vllmStreamOptions{IncludeUsage: true, ContinuousUsageStats: true}
	}
	forced := r.MinTokens > 0
	switch r.API {
	case APIResponses:
		return marshalResponsesRequest(r)
	case APIMessages:
		return marshalMessagesRequest(r)
	}
	if r.API == APICompletions {
		if r.Tools {
			return nil, fmt.Errorf("conversation.tools: the completions API has no tool calls; expected chat, responses or messages")
		}
		return json.Marshal(vllmCompletionRequest{
			CompletionRequest: openai.CompletionRequest{
				Model:     r.Model,
				Prompt:    completionPromptText(r.Prompt, r.Steps),
				MaxTokens: r.MaxTokens,
				Stream:    r.Stream,
			},
			StreamOptions: opts,
			MinTokens:     r.MinTokens,
			IgnoreEOS:     forced,
			CacheSalt:     r.CacheSalt,

			IncludeMetrics: r.IncludeMetrics,
		})
	}
	return json.Marshal(vllmChatRequest{
		ChatCompletionRequest: openai.ChatCompletionRequest{
			Model:      r.Model,
			MaxTokens:  r.MaxTokens,
			Stream:     r.Stream,
			Tools:      chatTools(r.Tools),
			ToolChoice: chatToolChoice(r.Tools),
		},
		Messages:      chatMessages(r.Prompt, r.Steps, r.Tools),
		StreamOptions: opts,
		MinTokens:     r.MinTokens,
		IgnoreEOS:     forced,
		CacheSalt:     r.CacheSalt,

		IncludeMetrics: r.IncludeMetrics,
	})
}

// marshalTokenize encodes a /tokenize request for the prompt of r in the
// API's prompt form (completions: the prompt string; else chat messages).
func marshalTokenize(r requestSpec) ([]byte, error) {
	if r.API == APICompletions {
		return json.Marshal(tokenizeCompletionRequest{Model: r.Model, Prompt: completionPromptText(r.Prompt, r.Steps)})
	}
	return json.Marshal(tokenizeChatRequest{
		Model:               r.Model,
		Messages:            chatMessages(r.Prompt, r.Steps, r.Tools),
		AddGenerationPrompt: true,
		Tools:               chatTools(r.Tools),
	})
}

// Placeholders marshalled in place of the per-request nonce and salt, then
// cut out. They contain nothing JSON escapes, and neither do real nonces
// (digits and dashes) or salts (hex), so splicing raw bytes is exact.
const (
	nonceMark = "SLAPROBE-NONCE-PLACEHOLDER"
	saltMark  = "SLAPROBE-SALT-PLACEHOLDER"
)

// bodyTemplate is a request body encoded once, split around the nonce and the
// salt: body = pre + nonce + mid + salt + tail. A prompt can be 400 KB, so Run
// never re-encodes it; it only streams the shared, read-only segments with the
// two short per-request strings between them.
type bodyTemplate struct {
	pre, mid, tail []byte
	noSalt         bool // the API has no cache_salt: body = pre + nonce + mid
}

// newBodyTemplate encodes a streaming probe request for words words of body
// (with the conversation.tools definitions when tools is set), asking for
// vLLM's per-request metrics when includeMetrics is set and the API is chat
// or completions.
func newBodyTemplate(api API, model string, words, outputTokens int, tools, includeMetrics bool) (*bodyTemplate, error) {
	b, err := marshalRequest(requestSpec{
		API:            api,
		Model:          model,
		Prompt:         promptText(nonceMark, bodyWords(words)),
		MaxTokens:      outputTokens,
		MinTokens:      outputTokens,
		Stream:         true,
		CacheSalt:      saltMark,
		Tools:          tools,
		IncludeMetrics: includeMetrics && (api == APIChat || api == APICompletions),
	})
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	salts := bytes.Count(b, []byte(saltMark))
	if bytes.Count(b, []byte(nonceMark)) != 1 || salts > 1 || (salts == 0 && apiHasCacheSalt(api)) {
		return nil, fmt.Errorf("encode request: model name %q clashes with the body placeholders", model)
	}
	n := bytes.Index(b, []byte(nonceMark))
	if salts == 0 { // an API without cache_salt: the nonce alone keeps the prompt cold
		return &bodyTemplate{pre: b[:n], mid: b[n+len(nonceMark):], noSalt: true}, nil
	}
	s := bytes.Index(b, []byte(saltMark))
	if n > s {
		return nil, fmt.Errorf("encode request: cache_salt encoded before the prompt")
	}
	return &bodyTemplate{
		pre:  b[:n],
		mid:  b[n+len(nonceMark) : s],
		tail: b[s+len(saltMark):],
	}, nil
}

// literalBody is a body encoded whole (a conversation's follow-up, built as
// it is sent): reader and size take "" for the nonce and salt.
func literalBody(b []byte) *bodyTemplate { return &bodyTemplate{pre: b, noSalt: true} }

// apiHasCacheSalt reports whether the API's request has vLLM's cache_salt.
func apiHasCacheSalt(api API) bool { return api != APIMessages }

// size is the body length for a nonce and salt.
func (t *bodyTemplate) size(nonce, salt string) int64 {
	if t.noSalt {
		salt = ""
	}
	return int64(len(t.pre) + len(nonce) + len(t.mid) + len(salt) + len(t.tail))
}

// reader streams the body without copying the shared segments.
func (t *bodyTemplate) reader(nonce, salt string) io.Reader {
	if t.noSalt {
		salt = ""
	}
	return io.MultiReader(bytes.NewReader(t.pre), strings.NewReader(nonce),
		bytes.NewReader(t.mid), strings.NewReader(salt), bytes.NewReader(t.tail))
}

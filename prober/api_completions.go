package prober

// This file holds the OpenAI (legacy) completions API (POST /v1/completions):
// one prompt string, a conversation's history concatenated into it
// (completionPromptText), no tool calls. Its stream is chat's chunks with
// choices[0].text (api_chat.go).

import (
	"encoding/json"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/valyala/fastjson"
)

// APICompletions is POST /v1/completions.
const APICompletions API = "completions"

func init() { registerAPI(APICompletions, completionsAPI{}) }

type completionsAPI struct{}

func (completionsAPI) info() apiInfo {
	return apiInfo{order: 20, path: "/v1/completions", cacheSalt: true}
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

// tokenizeCompletionRequest is vLLM's POST /tokenize prompt form.
type tokenizeCompletionRequest struct {
	Model  string `json:"model"`
	Prompt string `json:"prompt"`
}

func (completionsAPI) marshal(r requestSpec) ([]byte, error) {
	return json.Marshal(vllmCompletionRequest{
		CompletionRequest: openai.CompletionRequest{
			Model:     r.Model,
			Prompt:    completionPromptText(r.Prompt, r.Steps),
			MaxTokens: r.MaxTokens,
			Stream:    r.Stream,
		},
		StreamOptions: streamOptions(r),
		MinTokens:     r.MinTokens,
		IgnoreEOS:     r.MinTokens > 0,
		CacheSalt:     r.CacheSalt,

		IncludeMetrics: r.IncludeMetrics,
	})
}

func (completionsAPI) tokenize(r requestSpec) ([]byte, error) {
	return json.Marshal(tokenizeCompletionRequest{Model: r.Model, Prompt: completionPromptText(r.Prompt, r.Steps)})
}

func (completionsAPI) event(d *streamDecoder, v *fastjson.Value, at time.Time) (streamEnd, bool) {
	return d.chunk(v, at, true)
}

func (completionsAPI) errorText(v *fastjson.Value) string { return openAIErrorText(v) }

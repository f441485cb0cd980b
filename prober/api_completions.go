package prober

// This file holds the OpenAI (legacy) completions API (POST /v1/completions):
// one prompt string, a conversation's history concatenated into it
// (completionPromptText), no tool calls. Its stream is chat's chunks with
// choices[0].text (api_chat.go).

import (
	"encoding/json"
	"strings"
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

// The history as one completions prompt: the plain concatenation of the
// texts, each new text between blank lines (no tools: conversation.tools is
// refused there).

// completionSep frames a completions follow-up's new text, so that neither
// the answer before it nor the answer after it runs into its words.
const completionSep = "\n\n"

// completionPromptText is the history as one completions prompt: the
// priming prompt, then per step the answer, the new text between two
// completionSep.
func completionPromptText(first string, steps []convStep) string {
	if len(steps) == 0 {
		return first
	}
	var b strings.Builder
	b.WriteString(first)
	for _, st := range steps {
		b.WriteString(st.Answer)
		b.WriteString(completionSep)
		b.WriteString(st.New)
		b.WriteString(completionSep)
	}
	return b.String()
}

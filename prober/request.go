package prober

// This file holds what a request body is built from (requestSpec), its
// encoding in the API's form (each API's own in api_<name>.go), and the body
// template a probe streams.

import (
	"bytes"
	"fmt"
	"io"
	"strings"
)

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
	// IncludeMetrics asks for vLLM's per-request metrics (include_metrics),
	// on the APIs whose request has the field.
	IncludeMetrics bool
}

// marshalRequest encodes a probe or calibration request in r.API's form.
func marshalRequest(r requestSpec) ([]byte, error) {
	e, ok := apiOf(r.API)
	if !ok {
		return nil, fmt.Errorf("api=%q; expected %s", r.API, APIList())
	}
	if r.Tools && !e.tools {
		return nil, fmt.Errorf("conversation.tools: the %s API has no tool calls; expected %s", r.API, toolAPIList())
	}
	return e.kind.marshal(r)
}

// marshalTokenize encodes a /tokenize request for the prompt of r in the
// API's prompt form; errNoTokenize for an API /tokenize has no form for.
func marshalTokenize(r requestSpec) ([]byte, error) {
	e, ok := apiOf(r.API)
	if !ok {
		return nil, fmt.Errorf("api=%q; expected %s", r.API, APIList())
	}
	tk, ok := e.kind.(apiTokenizer)
	if !ok {
		return nil, fmt.Errorf("%w: the %s API has no /tokenize form", errNoTokenize, r.API)
	}
	return tk.tokenize(r)
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
// vLLM's per-request metrics when includeMetrics is set and the API has
// include_metrics.
func newBodyTemplate(api API, model string, words, outputTokens int, tools, includeMetrics bool) (*bodyTemplate, error) {
	return newBodyTemplateText(api, model, bodyWords(words), outputTokens, tools, includeMetrics)
}

// newBodyTemplateText is newBodyTemplate for a prompt body already built (a calibration's words
// and fill).
func newBodyTemplateText(api API, model, text string, outputTokens int, tools, includeMetrics bool) (*bodyTemplate, error) {
	b, err := marshalRequest(requestSpec{
		API:            api,
		Model:          model,
		Prompt:         promptText(nonceMark, text),
		MaxTokens:      outputTokens,
		MinTokens:      outputTokens,
		Stream:         true,
		CacheSalt:      saltMark,
		Tools:          tools,
		IncludeMetrics: includeMetrics,
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
func apiHasCacheSalt(api API) bool {
	e, _ := apiOf(api)
	return e.cacheSalt
}

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

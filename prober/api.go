package prober

// This file holds the registry of the APIs a target can be probed on. An API
// is one file, api_<name>.go: its API constant, a type implementing apiKind
// (the request bodies, the stream's events) and an init that calls
// registerAPI. Nothing else in the prober names an API: APIs, API.Valid and
// the lists in messages and flags (APIList, APIHelp) are read from here.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fastjson"
)

// API selects the endpoint a target (or a scenario) is probed on; it is the
// `api` label of the probe metrics. Its values are the registered APIs.
type API string

// apiKind is what the prober needs to know of one API.
type apiKind interface {
	// info is the API's fixed description.
	info() apiInfo
	// marshal encodes a request for r: a streaming probe's (r.Stream) or a
	// calibration's, with a conversation's history (r.Steps, conversation.go)
	// and the tool definitions (r.Tools, asked only where info().tools). Fields
	// of r the API has no place for (CacheSalt, MinTokens, IncludeMetrics) are
	// left out.
	marshal(r requestSpec) ([]byte, error)
	// event handles one JSON value of the stream (a data: line), arrived at
	// at, and reports whether decoding stops. Text, reasoning or a tool
	// call's arguments go through d.deltaText (or d.output); usage sets
	// d.usageSeen and d.completion (the output tokens) and d.res's
	// PromptTokens, CachedTokens and CachedReported; d.res.FinishReason is
	// the OpenAI finish_reason ("stop", "length"). The end of the stream is
	// streamEnd{done: true} (with d.finalUsage when it carried the final
	// usage), an error event streamEnd{reason: ReasonStreamError}, anything
	// else malformedChunk. settle (stream.go) judges the result the same way
	// for every API.
	event(d *streamDecoder, v *fastjson.Value, at time.Time) (streamEnd, bool)
	// errorText is the message of the JSON data of an `event: error`.
	errorText(v *fastjson.Value) string
}

// apiTokenizer is an apiKind whose prompts vLLM's POST /tokenize can count.
// The prompts of an API that is not one are calibrated with its own usage
// counts: max_tokens: 1 requests, whose answer must carry usage.prompt_tokens
// or usage.input_tokens (usageCount, calibrate.go).
type apiTokenizer interface {
	// tokenize encodes r's prompt as a /tokenize request, in a form that
	// counts what the real request adds (the chat template).
	tokenize(r requestSpec) ([]byte, error)
}

// apiInfo is an API's fixed description.
type apiInfo struct {
	order       int    // its place in APIs and in every message that lists them
	path        string // the endpoint, below the target's base URL: "/v1/chat/completions"
	about       string // what --help adds after the path: "OpenAI Responses"; may be empty
	header      string // a header every request carries ("Anthropic-Version"); may be empty
	headerValue string
	tools       bool // conversation.tools: the API has tool calls
	cacheSalt   bool // the request carries vLLM's cache_salt
}

type apiEntry struct {
	apiInfo
	kind apiKind
}

// apiRegistry is one immutable state of the registry: registerAPI replaces
// it whole, so readers need no lock.
type apiRegistry struct {
	byName map[API]apiEntry
	list   []API // by order
}

var (
	apiMu  sync.Mutex // serializes registerAPI
	apiReg atomic.Pointer[apiRegistry]
)

// APIs lists every registered API in order, so counters can be initialised
// and values checked. registerAPI keeps it current; do not modify it.
var APIs []API

// registerAPI adds an API; each api_<name>.go calls it from its init. It
// panics on a programming error (an empty name, a path without a leading
// slash, a name registered twice). The function it returns removes the API
// again, for a test that registers one of its own.
func registerAPI(name API, k apiKind) (unregister func()) {
	inf := k.info()
	if name == "" || !strings.HasPrefix(inf.path, "/") {
		panic(fmt.Sprintf("registerAPI(%q): name and a path starting with / are required", name))
	}
	update := func(f func(map[API]apiEntry)) {
		apiMu.Lock()
		defer apiMu.Unlock()
		next := &apiRegistry{byName: map[API]apiEntry{}}
		if old := apiReg.Load(); old != nil {
			for n, e := range old.byName {
				next.byName[n] = e
			}
		}
		f(next.byName)
		for n := range next.byName {
			next.list = append(next.list, n)
		}
		slices.SortFunc(next.list, func(a, b API) int {
			if c := next.byName[a].order - next.byName[b].order; c != 0 {
				return c
			}
			return strings.Compare(string(a), string(b))
		})
		apiReg.Store(next)
		APIs = next.list
	}
	update(func(m map[API]apiEntry) {
		if _, dup := m[name]; dup {
			panic(fmt.Sprintf("registerAPI(%q): registered twice", name))
		}
		m[name] = apiEntry{apiInfo: inf, kind: k}
	})
	return func() { update(func(m map[API]apiEntry) { delete(m, name) }) }
}

// apiOf is the registered API a.
func apiOf(a API) (apiEntry, bool) {
	r := apiReg.Load()
	if r == nil {
		return apiEntry{}, false
	}
	e, ok := r.byName[a]
	return e, ok
}

// registeredAPIs is the list of the registry (APIs, read without a race
// with a test's registerAPI).
func registeredAPIs() []API {
	if r := apiReg.Load(); r != nil {
		return r.list
	}
	return nil
}

// Valid reports whether a is one of APIs.
func (a API) Valid() bool {
	_, ok := apiOf(a)
	return ok
}

// APINames is APIs as strings (a flag's enum).
func APINames() []string {
	var out []string
	for _, a := range registeredAPIs() {
		out = append(out, string(a))
	}
	return out
}

// APIList is APIs for a message: "chat, completions, responses or messages".
func APIList() string { return orList(APINames()) }

// QuotedAPIList is APIs quoted for a message about a config file's value:
// `"chat", "completions", "responses" or "messages"`.
func QuotedAPIList() string {
	names := APINames()
	for i, n := range names {
		names[i] = strconv.Quote(n)
	}
	return orList(names)
}

// APIHelp is APIs with their endpoints, for --help: "chat
// (/v1/chat/completions), …, or messages (/v1/messages, Anthropic Messages)".
func APIHelp() string {
	var parts []string
	for _, a := range registeredAPIs() {
		e, _ := apiOf(a)
		what := e.path
		if e.about != "" {
			what += ", " + e.about
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", a, what))
	}
	return orList(parts)
}

// toolAPIList is the APIs with tool calls, for a message:
// "chat, responses or messages".
func toolAPIList() string {
	var names []string
	for _, a := range registeredAPIs() {
		if e, _ := apiOf(a); e.tools {
			names = append(names, string(a))
		}
	}
	return orList(names)
}

// apiTokenizes reports whether a's prompts are counted with /tokenize.
func apiTokenizes(a API) bool {
	e, ok := apiOf(a)
	if !ok {
		return false
	}
	_, ok = e.kind.(apiTokenizer)
	return ok
}

// apiHasTools reports whether a has tool calls (conversation.tools).
func apiHasTools(a API) bool {
	e, ok := apiOf(a)
	return ok && e.tools
}

// orList joins "a, b or c".
func orList(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// apiPath is the endpoint of an API ("" for one not registered).
func apiPath(a API) string {
	e, _ := apiOf(a)
	return e.path
}

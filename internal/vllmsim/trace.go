package vllmsim

import (
	"slices"
	"sync"
	"time"
)

// Trace is the ground truth of one request, recorded in the server process with time.Now()
// (monotonic clock), so it can be compared with a client's timestamps taken in the same process.
//
// Write times of streamed chunks are taken right after the chunk's single Write + Flush returned; a
// non-streaming body's just before it is written. Every field but Done is final once the client has
// read [DONE] (or the body); Done may be set a moment later.
type Trace struct {
	ID       string // response id (chatcmpl-N or cmpl-N)
	Endpoint string // "/v1/chat/completions" or "/v1/completions"
	Stream   bool
	Model    string // as received
	Status   int    // HTTP status answered
	Fault    string // fault applied (a Fault* name), "" for none

	Arrived   time.Time // the handler started, before reading the request body
	Decoded   time.Time // the request body was read and JSON-decoded
	Submitted time.Time // entered the engine's waiting queue (after tokenization)
	Admitted  time.Time // first left the waiting queue (start of its prefill step); zero if never

	// EngineFirstToken and EngineLastToken are the ends of the engine steps that produced the
	// first and the last output token (before the handler writes them): the engine's own view.
	EngineFirstToken time.Time
	EngineLastToken  time.Time

	RoleChunkWritten  time.Time // role-only chat chunk written; zero for completions / non-streaming
	FirstTokenWritten time.Time // first chunk carrying output tokens written
	LastTokenWritten  time.Time // last chunk carrying output tokens written
	Done              time.Time // response complete ([DONE] written, body written, or connection cut)

	// Chunks lists every output chunk, in order: its write time and the tokens it carried. A
	// non-streaming response has one entry for the whole body (FirstTokenWritten = LastTokenWritten).
	Chunks []ChunkWrite

	PromptTokens int
	CachedTokens int // prefix-cache hit at first admission
	// SpecDraftTokens and SpecAcceptedTokens count the request's speculative decoding (TokensPerStep
	// > 1): every decode step after the first token drafts TokensPerStep − 1 tokens, and those it
	// emitted beyond the first are accepted (the engine's vllm:spec_decode_* counters, per request).
	SpecDraftTokens    int
	SpecAcceptedTokens int
	SpecSteps          int // decode steps that drafted: vLLM's num_spec_steps
	CompletionTokens   int // output tokens written to the client
	ReasoningTokens    int // of which reasoning
	FinishReason       string
	Preemptions        int

	RequestID   string // X-Request-Id header received, "" if none
	TraceParent string // traceparent header received, "" if none

	CacheSalt  string // cache_salt received, "" if none
	PromptHead string // first 64 characters of the prompt (chat: message contents joined by "\n")
	// Messages are a chat-form request's messages as the chat template saw them (the Responses
	// and Messages APIs' items turned into chat messages); nil for completions.
	Messages  []TraceMessage
	MaxTokens int // max_completion_tokens, else max_tokens, as received; 0 if absent
	MinTokens int // min_tokens received; 0 if absent
	IgnoreEOS bool
}

// TraceMessage is one message of a request as the chat template saw it.
type TraceMessage struct {
	Role string
	// Tokens are its content's tokens, tool calls included, the template's own tokens excluded.
	Tokens     int
	ToolCalls  int    // tool calls it carried (an assistant message)
	ToolCallID string // a tool message's tool_call_id
	// Text is an assistant message's content (a replayed answer), up to maxTraceAnswerRunes
	// runes; "" for other roles, whose content can be a long prompt.
	Text string
}

// maxTraceAnswerRunes bounds TraceMessage.Text.
const maxTraceAnswerRunes = 16384

// ChunkWrite is one output chunk as written.
type ChunkWrite struct {
	At     time.Time // after Flush
	Tokens int       // output tokens it carried (reasoning included)
}

// Finish reasons recorded in Trace.FinishReason besides vLLM's "stop" and "length".
const (
	FinishAbort = "abort" // client went away, or the engine closed
	FinishError = "error" // an injected fault ended the request
)

type traceRecord struct {
	mu sync.Mutex
	t  Trace
}

func (r *traceRecord) update(f func(t *Trace)) {
	r.mu.Lock()
	f(&r.t)
	r.mu.Unlock()
}

func (r *traceRecord) snapshot() Trace {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.t
	t.Chunks = slices.Clone(r.t.Chunks)
	return t
}

// traceRing keeps the traces of the last capacity requests.
type traceRing struct {
	mu    sync.Mutex
	ids   []string // ring of ids, oldest at next once full
	next  int
	byID  map[string]*traceRecord
	limit int
}

func newTraceRing(capacity int) *traceRing {
	return &traceRing{limit: capacity, byID: make(map[string]*traceRecord, capacity)}
}

func (r *traceRing) add(id string, rec *traceRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ids) < r.limit {
		r.ids = append(r.ids, id)
	} else {
		delete(r.byID, r.ids[r.next])
		r.ids[r.next] = id
		r.next = (r.next + 1) % r.limit
	}
	r.byID[id] = rec
}

func (r *traceRing) get(id string) (*traceRecord, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.byID[id]
	return rec, ok
}

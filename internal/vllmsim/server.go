package vllmsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const (
	maxBodyBytes        = 64 << 20
	promptHeadRunes     = 64
	completionsDefaultN = 16 // vLLM's default max_tokens for /v1/completions
)

func (e *Engine) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { e.handleGenerate(w, r, true) })
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { e.handleGenerate(w, r, false) })
	mux.HandleFunc("POST /v1/responses", func(w http.ResponseWriter, r *http.Request) { e.handleTyped(w, r, formatResponses) })
	mux.HandleFunc("POST /v1/messages", func(w http.ResponseWriter, r *http.Request) { e.handleTyped(w, r, formatMessages) })
	mux.HandleFunc("GET /v1/models", e.handleModels)
	mux.HandleFunc("POST /tokenize", e.handleTokenize)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"version": "0.0.0+slaprobe.sim"})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(e.m.reg, promhttp.HandlerOpts{}))
	return mux
}

// Wire types of the requests.
type (
	wireMessage struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		// ToolCalls are an assistant message's calls, in the chat form
		// [{"id","type":"function","function":{"name","arguments"}}]; the
		// Responses and Messages requests' calls are turned into it.
		ToolCalls  json.RawMessage `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
	}
	streamOptions struct {
		IncludeUsage         bool `json:"include_usage"`
		ContinuousUsageStats bool `json:"continuous_usage_stats"`
	}
	genRequest struct {
		Model               string          `json:"model"`
		Messages            []wireMessage   `json:"messages"`
		Prompt              json.RawMessage `json:"prompt"`
		Stream              bool            `json:"stream"`
		StreamOptions       *streamOptions  `json:"stream_options"`
		MaxTokens           *int            `json:"max_tokens"`
		MaxCompletionTokens *int            `json:"max_completion_tokens"`
		MinTokens           *int            `json:"min_tokens"`
		IgnoreEOS           bool            `json:"ignore_eos"`
		IncludeMetrics      bool            `json:"include_metrics"`
		CacheSalt           *string         `json:"cache_salt"`
		N                   *int            `json:"n"`
		ReturnTokenIDs      bool            `json:"return_token_ids"`
		Tools               json.RawMessage `json:"tools"`
		ChatTemplateKwargs  map[string]any  `json:"chat_template_kwargs"`
		AddGenerationPrompt *bool           `json:"add_generation_prompt"`
	}
	tokenizeRequest struct {
		Model               string          `json:"model"`
		Prompt              json.RawMessage `json:"prompt"`
		Messages            []wireMessage   `json:"messages"`
		AddGenerationPrompt *bool           `json:"add_generation_prompt"`
		Tools               json.RawMessage `json:"tools"`
		ChatTemplateKwargs  map[string]any  `json:"chat_template_kwargs"`
	}
)

// apiError is an error answered with vLLM's error shape.
type apiError struct {
	status int
	msg    string
	param  string
}

func (a *apiError) Error() string { return a.msg }

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...), param: param}
}

func errorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "BadRequestError"
	case http.StatusNotFound:
		return "NotFoundError"
	case http.StatusRequestEntityTooLarge:
		return "RequestEntityTooLargeError"
	case http.StatusTooManyRequests:
		return "RateLimitError"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailableError"
	}
	if status >= 500 {
		return "InternalServerError"
	}
	return "BadRequestError"
}

// errorBody is {"error": {"message", "type", "param", "code"}}.
func errorBody(status int, msg, param string) []byte {
	var p any
	if param != "" {
		p = param
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": errorType(status), "param": p, "code": status,
	}})
	return b
}

func writeError(w http.ResponseWriter, status int, msg, param string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(errorBody(status, msg, param))
}

func writeAPIError(w http.ResponseWriter, err error) {
	var a *apiError
	if errors.As(err, &a) {
		writeError(w, a.status, a.msg, a.param)
		return
	}
	writeError(w, http.StatusInternalServerError, err.Error(), "")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error(), "")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func (e *Engine) checkModel(model string) error {
	if model != "" && model != e.cfg.ModelName {
		return &apiError{status: http.StatusNotFound, msg: fmt.Sprintf("The model `%s` does not exist.", model), param: "model"}
	}
	return nil
}

func readBody(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &apiError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("request body larger than %d bytes", maxBodyBytes)}
		}
		return badRequest("", "reading request body: %v", err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return badRequest("", "invalid JSON body: %v", err)
	}
	return nil
}

// messageText flattens a message's content: a string, null, or an array of parts whose text parts
// (type text, or the Responses API's input_text and output_text) are joined with "\n".
func messageText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", err
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Type == "text" || p.Type == "input_text" || p.Type == "output_text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// chatPrompt applies the chat template. It returns the prompt's token ids, its head (the message
// contents joined by "\n"), whether thinking is on for this request, and the messages as the
// template saw them (for the trace).
func (e *Engine) chatPrompt(wire []wireMessage, tools json.RawMessage, kwargs map[string]any, addGen *bool) ([]uint32, string, bool, []TraceMessage, error) {
	if len(wire) == 0 {
		return nil, "", false, nil, badRequest("messages", "messages must contain at least one message")
	}
	msgs := make([]ChatMessage, len(wire))
	seen := make([]TraceMessage, len(wire))
	var head strings.Builder
	for i, m := range wire {
		if m.Role == "" {
			return nil, "", false, nil, badRequest("messages", "messages[%d].role is required", i)
		}
		text, err := messageText(m.Content)
		if err != nil {
			return nil, "", false, nil, badRequest("messages", "messages[%d].content: %v", i, err)
		}
		calls, n, err := toolCallsText(m.ToolCalls)
		if err != nil {
			return nil, "", false, nil, badRequest("messages", "messages[%d].tool_calls: %v", i, err)
		}
		if m.Role == "tool" && m.ToolCallID == "" {
			return nil, "", false, nil, badRequest("messages", "messages[%d].tool_call_id is required for a tool message", i)
		}
		msgs[i] = ChatMessage{Role: m.Role, Content: text + calls}
		seen[i] = TraceMessage{Role: m.Role, Tokens: scanTokens(text+calls, nil, false), ToolCalls: n, ToolCallID: m.ToolCallID}
		if m.Role == "assistant" {
			seen[i].Text = truncateRunes(text, maxTraceAnswerRunes)
		}
		if head.Len() < 4*promptHeadRunes {
			if i > 0 {
				head.WriteByte('\n')
			}
			head.WriteString(truncateRunes(text, 4*promptHeadRunes))
		}
	}
	thinking := true
	if v, ok := kwargs["enable_thinking"].(bool); ok && !v {
		thinking = false
	}
	t := chatTemplate{
		systemPrompt:        e.cfg.DefaultSystemPrompt,
		addGenerationPrompt: addGen == nil || *addGen,
		emptyThinking:       !thinking && e.cfg.ReasoningTokens > 0,
	}
	if tb := bytes.TrimSpace(tools); len(tb) > 0 && string(tb) != "null" && string(tb) != "[]" {
		t.tools = string(tb)
	}
	return t.apply(nil, msgs), truncateRunes(head.String(), promptHeadRunes), thinking, seen, nil
}

// completionPrompt reads a /v1/completions or /tokenize prompt: a string, a list of one string, or a
// list of token ids.
func completionPrompt(raw json.RawMessage) ([]uint32, string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, "", badRequest("prompt", "prompt is required")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return tokenize(nil, s), truncateRunes(s, promptHeadRunes), nil
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		if len(list) != 1 {
			return nil, "", badRequest("prompt", "the simulator supports exactly one prompt, got %d", len(list))
		}
		return tokenize(nil, list[0]), truncateRunes(list[0], promptHeadRunes), nil
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil {
		out := make([]uint32, len(ids))
		for i, id := range ids {
			if id < 0 || id > math.MaxUint32 {
				return nil, "", badRequest("prompt", "token id %d out of range", id)
			}
			out[i] = uint32(id)
		}
		return out, "", nil
	}
	return nil, "", badRequest("prompt", "prompt must be a string, a list of one string, or a list of token ids")
}

func truncateRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := 0
	for count := 0; i < len(s) && count < n; count++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i]
}

func (e *Engine) handleModels(w http.ResponseWriter, _ *http.Request) {
	root := e.cfg.ModelRoot
	if root == "" {
		root = e.cfg.ModelName
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data": []any{map[string]any{
			"id":            e.cfg.ModelName,
			"object":        "model",
			"created":       e.created,
			"owned_by":      "vllm",
			"root":          root,
			"parent":        nil,
			"max_model_len": e.cfg.MaxModelLen,
			"permission":    []any{},
		}},
	})
}

func (e *Engine) handleTokenize(w http.ResponseWriter, r *http.Request) {
	var req tokenizeRequest
	if err := readBody(w, r, &req); err != nil {
		writeAPIError(w, err)
		return
	}
	if err := e.checkModel(req.Model); err != nil {
		writeAPIError(w, err)
		return
	}
	var ids []uint32
	var err error
	if req.Messages != nil {
		ids, _, _, _, err = e.chatPrompt(req.Messages, req.Tools, req.ChatTemplateKwargs, req.AddGenerationPrompt)
	} else {
		ids, _, err = completionPrompt(req.Prompt)
	}
	if err != nil {
		writeAPIError(w, err)
		return
	}
	if ids == nil {
		ids = []uint32{}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"count":         len(ids),
		"max_model_len": e.cfg.MaxModelLen,
		"tokens":        ids,
		"token_strs":    nil,
	})
}

// job is a validated generation request, before it enters the engine.
type job struct {
	format         apiFormat
	chat           bool // chat, responses or messages: the chat template applies
	stream         bool
	includeUsage   bool
	continuous     bool
	returnTokenIDs bool
	includeMetrics bool // the request set include_metrics: true
	reasoning      int  // leading output tokens that are reasoning
	seq            uint64
	created        int64 // unix seconds of arrival
}

// geometric draws a natural output length with the given mean (≥ 1).
func geometric(rng *splitmix, mean int) int {
	if mean <= 1 {
		return 1
	}
	u := float64(rng.next()>>11) / (1 << 53)
	n := 1 + math.Floor(math.Log1p(-u)/math.Log1p(-1/float64(mean)))
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(n)
}

func (e *Engine) handleGenerate(w http.ResponseWriter, hr *http.Request, chat bool) {
	arrived := time.Now() // before the body is read: what a client's t0 compares with
	var req genRequest
	err := readBody(w, hr, &req)
	f := formatCompletions
	if chat {
		f = formatChat
	}
	e.generate(w, hr, arrived, time.Now(), &req, f, err)
}

// generate serves a decoded generation request in format f; err is the
// error reading it, if any.
func (e *Engine) generate(w http.ResponseWriter, hr *http.Request, arrived, decoded time.Time, reqp *genRequest, f apiFormat, err error) {
	e.handlers.Add(1)
	defer e.handlers.Add(-1)
	chat := f != formatCompletions
	var req genRequest
	if reqp != nil {
		req = *reqp
	}
	if err == nil {
		err = e.checkModel(req.Model)
	}
	var (
		ids      []uint32
		head     string
		thinking = true
		seenMsgs []TraceMessage
	)
	if err == nil {
		if chat {
			ids, head, thinking, seenMsgs, err = e.chatPrompt(req.Messages, req.Tools, req.ChatTemplateKwargs, req.AddGenerationPrompt)
		} else {
			ids, head, err = completionPrompt(req.Prompt)
		}
	}
	var maxReq, effMax, minTokens int
	if err == nil {
		maxReq, effMax, minTokens, err = e.checkLengths(&req, chat, len(ids))
	}
	var fault faultPlan
	if err == nil {
		if v := hr.Header.Get(FaultHeader); v != "" {
			fault, err = parseFaultHeader(v, e.cfg.Faults)
			if err != nil {
				err = badRequest("", "%v", err)
			}
		}
	}
	if err != nil {
		e.rejected.Add(1)
		writeAPIError(w, err)
		return
	}

	seq := e.seq.Add(1)
	rng := splitmix(e.cfg.Seed ^ seq*0x9e3779b97f4a7c15)
	if hr.Header.Get(FaultHeader) == "" && e.cfg.Faults.Rate > 0 {
		if choices := e.cfg.Faults.configured(); len(choices) > 0 {
			if float64(rng.next()>>11)/(1<<53) < e.cfg.Faults.Rate {
				fault = choices[rng.next()%uint64(len(choices))]
			}
		}
	}
	if hr.Header.Get(FaultHeader) == "" && fault.name == "" {
		fault = e.cfg.Faults.alternate(seq)
	}
	target, reason := effMax, "length"
	if (!req.IgnoreEOS || e.cfg.NoIgnoreEOS) && e.cfg.EOSMeanTokens > 0 {
		floor := minTokens
		if e.cfg.NoIgnoreEOS {
			floor = 1 // min_tokens is as unknown as ignore_eos
		}
		if n := max(geometric(&rng, e.cfg.EOSMeanTokens), floor); n < target {
			target, reason = n, "stop"
		}
	}

	j := &job{
		format:         f,
		chat:           chat,
		stream:         req.Stream,
		returnTokenIDs: req.ReturnTokenIDs,
		includeMetrics: req.IncludeMetrics,
		seq:            seq,
		created:        arrived.Unix(),
	}
	if req.StreamOptions != nil {
		j.includeUsage = req.StreamOptions.IncludeUsage
		j.continuous = j.includeUsage && req.StreamOptions.ContinuousUsageStats
	}
	if chat && thinking {
		j.reasoning = e.cfg.ReasoningTokens
	}
	id := fmt.Sprintf("cmpl-%d", seq)
	endpoint := "/v1/completions"
	switch f {
	case formatChat:
		id, endpoint = fmt.Sprintf("chatcmpl-%d", seq), "/v1/chat/completions"
	case formatResponses:
		id, endpoint = fmt.Sprintf("resp_%d", seq), "/v1/responses"
	case formatMessages:
		id, endpoint = fmt.Sprintf("msg_%d", seq), "/v1/messages"
	}
	salt := ""
	if req.CacheSalt != nil {
		salt = *req.CacheSalt
	}
	rec := &traceRecord{t: Trace{
		ID: id, Endpoint: endpoint, Stream: req.Stream, Model: req.Model, Fault: fault.name,
		Arrived: arrived, Decoded: decoded, PromptTokens: len(ids), CacheSalt: salt, PromptHead: head, Messages: seenMsgs,
		MaxTokens: maxReq, MinTokens: minTokens, IgnoreEOS: req.IgnoreEOS,
		RequestID: hr.Header.Get("X-Request-Id"), TraceParent: hr.Header.Get("Traceparent"),
	}}
	e.traces.add(id, rec)

	if fault.name == FaultErrorStatus {
		e.rejected.Add(1)
		writeError(w, fault.status, fmt.Sprintf("simulated fault: HTTP %d", fault.status), "")
		now := time.Now()
		rec.update(func(t *Trace) { t.Status, t.FinishReason, t.Done = fault.status, FinishError, now })
		return
	}

	r := &request{
		id:           id,
		promptTokens: len(ids),
		target:       target,
		targetReason: reason,
		fault:        fault,
		trace:        rec,
		notify:       make(chan struct{}, 1),
	}
	if e.cfg.EnablePrefixCaching {
		// The engine hashes the generated tokens too (with its own copy of the output text), so
		// its hash chain covers prompt and answer, as a follow-up that replays the answer sends.
		r.ids, r.salt, r.gen = ids, salt, newTextGen(e.cfg.Seed, seq)
		r.hashes = blockHashes(ids, salt)
	}
	s := newSession(e, w, hr, r, j)
	if j.stream {
		s.stream()
	} else {
		s.respond()
	}
}

// checkLengths validates max_tokens, min_tokens and the context length, like vLLM does before
// streaming. It returns max tokens as received (0 if absent), the effective cap, and min_tokens.
func (e *Engine) checkLengths(req *genRequest, chat bool, prompt int) (int, int, int, error) {
	var maxReq *int
	param := "max_tokens"
	switch {
	case chat && req.MaxCompletionTokens != nil:
		maxReq, param = req.MaxCompletionTokens, "max_completion_tokens"
	case req.MaxTokens != nil:
		maxReq = req.MaxTokens
	}
	if req.N != nil && *req.N != 1 {
		return 0, 0, 0, badRequest("n", "the simulator supports n=1 only, got %d", *req.N)
	}
	if req.StreamOptions != nil && !req.Stream {
		return 0, 0, 0, badRequest("stream_options", "Stream options can only be defined when `stream=True`.")
	}
	if req.CacheSalt != nil && *req.CacheSalt == "" {
		return 0, 0, 0, badRequest("cache_salt", "Parameter 'cache_salt' must be a non-empty string if provided.")
	}
	if prompt == 0 {
		return 0, 0, 0, badRequest("prompt", "the prompt is empty")
	}
	if maxReq != nil && *maxReq < 1 {
		return 0, 0, 0, badRequest(param, "%s must be at least 1, got %d.", param, *maxReq)
	}
	limit := e.cfg.MaxModelLen
	if prompt >= limit {
		return 0, 0, 0, badRequest("messages", "This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", limit, prompt)
	}
	received, eff := 0, limit-prompt
	if maxReq != nil {
		received = *maxReq
		if prompt+received > limit {
			return 0, 0, 0, badRequest(param, "This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.", limit, prompt+received, prompt, received)
		}
		eff = received
	} else if !chat {
		eff = min(completionsDefaultN, eff)
	}
	minTokens := 0
	if req.MinTokens != nil {
		minTokens = *req.MinTokens
		if minTokens < 0 {
			return 0, 0, 0, badRequest("min_tokens", "min_tokens must be greater than or equal to 0, got %d.", minTokens)
		}
		if minTokens > eff {
			return 0, 0, 0, badRequest("min_tokens", "min_tokens must be less than or equal to max_tokens=%d, got %d.", eff, minTokens)
		}
	}
	return received, eff, minTokens, nil
}

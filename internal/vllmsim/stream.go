package vllmsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

// session writes one generation response. It is used by a single handler goroutine.
type session struct {
	e   *Engine
	w   http.ResponseWriter
	rc  *http.ResponseController
	hr  *http.Request
	r   *request
	j   *job
	gen *textGen

	head           []byte // `{"id":…,"object":…,"created":…,"model":…`
	written        int    // output tokens written
	reasoningSent  int
	seq            int // sequence_number of the next Responses event
	roleSent       bool
	malformedFired bool
	buf            []byte
}

func newSession(e *Engine, w http.ResponseWriter, hr *http.Request, r *request, j *job) *session {
	s := &session{e: e, w: w, rc: http.NewResponseController(w), hr: hr, r: r, j: j, gen: newTextGen(e.cfg.Seed, j.seq)}
	object := "text_completion"
	if j.chat {
		object = "chat.completion.chunk"
	}
	s.head = append(s.head, `{"id":`...)
	s.head = appendJSONString(s.head, r.id)
	s.head = append(s.head, `,"object":"`+object+`","created":`...)
	s.head = strconv.AppendInt(s.head, j.created, 10)
	s.head = append(s.head, `,"model":`...)
	s.head = appendJSONString(s.head, e.cfg.ModelName)
	return s
}

// emit writes b with one Write and one Flush and returns the time right after. A writer that cannot
// flush (a middleware hiding http.Flusher) is not an error: the data goes out when it can.
func (s *session) emit(b []byte) (time.Time, error) {
	_, err := s.w.Write(b)
	if err == nil {
		err = s.flush()
	}
	return time.Now(), err
}

func (s *session) flush() error {
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

func (s *session) setTrace(f func(t *Trace)) { s.r.trace.update(f) }

func (s *session) cachedTokens() int {
	s.r.trace.mu.Lock()
	defer s.r.trace.mu.Unlock()
	return s.r.trace.t.CachedTokens
}

// waitEngine waits for news from the engine. It reports false when the client went away.
func (s *session) waitEngine() bool {
	select {
	case <-s.r.notify:
		return true
	case <-s.hr.Context().Done():
		return false
	}
}

// stream serves a streaming response.
func (s *session) stream() {
	e, r := s.e, s.r
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Request-Id", r.id)
	stallFirst := r.fault.name == FaultStall && r.fault.after == 0

	// Accept into the engine before anything is written, so that a closed engine is a plain 503,
	// except when an injected stall must delay the submission.
	if !stallFirst {
		if err := e.submit(r); err != nil {
			e.rejected.Add(1)
			writeError(s.w, http.StatusServiceUnavailable, err.Error(), "")
			s.setTrace(func(t *Trace) {
				t.Status, t.FinishReason, t.Done = http.StatusServiceUnavailable, FinishAbort, time.Now()
			})
			return
		}
	}
	defer e.abort(r) // no-op once finished
	s.setTrace(func(t *Trace) { t.Status = http.StatusOK })
	s.w.WriteHeader(http.StatusOK)
	if s.j.chat && e.cfg.RoleChunkEarly {
		at, err := s.emit(s.startEvents(nil))
		s.roleSent = true
		s.setTrace(func(t *Trace) { t.RoleChunkWritten = at })
		if err != nil {
			s.end(FinishAbort, at)
			return
		}
	} else if err := s.flush(); err != nil {
		s.end(FinishAbort, time.Now())
		return
	}
	if stallFirst {
		if !s.waitFirstStall() {
			return
		}
		if err := e.submit(r); err != nil {
			s.engineError(err)
			return
		}
	}
	if s.midStreamFault(false) {
		return
	}
	for {
		if !s.waitEngine() {
			s.end(FinishAbort, time.Now())
			return
		}
		avail, done, reason, err := r.snapshot()
		if err != nil {
			s.engineError(err)
			return
		}
		if avail > s.written {
			if at := s.endingFaultAt(); at > s.written && avail > at {
				// A handler that lagged behind the engine would merge the tokens past the
				// fault into the same chunk: the fault fires after exactly its token.
				avail, done = at, false
			}
			if !s.writeTokens(avail, done, reason) {
				return
			}
			if s.midStreamFault(false) {
				return
			}
		}
		if done {
			if s.midStreamFault(true) {
				return
			}
			if s.j.format.typed() {
				at, _ := s.emit(s.typedEnd(s.buf[:0], reason))
				s.end(reason, at)
				return
			}
			if s.j.includeUsage && r.fault.name != FaultOmitUsage {
				b := append(s.buf[:0], "data: "...)
				b = append(b, s.head...)
				b = append(b, `,"choices":[],"usage":`...)
				b = s.appendUsage(b, s.written, true)
				if s.sendsMetrics() {
					b = s.appendPerRequestMetrics(b, s.written)
				}
				b = append(b, "}\n\n"...)
				s.buf = b
				if _, err := s.emit(b); err != nil {
					s.end(reason, time.Now())
					return
				}
			}
			at, _ := s.emit([]byte("data: [DONE]\n\n"))
			s.end(reason, at)
			return
		}
	}
}

// end records the final state of the trace.
func (s *session) end(reason string, at time.Time) {
	s.setTrace(func(t *Trace) {
		t.FinishReason = reason
		t.Done = at
	})
	if s.e.tracer != nil {
		s.e.tracer.requestSpan(s.r.trace.snapshot(), s.e.cfg.ModelName)
	}
}

// engineError ends a stream when the engine shut down under it.
func (s *session) engineError(err error) {
	body := append([]byte("data: "), errorBody(http.StatusServiceUnavailable, err.Error(), "")...)
	body = append(body, "\n\ndata: [DONE]\n\n"...)
	if s.j.format.typed() {
		body = s.typedError(nil, http.StatusServiceUnavailable, err.Error())
	}
	s.setTrace(func(t *Trace) { t.FinishReason = FinishAbort })
	at, _ := s.emit(body)
	s.end(FinishAbort, at)
}

// endingFaultAt is the number of tokens after which an error event or a cut ends the stream, or
// -1 when the request has no such fault.
func (s *session) endingFaultAt() int {
	switch s.r.fault.name {
	case FaultCut, FaultErrorEvent:
		return s.r.fault.after
	}
	return -1
}

// midStreamFault fires an error event, a cut or a malformed event once enough tokens were written
// (or at the end of the output when atEnd). It reports whether the stream is over.
func (s *session) midStreamFault(atEnd bool) bool {
	f := s.r.fault
	due := atEnd || s.written >= f.after
	switch f.name {
	case FaultMalformed:
		if due && !s.malformedFired {
			s.malformedFired = true
			b := append([]byte("data: "), s.head...)
			b = append(b, `,"choices":[{"index":0,"delta":{"content":"`...)
			b = append(b, "\n\n"...)
			_, _ = s.emit(b)
		}
	case FaultErrorEvent:
		if due {
			msg := fmt.Sprintf("simulated fault: error event after %d tokens", s.written)
			b := append([]byte("data: "), errorBody(http.StatusInternalServerError, msg, "")...)
			b = append(b, "\n\ndata: [DONE]\n\n"...)
			if s.j.format.typed() {
				b = s.typedError(nil, http.StatusInternalServerError, msg)
			}
			s.e.abort(s.r)
			s.setTrace(func(t *Trace) { t.FinishReason = FinishError })
			at, _ := s.emit(b)
			s.end(FinishError, at)
			return true
		}
	case FaultCut:
		if due {
			s.e.abort(s.r)
			s.end(FinishError, time.Now())
			s.cut()
			return true
		}
	}
	return false
}

// cut closes the connection without finishing the response.
func (s *session) cut() {
	if conn, _, err := s.rc.Hijack(); err == nil {
		_ = conn.Close()
		return
	}
	panic(http.ErrAbortHandler)
}

// startEvents appends what opens a stream before its first token: the
// role-only chat chunk, or a typed API's framing events.
func (s *session) startEvents(b []byte) []byte {
	if s.j.format.typed() {
		return s.typedStart(b)
	}
	return s.roleEvent(b)
}

// roleEvent is the role-only chat chunk as an SSE event, appended to b.
func (s *session) roleEvent(b []byte) []byte {
	b = append(b, "data: "...)
	b = append(b, s.head...)
	b = append(b, `,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]`...)
	if s.j.continuous && s.r.fault.name != FaultOmitUsage {
		b = append(b, `,"usage":`...)
		b = s.appendUsage(b, 0, false)
	}
	return append(b, "}\n\n"...)
}

// writeTokens writes the tokens [written, avail) as one chunk (several engine steps merge when the
// handler lags, like vLLM under back-pressure). It reports false if the client is gone.
func (s *session) writeTokens(avail int, done bool, reason string) bool {
	n := avail - s.written
	var reasoningText, contentText []byte
	var ids []uint32
	for i := s.written; i < avail; i++ {
		piece := s.gen.next()
		if s.j.returnTokenIDs {
			ids = append(ids, tokenID(piece))
		}
		if i < s.j.reasoning {
			reasoningText = append(reasoningText, piece...)
		} else {
			contentText = append(contentText, piece...)
		}
	}
	b := s.buf[:0]
	lateRole := s.j.chat && !s.roleSent
	if lateRole {
		b = s.startEvents(b)
		s.roleSent = true
	}
	if s.j.format.typed() {
		if reasoningText != nil {
			b = s.typedDelta(b, reasoningText, true)
		}
		if contentText != nil {
			b = s.typedDelta(b, contentText, false)
		}
		return s.emitTokens(b, avail, n, done, reason, lateRole)
	}
	b = append(b, "data: "...)
	b = append(b, s.head...)
	b = append(b, `,"choices":[{"index":0,`...)
	if s.j.chat {
		b = append(b, `"delta":{`...)
		if reasoningText != nil {
			b = append(b, '"')
			b = append(b, s.e.cfg.ReasoningField...)
			b = append(b, `":`...)
			b = appendJSONString(b, string(reasoningText))
			if contentText != nil {
				b = append(b, ',')
			}
		}
		if contentText != nil {
			b = append(b, `"content":`...)
			b = appendJSONString(b, string(contentText))
		}
		b = append(b, '}')
	} else {
		b = append(b, `"text":`...)
		b = appendJSONString(b, string(reasoningText)+string(contentText))
	}
	b = append(b, `,"logprobs":null`...)
	if done {
		b = append(b, `,"finish_reason":`...)
		b = appendJSONString(b, reason)
		b = append(b, `,"stop_reason":null`...)
	} else {
		b = append(b, `,"finish_reason":null`...)
	}
	if ids != nil {
		b = append(b, `,"token_ids":[`...)
		for i, id := range ids {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, uint64(id), 10)
		}
		b = append(b, ']')
	}
	b = append(b, "}]"...)
	if s.j.continuous && s.r.fault.name != FaultOmitUsage {
		b = append(b, `,"usage":`...)
		b = s.appendUsage(b, avail, false)
	}
	b = append(b, "}\n\n"...)
	return s.emitTokens(b, avail, n, done, reason, lateRole)
}

// emitTokens writes the chunk b that carries the tokens up to avail (n new
// ones) and records it in the trace.
func (s *session) emitTokens(b []byte, avail, n int, done bool, reason string, lateRole bool) bool {
	s.buf = b
	at, err := s.emit(b)
	s.written = avail
	reasoning := min(avail, s.j.reasoning) - min(avail-n, s.j.reasoning)
	s.reasoningSent += reasoning
	s.setTrace(func(t *Trace) {
		if lateRole {
			t.RoleChunkWritten = at
		}
		if t.FirstTokenWritten.IsZero() {
			t.FirstTokenWritten = at
		}
		t.LastTokenWritten = at
		t.Chunks = append(t.Chunks, ChunkWrite{At: at, Tokens: n})
		t.CompletionTokens += n
		t.ReasoningTokens += reasoning
		if done {
			t.FinishReason = reason // before [DONE] is written: a client may stop reading there
		}
	})
	if err != nil {
		s.end(FinishAbort, at)
		return false
	}
	return true
}

// appendUsage appends a usage object; details adds prompt_tokens_details when enabled.
func (s *session) appendUsage(b []byte, completion int, details bool) []byte {
	prompt := s.r.promptTokens
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+completion), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	if details && s.e.cfg.EnablePromptTokensDetails {
		b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
		b = strconv.AppendInt(b, int64(s.cachedTokens()), 10)
		b = append(b, '}')
	}
	return append(b, '}')
}

// waitFirstStall waits out a stall fault at token 0, which delays the
// submission itself. False means the client went away first; the session
// has then ended.
func (s *session) waitFirstStall() bool {
	t := time.NewTimer(s.r.fault.stallFor)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.hr.Context().Done():
		s.end(FinishAbort, time.Now())
		return false
	}
}

// respond serves a non-streaming response once generation is over.
func (s *session) respond() {
	e, r := s.e, s.r
	stallFirst := r.fault.name == FaultStall && r.fault.after == 0
	if stallFirst && !s.waitFirstStall() {
		return
	}
	if err := e.submit(r); err != nil {
		e.rejected.Add(1)
		writeError(s.w, http.StatusServiceUnavailable, err.Error(), "")
		s.setTrace(func(t *Trace) {
			t.Status, t.FinishReason, t.Done = http.StatusServiceUnavailable, FinishAbort, time.Now()
		})
		return
	}
	defer e.abort(r)
	var (
		avail  int
		reason string
	)
	for {
		if !s.waitEngine() {
			s.end(FinishAbort, time.Now())
			return
		}
		var done bool
		var err error
		avail, done, reason, err = r.snapshot()
		if err != nil {
			writeError(s.w, http.StatusServiceUnavailable, err.Error(), "")
			s.setTrace(func(t *Trace) { t.Status = http.StatusServiceUnavailable })
			s.end(FinishAbort, time.Now())
			return
		}
		if done {
			break
		}
	}
	switch r.fault.name {
	case FaultErrorEvent:
		writeError(s.w, http.StatusInternalServerError, "simulated fault: error after generation", "")
		s.setTrace(func(t *Trace) { t.Status = http.StatusInternalServerError })
		s.end(FinishError, time.Now())
		return
	case FaultCut:
		s.end(FinishError, time.Now())
		s.cut()
		return
	}

	var reasoningText, contentText []byte
	var ids []uint32
	for i := 0; i < avail; i++ {
		piece := s.gen.next()
		if s.j.returnTokenIDs {
			ids = append(ids, tokenID(piece))
		}
		if i < s.j.reasoning {
			reasoningText = append(reasoningText, piece...)
		} else {
			contentText = append(contentText, piece...)
		}
	}
	choice := map[string]any{"index": 0, "logprobs": nil, "finish_reason": reason, "stop_reason": nil}
	if ids != nil {
		choice["token_ids"] = ids
	}
	object := "text_completion"
	if s.j.chat {
		object = "chat.completion"
		msg := map[string]any{"role": "assistant", "content": string(contentText), "tool_calls": []any{}}
		if reasoningText != nil {
			msg[e.cfg.ReasoningField] = string(reasoningText)
		}
		choice["message"] = msg
	} else {
		choice["text"] = string(reasoningText) + string(contentText)
	}
	resp := map[string]any{
		"id": r.id, "object": object, "created": s.j.created, "model": e.cfg.ModelName,
		"choices": []any{choice},
	}
	if s.j.format.typed() {
		resp = s.typedBody(string(reasoningText), string(contentText), reason, avail)
	} else if r.fault.name != FaultOmitUsage {
		usage := map[string]any{"prompt_tokens": r.promptTokens, "completion_tokens": avail, "total_tokens": r.promptTokens + avail}
		if e.cfg.EnablePromptTokensDetails {
			usage["prompt_tokens_details"] = map[string]any{"cached_tokens": s.cachedTokens()}
		}
		resp["usage"] = usage
		if s.sendsMetrics() {
			resp["metrics"] = perRequestMetrics(r.trace.snapshot(), avail)
		}
	}
	body, _ := json.Marshal(resp)
	if r.fault.name == FaultMalformed {
		body = body[:len(body)/2]
	}
	s.w.Header().Set("Content-Type", "application/json")
	s.w.Header().Set("X-Request-Id", r.id)
	s.w.WriteHeader(http.StatusOK)
	// The trace is complete before the body leaves: a JSON decoder may not wait for the end of the
	// response. So the write time of a non-streaming body is taken just before the write.
	at := time.Now()
	reasoning := min(avail, s.j.reasoning)
	s.setTrace(func(t *Trace) {
		t.Status = http.StatusOK
		t.FirstTokenWritten, t.LastTokenWritten = at, at
		t.Chunks = append(t.Chunks, ChunkWrite{At: at, Tokens: avail})
		t.CompletionTokens, t.ReasoningTokens = avail, reasoning
		t.FinishReason = reason
	})
	done, _ := s.emit(body)
	s.end(reason, done)
}

// appendJSONString appends s as a JSON string literal.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
				b = append(b, s[start:i]...)
				if r == utf8.RuneError {
					b = append(b, `\ufffd`...)
				} else {
					b = append(b, `\u202`...)
					b = append(b, hex[r&0xf])
				}
				i += size
				start = i
				continue
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

package prober

// This file holds the decoding of an SSE stream, with each line timed where
// its bytes arrive: the framing, the end and the verdict (settle) are the
// same for every API; each API's events are decoded in its api_<name>.go.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fastjson"
)

// DefaultMaxLineBytes is the longest SSE line the decoder accepts; a longer
// one fails the probe with reason oversized_line.
const DefaultMaxLineBytes = 1 << 20

// DefaultMaxAnswerBytes is the most text a conversation keeps of its
// answers to replay them; beyond it the probe fails with reason
// answer_too_large.
const DefaultMaxAnswerBytes = 1 << 20

// readBufSize is the bufio buffer. Lines longer than this (but within the
// limit) are assembled in a side buffer, so the limit costs no memory until a
// long line actually arrives.
const readBufSize = 64 << 10

var errOversized = errors.New("oversized line")

// stampReader wraps the response body and records when bytes arrived.
//
// Timestamps: every Read that returns n > 0 stamps clock.Now() into last.
// Lines are split with bufio.Reader.ReadSlice, which only calls Read while the
// buffer holds no complete line, and returns as soon as one is complete. So
// when ReadSlice returns a line, the most recent Read is the one that
// delivered the line's terminating '\n': either the line was already buffered
// (it came whole, or its end came, in that Read, perhaps together with
// earlier lines), or ReadSlice had to read until the newline showed up. A
// line's arrival time is therefore last, read right after ReadSlice returns.
// It is never earlier than the bytes reached us, and later only by the time
// the previous lines of the same Read took to process (microseconds), or by
// the HTTP layer handing one network read back in two body reads (chunked
// encoding), which is equally short. A chunk is complete when its newline is
// here: before that it cannot be parsed, so that is when the client "has" it.
//
// The stamp is taken after Read returns, i.e. after the bytes are in our
// buffer, which is the earliest moment user code can observe them.
type stampReader struct {
	r     io.Reader
	clock Clock
	last  time.Time

	stall   time.Duration // 0: no stall detection
	onStall func()
	watch   *stallWatch // armed at the first token

	k kstampRef // the connection's kernel receive stamps (kstamp.go); zero: user stamps
}

func (s *stampReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.last = s.clock.Now()
		if s.k.s != nil {
			s.last = s.k.stamp(s.last) // when the kernel took the bytes of the connection's last read
		}
		if s.watch != nil {
			s.watch.lastNano.Store(int64(s.last.Sub(s.watch.epoch)))
		}
	}
	return n, err
}

// armStall starts stall detection; it is called when the first token arrives.
func (s *stampReader) armStall() {
	if s.stall > 0 && s.onStall != nil && s.watch == nil {
		s.watch = startStallWatch(s.clock, s.last, s.stall, s.onStall)
	}
}

func (s *stampReader) stopStall() {
	if s.watch != nil {
		s.watch.stop()
		s.watch = nil
	}
}

// stallWatch fires onStall when no bytes arrived for stall. Rather than
// resetting a timer on every Read (a timer operation per chunk), Read only
// publishes the arrival time; when the timer fires it re-arms itself for the
// rest of the window if bytes came meanwhile, and calls onStall otherwise.
// Idleness is measured on the same clock as the timestamps. The watch is
// allocated per probe, so a callback running late never touches a reused
// decoder.
type stallWatch struct {
	clock    Clock
	epoch    time.Time
	stall    time.Duration
	onStall  func()
	lastNano atomic.Int64 // last arrival - epoch

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

func startStallWatch(clock Clock, now time.Time, stall time.Duration, onStall func()) *stallWatch {
	w := &stallWatch{clock: clock, epoch: now, stall: stall, onStall: onStall}
	w.mu.Lock()
	w.timer = time.AfterFunc(stall, w.fire)
	w.mu.Unlock()
	return w
}

func (w *stallWatch) fire() {
	idle := w.clock.Now().Sub(w.epoch) - time.Duration(w.lastNano.Load())
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	if idle >= w.stall {
		w.stopped = true
		w.onStall()
		return
	}
	w.timer.Reset(w.stall - idle)
}

func (w *stallWatch) stop() {
	w.mu.Lock()
	w.stopped = true
	w.timer.Stop()
	w.mu.Unlock()
}

// streamEnd is how the byte stream ended, before interpretation.
type streamEnd struct {
	done    bool   // data: [DONE] arrived
	reason  Reason // a protocol failure: stream_error, malformed_chunk, oversized_line
	err     error  // detail for reason
	readErr error  // a transport error other than a clean EOF
}

// streamDecoder reads an SSE stream of d.api's events and fills a Result. One
// decoder serves one stream; decoders are pooled so that the buffer and the
// JSON parser's arena are reused and a chunk costs no allocation.
type streamDecoder struct {
	sr      stampReader
	br      *bufio.Reader
	parser  fastjson.Parser
	maxLine int
	long    []byte // assembly buffer for lines longer than readBufSize
	res     *Result
	api     API     // the stream's format; decode looks up its kind
	kind    apiKind // api's decoder of events, set by decode

	errEvent     bool // the current SSE event is named "error"
	usageSeen    bool
	finalUsage   bool // a usage chunk without choices (the end-of-stream usage)
	completion   int  // latest usage.completion_tokens (a running total with continuous usage)
	atLastOutput int  // completion at the previous output-bearing chunk
	outChunks    int  // chunks that carried output
	outWithUsage int  // of those, the ones that carried usage

	keepText  bool   // collect the content text into answer (a conversation's turn)
	answer    []byte // the content text streamed, when keepText
	maxAnswer int    // the most answer may hold; past it the probe fails (answer_too_large)
}

var decoderPool = sync.Pool{New: func() any {
	return &streamDecoder{br: bufio.NewReaderSize(nil, readBufSize)}
}}

// newStreamDecoder returns a pooled decoder reading body into res. Call
// release when done with it.
func newStreamDecoder(body io.Reader, clock Clock, maxLine int, res *Result) *streamDecoder {
	d := decoderPool.Get().(*streamDecoder)
	d.reset(body, clock, maxLine, res)
	return d
}

func (d *streamDecoder) reset(body io.Reader, clock Clock, maxLine int, res *Result) {
	if maxLine <= 0 {
		maxLine = DefaultMaxLineBytes
	}
	d.sr = stampReader{r: body, clock: clock}
	d.br.Reset(&d.sr)
	d.maxLine = maxLine
	d.res = res
	d.errEvent, d.usageSeen, d.finalUsage, d.api = false, false, false, APIChat
	d.completion, d.atLastOutput, d.outChunks, d.outWithUsage = 0, 0, 0, 0
	d.keepText, d.answer, d.maxAnswer = false, d.answer[:0], DefaultMaxAnswerBytes
}

// keep adds content text to the answer a conversation replays; text that
// would take it past maxAnswer stops the stream instead (the conversation
// stops there, and no more of the answer is read).
func (d *streamDecoder) keep(text []byte) (streamEnd, bool) {
	if len(d.answer)+len(text) > d.maxAnswer {
		return streamEnd{reason: ReasonAnswerTooLarge, err: fmt.Errorf(
			"the answer grew past %d bytes, the most a conversation keeps to replay (global.max_answer_bytes)", d.maxAnswer)}, true
	}
	d.answer = append(d.answer, text...)
	return streamEnd{}, false
}

func (d *streamDecoder) release() {
	d.sr.stopStall()
	d.sr = stampReader{}
	d.br.Reset(nil)
	d.res, d.kind = nil, nil
	if cap(d.long) > 256<<10 {
		d.long = nil // do not pin a huge line in the pool
	}
	if cap(d.answer) > 256<<10 {
		d.answer = nil
	}
	decoderPool.Put(d)
}

// decode reads until [DONE], the end of the body, an error or a protocol
// failure. It stops at [DONE]: what follows is not read.
func (d *streamDecoder) decode() streamEnd {
	e, ok := apiOf(d.api)
	if !ok {
		return streamEnd{reason: ReasonMalformedChunk, err: fmt.Errorf("api=%q; expected %s", d.api, APIList())}
	}
	d.kind = e.kind
	for {
		line, err := d.readLine()
		if err == errOversized {
			return streamEnd{reason: ReasonOversizedLine, err: fmt.Errorf("SSE line longer than %d bytes", d.maxLine)}
		}
		if err == nil {
			if end, stop := d.line(trimLineEnd(line), d.sr.last); stop {
				return end
			}
			continue
		}
		// The body ended. A last line without its newline is trusted only when
		// it is [DONE]; a partial JSON chunk means the stream was cut.
		if len(line) > 0 {
			if name, value := sseField(line); string(name) == "data" && isDoneMarker(value) {
				return streamEnd{done: true}
			}
		}
		if err == io.EOF {
			return streamEnd{}
		}
		return streamEnd{readErr: err}
	}
}

// readLine returns the next line including its '\n', or a partial last line
// with the error that ended the stream.
func (d *streamDecoder) readLine() ([]byte, error) {
	line, err := d.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		d.long = append(d.long[:0], line...)
		for err == bufio.ErrBufferFull {
			if len(d.long) > d.maxLine+2 {
				return nil, errOversized
			}
			line, err = d.br.ReadSlice('\n')
			d.long = append(d.long, line...)
		}
		line = d.long
	}
	if len(trimLineEnd(line)) > d.maxLine {
		return nil, errOversized
	}
	return line, err
}

// line handles one complete SSE line (without its line terminator) that
// arrived at at. It reports whether decoding stops.
func (d *streamDecoder) line(l []byte, at time.Time) (streamEnd, bool) {
	if len(l) == 0 {
		d.errEvent = false // blank line: end of an event
		return streamEnd{}, false
	}
	switch l[0] {
	case ':':
		return streamEnd{}, false // comment, e.g. a keep-alive
	case '{':
		return d.bareJSON(l), true
	}
	name, value := sseField(l)
	switch string(name) {
	case "data":
		return d.data(value, at)
	case "event":
		d.errEvent = string(bytes.TrimSpace(value)) == "error"
	case "id", "retry":
	default:
		return streamEnd{reason: ReasonMalformedChunk, err: fmt.Errorf("not an SSE line: %q", clipForErr(l))}, true
	}
	return streamEnd{}, false
}

// data handles the value of a data: line. Each data line is one chunk: vLLM
// and the OpenAI-compatible servers put every JSON chunk on a single line, so
// multi-line data events are not joined (they would fail as malformed).
func (d *streamDecoder) data(v []byte, at time.Time) (streamEnd, bool) {
	if len(v) == 0 {
		return streamEnd{}, false
	}
	if d.errEvent { // event: error
		msg := string(clipForErr(v))
		if pv, err := d.parser.ParseBytes(v); err == nil {
			if m := d.kind.errorText(pv); m != "" {
				msg = m
			}
		}
		return streamEnd{reason: ReasonStreamError, err: errors.New(msg)}, true
	}
	if isDoneMarker(v) {
		return streamEnd{done: true}, true
	}
	pv, err := d.parser.ParseBytes(v)
	if err != nil {
		return streamEnd{reason: ReasonMalformedChunk, err: fmt.Errorf("chunk is not JSON: %q", clipForErr(v))}, true
	}
	return d.kind.event(d, pv, at)
}

// bareJSON handles a JSON object sent without SSE framing: an error body
// answered with HTTP 200, or a non-streaming response.
func (d *streamDecoder) bareJSON(l []byte) streamEnd {
	v, err := d.parser.ParseBytes(l)
	if err == nil && v.Type() == fastjson.TypeObject {
		if m, ok := jsonErrorMessage(v.Get("error")); ok {
			return streamEnd{reason: ReasonStreamError, err: errors.New(m)}
		}
	}
	return streamEnd{reason: ReasonMalformedChunk, err: fmt.Errorf("response is not an SSE stream: %q", clipForErr(l))}
}

// output records a chunk that carried generated output of kind k, arrived
// at at: the first one is the TTFT, the first content ends any reasoning.
func (d *streamDecoder) output(k ChunkKind, at time.Time) {
	r := d.res
	d.outChunks++
	if r.FirstToken.IsZero() {
		r.FirstChunkKind = k
		r.FirstToken = at
		d.sr.armStall()
	}
	if k == ChunkContent {
		if r.FirstContent.IsZero() {
			r.FirstContent = at
		}
	} else if k == ChunkReasoning && r.FirstContent.IsZero() {
		r.Reasoning = true
	}
	r.LastToken = at
}

func tooManyTokens(got, want int) error {
	return fmt.Errorf("the server generated at least %d tokens, more than the %d max_tokens asked for", got, want)
}

// settle turns the end of the stream into Kind and Reason. ctxCause is the
// cancellation cause of the request when the read failed because the probe
// was cancelled (timeout, stall), nil otherwise.
func (d *streamDecoder) settle(end streamEnd, ctxCause error) {
	r := d.res
	if d.usageSeen {
		r.OutputTokens = d.completion
	}
	if r.Engine.Source == "" {
		r.Engine.Source = TimingNone
	}
	r.OutputChunks = d.outChunks
	// Every output chunk carries at least one token; continuous usage must
	// end where the final usage does.
	r.UsageMismatch = d.usageSeen && (d.outChunks > d.completion ||
		(d.outWithUsage == d.outChunks && d.outChunks > 0 && d.atLastOutput != d.completion))
	r.ContinuousUsage = d.outChunks > 0 && d.outWithUsage == d.outChunks
	if !r.ContinuousUsage {
		r.ChunkTokens = nil
		r.FirstChunkTokens = 1
	} else if r.FirstChunkTokens < 1 {
		r.FirstChunkTokens = 1 // usage lagging behind the text: unknown
	}
	// A stream that delivered its end-of-stream usage chunk is complete even
	// if [DONE] never comes.
	complete := end.done || d.finalUsage
	switch {
	case end.reason != ReasonNone:
		failResult(r, end.reason, end.err)
	case !complete && ctxCause != nil:
		failResult(r, ClassifyError(ctxCause), ctxCause)
	case !complete && end.readErr != nil:
		failResult(r, ReasonStreamCut, fmt.Errorf("stream cut before [DONE]: %w", end.readErr))
	case !complete:
		failResult(r, ReasonStreamCut, errors.New("stream ended before [DONE]"))
	case !d.usageSeen:
		failResult(r, ReasonMissingUsage, errors.New("no usage in the stream; the server ignored stream_options.include_usage"))
	case r.RequestedTokens > 0 && r.OutputTokens > r.RequestedTokens:
		failResult(r, ReasonTooManyTokens, tooManyTokens(r.OutputTokens, r.RequestedTokens))
	case r.FirstToken.IsZero() && r.OutputTokens <= 1 && r.FinishReason == "stop" && r.RequestedTokens > r.OutputTokens:
		// The model's first token was its end of answer: an empty answer is a
		// legal one, but with no token it has no TTFT.
		r.Kind, r.Reason = KindShortOutput, ReasonNone
		r.Err = fmt.Errorf("the answer was empty (%d output tokens, finish_reason %q), asked for %d",
			r.OutputTokens, r.FinishReason, r.RequestedTokens)
	case r.FirstToken.IsZero() && r.OutputTokens > 0:
		failResult(r, ReasonMalformedChunk, fmt.Errorf("usage reports %d output tokens but no chunk carried output", r.OutputTokens))
	case r.OutputTokens != r.RequestedTokens:
		r.Kind, r.Reason = KindShortOutput, ReasonNone
		r.Err = fmt.Errorf("stream finished with %d output tokens, asked for %d (finish_reason %q)",
			r.OutputTokens, r.RequestedTokens, r.FinishReason)
	default:
		r.Kind, r.Reason, r.Err = KindSuccess, ReasonNone, nil
	}
}

func failResult(r *Result, reason Reason, err error) {
	r.Kind, r.Reason, r.Err = KindError, reason, err
}

func malformedChunk(format string, args ...any) (streamEnd, bool) {
	return streamEnd{reason: ReasonMalformedChunk, err: fmt.Errorf(format, args...)}, true
}

// sseField splits "name: value" and drops the one optional space after the colon.
func sseField(l []byte) (name, value []byte) {
	i := bytes.IndexByte(l, ':')
	if i < 0 {
		return trimLineEnd(l), nil
	}
	value = trimLineEnd(l[i+1:])
	if len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	return l[:i], value
}

func trimLineEnd(l []byte) []byte {
	if n := len(l); n > 0 && l[n-1] == '\n' {
		l = l[:n-1]
	}
	if n := len(l); n > 0 && l[n-1] == '\r' {
		l = l[:n-1]
	}
	return l
}

func isDoneMarker(v []byte) bool { return string(bytes.TrimSpace(v)) == "[DONE]" }

// isNull reports whether a field is absent or JSON null.
func isNull(v *fastjson.Value) bool { return v == nil || v.Type() == fastjson.TypeNull }

// jsonOptString reads an optional string field: absent or null is (nil, true).
func jsonOptString(v *fastjson.Value) ([]byte, bool) {
	if isNull(v) {
		return nil, true
	}
	b, err := v.StringBytes()
	return b, err == nil
}

// jsonCount reads a non-negative integer field.
func jsonCount(v *fastjson.Value) (int, bool) {
	if v == nil {
		return 0, false
	}
	n, err := v.Int()
	return n, err == nil && n >= 0
}

// jsonNonEmpty reports whether v is a non-empty array or object (a tool call delta).
func jsonNonEmpty(v *fastjson.Value) bool {
	if v == nil {
		return false
	}
	switch v.Type() {
	case fastjson.TypeArray:
		a, _ := v.Array()
		return len(a) > 0
	case fastjson.TypeObject:
		o, _ := v.Object()
		return o.Len() > 0
	}
	return false
}

// clipForErr shortens a line for an error message.
func clipForErr(b []byte) []byte {
	if len(b) > 200 {
		return b[:200]
	}
	return b
}

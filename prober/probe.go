package prober

// This file holds the Prober and one probe: prepare the request, send it, read the
// stream, and return a Result.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"mime"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptrace"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fastjson"
	"go.opentelemetry.io/otel/trace"
)

// Prober runs probes and holds the calibration cache. It is safe for
// concurrent use.
type Prober struct {
	logger    *slog.Logger
	clock     Clock
	maxLine   atomic.Int64
	maxAnswer atomic.Int64

	// freshFollowUpSalt gives warm follow-ups a new cache_salt: tests use it
	// to show that a broken conversation reads as a miss.
	freshFollowUpSalt bool
	// sleep waits out a think time where the caller passed no ThinkFunc:
	// a timer (schedSleep); tests replace it.
	sleep func(ctx context.Context, d time.Duration) bool

	mu sync.Mutex
	// Every map keyed by a target, a URL or a model is bounded
	// (bounded.go); calls holds only calibrations in flight.
	cal        *boundedMap[calKey, *calEntry]
	calls      map[calKey]*calCall
	cuts       *boundedMap[calKey, cutEntry] // calibrations that found the prompt cut
	noTokenize *boundedMap[string, bool]     // base URLs without a usable /tokenize
	detected   *boundedMap[string, string]   // base URL → model found on /v1/models
	convSeq    *boundedMap[prepKey, uint64]  // conversations started per target and scenario: their draws' stream

	tracer atomic.Value // tracerBox: where probe spans go (trace.go)

	prefix     PrefixPrompts // the prompts of Scenario.Shape probes (shared_prefix.go)
	userStamps atomic.Bool   // SetUserStamps: never use kernel receive stamps (kstamp.go)
}

// New returns a Prober. A nil logger discards; a nil clock is SystemClock.
func New(logger *slog.Logger, clock Clock) *Prober {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if clock == nil {
		clock = SystemClock{}
	}
	p := &Prober{
		logger: logger,
		clock:  clock,
		calls:  map[calKey]*calCall{},
		sleep:  schedSleep,
	}
	p.newState()
	p.SetTracerProvider(nil)
	return p
}

// SetMaxLineBytes sets the longest SSE line a probe accepts (default
// DefaultMaxLineBytes); n <= 0 restores the default.
func (p *Prober) SetMaxLineBytes(n int) { p.maxLine.Store(int64(n)) }

func (p *Prober) maxLineBytes() int {
	if n := int(p.maxLine.Load()); n > 0 {
		return n
	}
	return DefaultMaxLineBytes
}

// SetMaxAnswerBytes sets the most text a conversation keeps of its answers
// to replay them (default DefaultMaxAnswerBytes); n <= 0 restores the
// default. Past it the probe fails with reason answer_too_large.
func (p *Prober) SetMaxAnswerBytes(n int) { p.maxAnswer.Store(int64(n)) }

func (p *Prober) maxAnswerBytes() int {
	if n := int(p.maxAnswer.Load()); n > 0 {
		return n
	}
	return DefaultMaxAnswerBytes
}

// Prepared is a calibrated request template for one target, model and
// scenario. It is immutable and may be shared by concurrent Runs.
type Prepared struct {
	Target   string // the target's name
	Model    string
	Scenario Scenario

	API          API    // endpoint form
	Words        int    // body length in corpus words
	Fill         string // fill units after the words, for an exact count (fillUnits)
	PromptTokens int    // the server's count of the calibrated prompt
	MaxModelLen  int    // from /tokenize; 0 when unknown
	Method       string // CalibrationTokenize or CalibrationUsage

	key   calKey
	entry *calEntry
	body  *bodyTemplate

	// followUps are a conversation's step calibrations (calSpec): the
	// corpus words whose new message adds new_tokens to the prompt, one per
	// level of a range (newTokenLevels).
	followUps []followUp
}

// followUp is one calibration of a conversation's follow-up step.
type followUp struct {
	key   calKey
	entry *calEntry
}

// Prepare calibrates the prompt for s on t (cached per base URL, model, input
// tokens and API) and encodes the request body once. An empty model means
// t.Model, then the first model of /v1/models (remembered until Invalidate). Transport and HTTP failures
// come back as *ReasonError or *HTTPError (ClassifyError gives their reason);
// anything else is a calibration failure.
func (p *Prober) Prepare(ctx context.Context, t Target, model string, s Scenario) (*Prepared, error) {
	// Only what a probe needs is checked: sweeps run scenarios without an
	// interval, and a zero Timeout means the caller's context bounds the probe.
	if s.InputTokens < 1 || s.OutputTokens < 1 {
		return nil, fmt.Errorf("calibrate %s: input_tokens=%d output_tokens=%d; both must be positive",
			s.Name, s.InputTokens, s.OutputTokens)
	}
	if api := s.APIOn(t); !api.Valid() {
		// Its default is resolved where the config is read (internal/config): an empty API here is
		// a caller that built a Target by hand, and probing it on a guessed API would label the
		// metrics with what nobody asked for.
		return nil, fmt.Errorf("calibrate %s: target %q: api=%q; expected %s",
			s.Name, t.Name, api, APIList())
	}
	if model == "" {
		model = t.Model
	}
	if model == "" {
		var err error
		if model, err = p.detectModel(ctx, t); err != nil {
			return nil, fmt.Errorf("calibrate %s: %w", s.Name, err)
		}
	}
	key := calKey{base: baseURLOf(t.BaseURL), model: model, input: s.InputTokens, api: s.APIOn(t), tools: s.Conversation.Tools}
	if key.tools && !apiHasTools(key.api) {
		return nil, fmt.Errorf("calibrate %s: target %q: conversation.tools=true on api=%s; expected %s (a %s prompt has no tool calls)",
			s.Name, t.Name, key.api, toolAPIList(), key.api)
	}
	entry, err := p.calibration(ctx, t, key)
	if err != nil {
		var cut *PromptCutError
		if errors.As(err, &cut) { // shared with concurrent callers: copy before adding to it
			c := *cut
			c.Needed = s.MaxInputTokens() + s.OutputTokens
			err = &c
		}
		return nil, fmt.Errorf("calibrate %s: %w", s.Name, err)
	}
	if entry.maxModelLen > 0 && !Fits(s, entry.maxModelLen) {
		return nil, fmt.Errorf("calibrate %s: %d input + %d output tokens exceed max_model_len %d",
			s.Name, s.MaxInputTokens(), s.OutputTokens, entry.maxModelLen)
	}

	pk := prepKey{target: t.Name, s: s, metrics: t.PerRequestMetrics}
	p.mu.Lock()
	prep, _ := entry.preps.get(pk)
	for _, f := range prep.followUpsOrNil() {
		if e, _ := p.cal.get(f.key); e != f.entry {
			prep = nil // a follow-up was recalibrated: rebuild
			break
		}
	}
	p.mu.Unlock()
	if prep != nil {
		return prep, nil
	}
	body, err := newBodyTemplateText(key.api, model, bodyText(entry.words, entry.fill), s.OutputTokens, key.tools, t.PerRequestMetrics)
	if err != nil {
		return nil, fmt.Errorf("calibrate %s: %w", s.Name, err)
	}
	prep = &Prepared{
		Target: t.Name, Model: model, Scenario: s,
		API: key.api, Words: entry.words, Fill: entry.fill, PromptTokens: entry.tokens, MaxModelLen: entry.maxModelLen, Method: entry.method,
		key: key, entry: entry, body: body,
	}
	if prep.followUps, err = p.prepareFollowUps(ctx, t, key, s); err != nil {
		return nil, fmt.Errorf("calibrate %s: %w", s.Name, err)
	}
	p.mu.Lock()
	if other, _ := entry.preps.get(pk); other != nil && !prep.replaces(other) {
		prep = other // built concurrently; keep one
	} else {
		entry.preps.put(pk, prep)
	}
	p.mu.Unlock()
	return prep, nil
}

func (prep *Prepared) followUpsOrNil() []followUp {
	if prep == nil {
		return nil
	}
	return prep.followUps
}

// replaces reports whether prep replaces other because other's
// follow-up calibrations are stale (they differ).
func (prep *Prepared) replaces(other *Prepared) bool {
	if len(prep.followUps) != len(other.followUps) {
		return true
	}
	for i := range prep.followUps {
		if prep.followUps[i].entry != other.followUps[i].entry {
			return true
		}
	}
	return false
}

// prepareFollowUps calibrates a conversation's follow-up step (cached like
// any calibration): the new message for new_tokens, or for a range for each
// of its levels (newTokenLevels).
func (p *Prober) prepareFollowUps(ctx context.Context, t Target, key calKey, s Scenario) ([]followUp, error) {
	if !s.IsConversation() {
		return nil, nil
	}
	var out []followUp
	for _, n := range newTokenLevels(s.Conversation.NewTokenRange()) {
		fk := key
		fk.input, fk.step = n, true
		e, err := p.calibration(ctx, t, fk)
		if err != nil {
			return nil, fmt.Errorf("follow-up of %d new tokens: %w", n, err)
		}
		out = append(out, followUp{key: fk, entry: e})
	}
	return out, nil
}

// maxNewTokenLevels bounds the values a new_tokens range draws from.
const maxNewTokenLevels = 16

// newTokenLevels are the values a follow-up's new tokens are drawn from:
// the one count, or up to maxNewTokenLevels evenly spaced values from the
// range's low end to its high end. Each is calibrated once (a handful of
// /tokenize or max_tokens: 1 requests), so every follow-up's prompt length
// is known to the token, not interpolated.
func newTokenLevels(r IntRange) []int {
	if r.Fixed() {
		return []int{r.Min}
	}
	n := min(maxNewTokenLevels, r.Max-r.Min+1)
	out := make([]int, n)
	for i := range n {
		out[i] = r.Min + int(math.Round(float64(i)*float64(r.Max-r.Min)/float64(n-1)))
	}
	return out
}

// history is one conversation's history as it grows: what the next
// follow-up replays, and what its prompt length must be.
type history struct {
	prep  *Prepared
	first string // the priming prompt (nonce included)
	steps []convStep
	draw  *Draw   // new tokens
	think *Draw   // think times
	prev  *Result // a copy of the turn before, once it succeeded
	kept  int     // bytes of answers kept so far, against the probe's cap (maxAnswerBytes)
	// includeMetrics asks every follow-up for vLLM's per-request metrics,
	// as the priming turn's body does (Target.PerRequestMetrics).
	includeMetrics bool
}

func (p *Prober) newHistory(t Target, prep *Prepared, nonce string) *history {
	pk := prepKey{target: t.Name, s: prep.Scenario}
	p.mu.Lock()
	n, _ := p.convSeq.get(pk)
	p.convSeq.put(pk, n+1)
	p.mu.Unlock()
	draw, think := conversationDraws(prep.Scenario.ConversationSeed(), n)
	return &history{prep: prep, first: promptText(nonce, bodyText(prep.Words, prep.Fill)), draw: draw, think: think,
		includeMetrics: t.PerRequestMetrics}
}

// answered records the turn before the next follow-up.
func (h *history) answered(r Result) { h.prev, h.kept = &r, h.kept+len(r.Answer) }

// prevPrompt is the turn before's prompt as the server counted it, or, had
// it not reported one, the length derived for it.
func (h *history) prevPrompt() int {
	if h.prev.PromptTokens > 0 {
		return h.prev.PromptTokens
	}
	return h.prev.WantPromptTokens
}

// replayAllowance is how far below and above want a follow-up's prompt may
// be for the turn before's completion as it is replayed (want counts it as
// the server's completion tokens). Its reasoning, which chat templates drop
// from history and the probe does not replay, may be missing: up to the
// whole completion below, as the split is not reported. Its answer text,
// which the server tokenizes again as part of the prompt, may count
// differently from the tokens it generated: a model that emits tokens its
// tokenizer would not produce for that text does (a tiny model's 16-token
// answer counted 25 more on Ollama; real models seldom differ); up to the
// completion either way, and at most a twentieth of want (replayShare), so
// that a prompt 10 % off is still out of tolerance at every size. A
// follow-up's prompt within [want-below, want+above], each end with its
// tolerance, is the right length.
func (h *history) replayAllowance(want int) (below, above int) {
	above = min(h.prev.OutputTokens, want/replayShare)
	below = above
	if h.prev.Reasoning {
		below = h.prev.OutputTokens
	}
	return below, above
}

// replayShare: a follow-up's replayed answer may count differently by at
// most want/replayShare tokens (replayAllowance).
const replayShare = 20

// seen is what the engine has seen of the conversation before the next
// follow-up: the turn before's prompt and its answer, as the server counted
// them.
func (h *history) seen() int { return h.prevPrompt() + h.prev.OutputTokens }

// next builds follow-up turn k's body: the history so far, the turn
// before's answer and k's new text (new_tokens, or one of its range's
// levels drawn with the conversation's seeded Draw). want
// is its prompt length: the turn before's prompt as the server counted it,
// plus the answer's tokens as it counted them (completion tokens), plus the
// calibrated step.
func (h *history) next(k int, salt string) (body []byte, f followUp, want int, err error) {
	s := h.prep.Scenario
	f = h.prep.followUps[h.draw.Int(IntRange{Min: 0, Max: len(h.prep.followUps) - 1})]
	h.steps = append(h.steps, convStep{Turn: k, Answer: h.prev.Answer, New: bodyText(f.entry.words, f.entry.fill)})
	body, err = marshalRequest(requestSpec{
		API: h.prep.API, Model: h.prep.Model, Prompt: h.first, Steps: h.steps, Tools: s.Conversation.Tools,
		MaxTokens: s.OutputTokens, MinTokens: s.OutputTokens, Stream: true, CacheSalt: salt,
		IncludeMetrics: h.includeMetrics,
	})
	if err != nil {
		return nil, f, 0, fmt.Errorf("encode follow-up turn %d: %w", k, err)
	}
	return body, f, h.prevPrompt() + h.prev.OutputTokens + f.entry.tokens, nil
}

// detectModel returns the model ChooseModel picks from t's /v1/models,
// remembered per base URL until Invalidate.
func (p *Prober) detectModel(ctx context.Context, t Target) (string, error) {
	base := baseURLOf(t.BaseURL)
	p.mu.Lock()
	m, ok := p.detected.get(base)
	p.mu.Unlock()
	if ok {
		return m, nil
	}
	models, err := ListModels(ctx, t)
	if err != nil {
		return "", fmt.Errorf("detect model: %w", err)
	}
	mi, _, err := ChooseModel(models, "")
	if err != nil {
		return "", fmt.Errorf("detect model: %s: %w", base, err)
	}
	p.mu.Lock()
	p.detected.put(base, mi.ID)
	p.mu.Unlock()
	return mi.ID, nil
}

// Run sends one streamed request built from prep and measures it. It never
// returns an error: failures are a Result with Kind error and a Reason.
//
// Timestamps (all from the Prober's clock):
//   - Start (t0) is taken in httptrace's GotConn hook: the connection is ready
//     (dialled and TLS-handshaken, or reused from the pool) and nothing of the
//     request has been written yet. Connection setup is thus excluded from
//     TTFT, while the upload of a long prompt is included, as the user sees it.
//     If no connection was obtained, Start is the time Do was called.
//   - FirstToken, FirstContent and LastToken are the arrival times of the
//     chunks, see stampReader.
func (p *Prober) Run(ctx context.Context, t Target, prep *Prepared) Result {
	return p.RunPaced(ctx, t, prep, nil)
}

// RunPaced is Run with think waiting out a conversation's think times
// between its turns (nil: the prober's own timer).
func (p *Prober) RunPaced(ctx context.Context, t Target, prep *Prepared, think ThinkFunc) (res Result) {
	if prep == nil || prep.body == nil {
		return Result{Target: t.Name, API: t.API, Kind: KindError, Reason: ReasonCalibration,
			Err: errors.New("probe: Run needs a Prepared from Prepare")}
	}
	if prep.Scenario.IsConversation() {
		return p.runConversation(ctx, t, prep, think)
	}
	// A fresh nonce at the start of the prompt and a fresh cache_salt: a
	// cold probe never shares a prefix-cache block with any other request.
	return p.runTurn(ctx, t, prep, 0, newNonce(), newSalt(), nil)
}

// runConversation sends the turns of a conversation scenario's probe one after the
// other. The priming turn is cold (a fresh nonce and salt, as a cold probe);
// every follow-up repeats the nonce and the salt and re-sends the whole
// history, the model's answers included (conversation.go), so a server with
// prefix caching serves all but the new tokens from its cache.
// It returns the last turn it sent, carrying the earlier ones; it stops at
// the first turn that did not succeed.
//
// Before each follow-up it waits the think time drawn for it (think); a
// context that ends meanwhile ends the conversation at once, with a failed
// result for the turn that was not sent.
//
// Each conversation keeps its own cookies, as a user's client does: a
// gateway's session-affinity cookie set on one turn goes back with the next,
// and never to another conversation or a cold probe (the target's client
// keeps none). With Conversation.IDHeader every turn carries that header
// with the conversation's own random id.
func (p *Prober) runConversation(ctx context.Context, t Target, prep *Prepared, pace ThinkFunc) Result {
	s := prep.Scenario
	t = withCookieJar(t)
	id := "slaprobe-" + newSalt()[:16]
	if h := s.Conversation.IDHeader; h != "" {
		headers := maps.Clone(t.Headers)
		if headers == nil {
			headers = map[string]string{}
		}
		headers[h] = id
		t.Headers = headers
	}
	nonce, salt := newNonce(), newSalt()
	h := p.newHistory(t, prep, nonce)
	var earlier []Result
	var primeTTFT time.Duration
	for k := 1; ; k++ {
		var think time.Duration
		if k > 1 {
			think = h.think.ThinkTime(s.Conversation.ThinkTime)
			if err := p.think(ctx, pace, think); err != nil {
				res := Result{Target: t.Name, Model: prep.Model, Scenario: s.Name, API: prep.API, RequestedTokens: s.OutputTokens,
					Turn: k, Start: p.clock.Now(), ConversationID: id, ThinkTime: think, Earlier: earlier}
				failResult(&res, ClassifyError(err), fmt.Errorf("conversation stopped in the %s think time before turn %d: %w", think, k, err))
				return res
			}
		}
		turnSalt := salt
		if k > 1 && p.freshFollowUpSalt {
			turnSalt = newSalt()
		}
		res := p.runTurn(ctx, t, prep, k, nonce, turnSalt, h)
		res.ConversationID, res.ThinkTime = id, think
		if k > 1 {
			res.PrimeTTFT = primeTTFT
			res.SeenTokens = h.seen()
			res.PrimePromptTokens = earlier[0].PromptTokens
		}
		if res.Kind != KindSuccess || k >= s.Turns() || ctx.Err() != nil {
			res.Earlier = earlier
			return res
		}
		if k == 1 {
			primeTTFT = res.TTFT()
		}
		earlier = append(earlier, res)
		h.answered(res)
	}
}

// ThinkFunc waits out a conversation's think time d before its next turn
// and returns once that turn may be sent, or with the reason it may not
// (the context's cause). Whoever runs the probe decides what a pause means
// for its own limits and passes it to ProbePaced: the scheduler's gives the
// target's in-flight slot back meanwhile and takes one again before
// returning. Nil waits on the prober's own timer.
type ThinkFunc func(ctx context.Context, d time.Duration) error

// think waits d with f, else p.sleep. A zero think time sends the next turn
// at once, without a call: the turns of a conversation without think_time go
// back to back, as they always have.
func (p *Prober) think(ctx context.Context, f ThinkFunc, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	if f != nil {
		return f(ctx, d)
	}
	if !p.sleep(ctx, d) {
		return thinkCause(ctx)
	}
	return nil
}

// withCookieJar returns t with a copy of its client that has a fresh, empty
// cookie jar (the transport, and so the connection pool, stays shared).
func withCookieJar(t Target) Target {
	c := *targetClient(t)
	c.Jar, _ = cookiejar.New(nil) // New never fails without options
	t.Client = &c
	return t
}

// runTurn sends one request: a cold probe (turn 0) or turn k of a
// conversation whose history is h, with the given nonce and salt.
func (p *Prober) runTurn(ctx context.Context, t Target, prep *Prepared, turn int, nonce, salt string, h *history) (res Result) {
	s := prep.Scenario
	body, key, entry, want := prep.body, prep.key, prep.entry, s.InputTokens
	res = Result{Target: t.Name, Model: prep.Model, Scenario: s.Name, API: prep.API, RequestedTokens: s.OutputTokens, Turn: turn}
	if turn >= 2 {
		b, f, w, err := h.next(turn, salt)
		if err != nil {
			res.Start = p.clock.Now()
			failResult(&res, ReasonCalibration, err)
			return res
		}
		body, key, entry, want = literalBody(b), f.key, f.entry, w
		nonce, salt = "", ""
	}
	res.WantPromptTokens = want
	// floor and ceiling are the shortest and the longest prompt the server
	// can have read without cutting or adding to it: want, and on a
	// follow-up want less and plus what is not certain of the replayed
	// answer's count (replayAllowance).
	floor, ceiling := want, want
	if turn >= 2 {
		below, above := h.replayAllowance(want)
		floor, ceiling = want-below, want+above
	}
	// The probe's span ends last (deferred first), so it records the final
	// outcome: a prompt found cut below, or a recovered panic.
	var span trace.Span
	defer func() {
		if span != nil {
			endProbeSpan(span, &res, p.clock.Now())
		}
	}()
	defer func() {
		if v := recover(); v != nil {
			p.logger.Error("probe panicked", "target", t.Name, "scenario", s.Name, "panic", v, "stack", string(debug.Stack()))
			failResult(&res, ReasonMalformedChunk, fmt.Errorf("internal error: %v", v))
		}
	}()
	// What the conversation's earlier answers kept counts against the cap.
	keep := p.maxAnswerBytes()
	if h != nil {
		keep -= h.kept
	}
	span = p.send(ctx, t, prep, turn, body, nonce, salt, keep, &res)
	if res.PromptTokens > 0 {
		res.PromptLengthOK = PromptLengthWithin(res.PromptTokens, want) ||
			(floor < ceiling && res.PromptTokens >= floor-PromptTolerance(floor) && res.PromptTokens <= ceiling+PromptTolerance(ceiling))
		if !res.PromptLengthOK {
			p.logger.Warn("prompt length out of tolerance; recalibrating on the next probe",
				"target", t.Name, "model", prep.Model, "scenario", s.Name, "turn", turn,
				"prompt_tokens", res.PromptTokens, "want", want)
			p.dropCalibration(key, entry)
			// The server read less than it was sent: whatever it measured
			// was a shorter prompt's prefill. Never report it as this one's.
			if res.PromptTokens < floor-PromptTolerance(floor) && res.Kind != KindError {
				failResult(&res, ReasonPromptTruncated, &PromptCutError{Read: res.PromptTokens, Want: want,
					Needed: s.MaxInputTokens() + s.OutputTokens, Calibrated: true})
			}
		}
	}
	// The engine's figures from the response are used only when they fit
	// inside the client's own TTFT (engine_timing.go).
	res.CheckEngine()
	if res.Kind != KindSuccess {
		p.logger.Debug("probe failed", "target", t.Name, "model", prep.Model, "scenario", s.Name, "turn", turn,
			"kind", res.Kind, "reason", res.Reason, "err", res.Err)
	}
	return res
}

// send sends one request of a probe and decodes its stream into res. It
// returns the probe's span, for the caller to end (nil if the request could
// not be built).
// A conversation's turn keeps at most keep bytes of its answer.
func (p *Prober) send(ctx context.Context, t Target, prep *Prepared, turn int, body *bodyTemplate, nonce, salt string, keep int, res *Result) (span trace.Span) {
	s := prep.Scenario
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if s.Timeout > 0 {
		var cancelTimeout context.CancelFunc
		ctx, cancelTimeout = context.WithTimeoutCause(ctx, s.Timeout, ErrProbeTimeout)
		defer cancelTimeout()
	}
	var t0, firstByte startStamp
	var kc kstampSlot // the connection's kernel receive stamps (kstamp.go)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn:              func(i httptrace.GotConnInfo) { t0.set(p.clock.Now()); kc.got(i.Conn) },
		GotFirstResponseByte: func() { firstByte.set(p.clock.Now()) },
	})

	api, ok := apiOf(prep.API)
	if !ok {
		failResult(res, ReasonCalibration, fmt.Errorf("api=%q; expected %s", prep.API, APIList()))
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpointURL(t.BaseURL, api.path), body.reader(nonce, salt))
	if err != nil {
		failResult(res, ReasonConnection, fmt.Errorf("build request: %w", err))
		return
	}
	req.ContentLength = body.size(nonce, salt)
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(body.reader(nonce, salt)), nil }
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if api.header != "" {
		req.Header.Set(api.header, api.headerValue)
	}
	// Ask for an unencoded stream: with gzip, bytes would reach us in
	// compressor-sized bursts and the arrival stamps would be wrong.
	req.Header.Set("Accept-Encoding", "identity")
	setTargetHeaders(req, t)

	res.Start = p.clock.Now()
	span = p.startProbeSpan(ctx, req, prep, turn, res.Start, res)
	resp, err := targetClient(t).Do(req)
	if st, ok := t0.get(); ok {
		res.Start = st
	}
	if fb, ok := firstByte.get(); ok {
		res.FirstByte = fb
	}
	if err != nil {
		if ctx.Err() != nil {
			cause := context.Cause(ctx)
			failResult(res, ClassifyError(cause), fmt.Errorf("%w: %v", cause, err))
			return
		}
		failResult(res, ClassifyError(err), err)
		return
	}
	// Closing the body (and cancelling ctx) on every path drops the
	// connection when the stream is unfinished, so the server aborts the
	// request and frees its KV cache.
	defer resp.Body.Close()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		he := readHTTPError(resp.StatusCode, resp.Header, resp.Body)
		res.RetryAfter = he.RetryAfter
		if he.cut != nil { // refused as longer than the context: say what it needs
			he.cut.Needed = prep.Scenario.MaxInputTokens() + prep.Scenario.OutputTokens
		}
		failResult(res, he.Reason(), he)
		return
	}
	// Asked for identity: an encoded stream (a gzip bomb, say) is not read.
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		failResult(res, ReasonMalformedChunk, fmt.Errorf("HTTP 200 with Content-Encoding %q; asked for identity", clipForErr([]byte(ce))))
		return
	}
	ct := resp.Header.Get("Content-Type")
	switch mt, _, _ := mime.ParseMediaType(ct); mt {
	case "application/json":
		notAStream(res, resp.Body)
		return
	case "", "text/event-stream", "text/plain", "application/octet-stream":
		// A stream, or a lax server that did not say; the decoder judges.
	default:
		// An HTML login page of a proxy, say: not worth reading.
		failResult(res, ReasonMalformedChunk, fmt.Errorf("HTTP 200 with Content-Type %q; expected text/event-stream", clipForErr([]byte(ct))))
		return
	}

	if res.ChunkTokens == nil {
		res.ChunkTokens = make([]int32, 0, min(s.OutputTokens, 1<<14))
	}
	d := newStreamDecoder(resp.Body, p.clock, p.maxLineBytes(), res)
	defer d.release()
	d.sr.k = kc.attach(p, resp.ProtoMajor, res)
	d.api = prep.API
	// A conversation's turn that another follows keeps its answer's text
	// to replay it.
	d.keepText, d.maxAnswer = turn >= 1 && turn < s.Turns(), keep
	if t.StallTimeout > 0 {
		d.sr.stall = t.StallTimeout
		d.sr.onStall = func() { cancel(ErrStall) }
	}
	end := d.decode()
	d.sr.stopStall()
	res.Stamps = d.sr.k.source()
	var cause error
	if end.readErr != nil && ctx.Err() != nil {
		cause = context.Cause(ctx)
	}
	d.settle(end, cause)
	if d.keepText && res.Kind == KindSuccess { // only a successful turn is followed, and replayed
		res.Answer = string(d.answer)
	}
	return span
}

// notAStream handles a 200 answer with a JSON body: an error reported with
// HTTP 200, or a server that ignored stream: true.
func notAStream(res *Result, body io.Reader) {
	b, _ := io.ReadAll(io.LimitReader(body, maxErrorBody))
	var jp fastjson.Parser
	if v, err := jp.ParseBytes(b); err == nil {
		if m, ok := jsonErrorMessage(v.Get("error")); ok {
			failResult(res, ReasonStreamError, errors.New(m))
			return
		}
	}
	failResult(res, ReasonMalformedChunk, fmt.Errorf("server answered application/json, not an SSE stream: %q", clipForErr(b)))
}

// Probe is Prepare followed by Run. A failed Prepare is a Result whose Reason
// is the transport or HTTP reason when calibration could not reach the
// server (so a down target reads the same with or without a cached
// calibration), and calibration otherwise.
func (p *Prober) Probe(ctx context.Context, t Target, model string, s Scenario) Result {
	return p.ProbePaced(ctx, t, model, s, nil)
}

// ProbePaced is Probe with think waiting out a conversation's think times
// between its turns (nil: the prober's own timer). It is a ProbeFunc.
func (p *Prober) ProbePaced(ctx context.Context, t Target, model string, s Scenario, think ThinkFunc) Result {
	if s.Shape != nil {
		return p.probeShaped(ctx, t, model, s)
	}
	prep, err := p.Prepare(ctx, t, model, s)
	if err != nil {
		if model == "" {
			model = t.Model
		}
		reason := ReasonCalibration
		var retryAfter time.Duration
		var re *ReasonError
		var he *HTTPError
		var cut *PromptCutError
		read := 0
		switch {
		case errors.As(err, &cut):
			reason, read = ReasonPromptTruncated, cut.Read
		case errors.As(err, &re):
			reason = re.Reason
		case errors.As(err, &he):
			reason, retryAfter = he.Reason(), he.RetryAfter
		}
		p.logger.Debug("probe failed in calibration", "target", t.Name, "model", model, "scenario", s.Name,
			"reason", reason, "err", err)
		return Result{Target: t.Name, Model: model, Scenario: s.Name, API: s.APIOn(t), RequestedTokens: s.OutputTokens,
			Start: p.clock.Now(), Kind: KindError, Reason: reason, Err: err, RetryAfter: retryAfter, PromptTokens: read}
	}
	return p.RunPaced(ctx, t, prep, think)
}

// startStamp holds t0 as set by the GotConn hook. The transport calls the
// hook on the goroutine of Do today, but that is not a documented promise.
type startStamp struct {
	mu sync.Mutex
	t  time.Time
}

func (s *startStamp) set(t time.Time) {
	s.mu.Lock()
	s.t = t // a retry on a fresh connection moves t0 to the attempt that counted
	s.mu.Unlock()
}

func (s *startStamp) get() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t, !s.t.IsZero()
}

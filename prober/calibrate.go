package prober

// This file holds the prompt's length against the engine's tokenizer: calibrating
// a scenario's prompt to its input tokens, and the tolerance a cut prompt is
// judged by.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"
)

// Calibration methods, as reported in Prepared.Method.
const (
	CalibrationTokenize = "tokenize" // POST /tokenize counted the prompt
	CalibrationUsage    = "usage"    // max_tokens: 1 requests, usage.prompt_tokens
)

// calibrationRounds bounds the sized requests of one calibration (the
// zero-length request that measures the fixed overhead comes on top). The
// search usually needs two or three.
const calibrationRounds = 12

// tokensPerWordGuess is the first estimate for the corpus; the search then
// uses what the server actually counted.
const tokensPerWordGuess = 1.3

// maxCalibrationBody bounds a /tokenize answer, which lists every token id
// (about 7 bytes each: a million tokens fit); a longer answer fails the
// calibration.
const maxCalibrationBody = 8 << 20

// errNoTokenize means the server has no usable /tokenize endpoint.
var errNoTokenize = errors.New("no /tokenize endpoint")

// PromptTolerance is how far the server's prompt count may be from the
// scenario's input tokens: 1 %, but at least 8 tokens.
func PromptTolerance(inputTokens int) int {
	if tol := inputTokens / 100; tol > 8 {
		return tol
	}
	return 8
}

// PromptLengthWithin reports whether got is within PromptTolerance of want.
func PromptLengthWithin(got, want int) bool {
	d := got - want
	if d < 0 {
		d = -d
	}
	return d <= PromptTolerance(want)
}

// calKey identifies one calibration: the body length depends only on the
// server, the model (its tokenizer and chat template), the input length and
// the prompt form.
type calKey struct {
	base  string
	model string
	input int
	api   API
	tools bool // conversation.tools: the tool definitions are part of every prompt
	// step: the calibration of a conversation's follow-up step (input is
	// its new tokens), not of a whole prompt; see calSpec.
	step bool
}

// calEntry is a finished calibration plus the request templates built on it,
// one per target name and scenario (the output length is part of the body).
type calEntry struct {
	words       int
	fill        string // fill units after the words (fillUnits): the count is then exact
	tokens      int
	method      string
	rounds      int
	maxModelLen int // from /tokenize; 0 when unknown
	preps       *boundedMap[prepKey, *Prepared]
}

type prepKey struct {
	target  string
	s       Scenario
	metrics bool // Target.PerRequestMetrics: the body asks for include_metrics
}

// cutRecheck is how long a calibration that found the prompt cut is
// remembered before the server is asked again (it may have been restarted
// with a longer context; a model change forgets it at once).
const cutRecheck = 10 * time.Minute

// cutEntry remembers a calibration that found the server cutting the prompt.
type cutEntry struct {
	err error
	at  time.Time
}

// calCall is a calibration in flight; concurrent Prepares for the same key
// wait on it instead of calibrating again.
type calCall struct {
	done  chan struct{}
	entry *calEntry
	err   error
}

// Invalidate drops the cached calibrations of model on t (all models when
// model is empty) and forgets whether t has /tokenize and which model it
// serves. The next Prepare calibrates again. Use it when a target restarts,
// possibly with another model or tokenizer.
func (p *Prober) Invalidate(t Target, model string) {
	base := baseURLOf(t.BaseURL)
	p.mu.Lock()
	defer p.mu.Unlock()
	onBase := func(k calKey) bool { return k.base == base && (model == "" || k.model == model) }
	p.cal.removeIf(func(k calKey, _ *calEntry) bool { return onBase(k) })
	for k := range p.calls {
		if onBase(k) {
			delete(p.calls, k) // the calibration in flight will not be cached
		}
	}
	p.cuts.removeIf(func(k calKey, _ cutEntry) bool { return onBase(k) })
	p.noTokenize.remove(base)
	if m, ok := p.detected.get(base); ok && (model == "" || model == m) {
		p.detected.remove(base)
	}
}

// dropCalibration forgets the calibration of key if entry is still the
// cached one.
func (p *Prober) dropCalibration(key calKey, entry *calEntry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.cal.get(key); ok && e == entry {
		p.cal.remove(key)
	}
}

// calibration returns the cached calibration for key or runs one; concurrent
// callers for the same key share a single run.
func (p *Prober) calibration(ctx context.Context, t Target, key calKey) (*calEntry, error) {
	p.mu.Lock()
	if e, _ := p.cal.get(key); e != nil {
		p.mu.Unlock()
		return e, nil
	}
	// A prompt the server cut is not sent again for a while: each try
	// costs the server a full prefill of its longest prompt.
	if c, ok := p.cuts.get(key); ok {
		if p.clock.Now().Sub(c.at) < cutRecheck {
			p.mu.Unlock()
			return nil, c.err
		}
		p.cuts.remove(key)
	}
	if c := p.calls[key]; c != nil {
		p.mu.Unlock()
		select {
		case <-c.done:
			return c.entry, c.err
		case <-ctx.Done():
			return nil, &ReasonError{Reason: ClassifyError(context.Cause(ctx)), Err: context.Cause(ctx)}
		}
	}
	c := &calCall{done: make(chan struct{})}
	p.calls[key] = c
	p.mu.Unlock()

	defer func() {
		p.mu.Lock()
		if p.calls[key] == c {
			delete(p.calls, key)
			var cut *PromptCutError
			switch {
			case c.err == nil:
				p.cal.put(key, c.entry)
			case errors.As(c.err, &cut):
				p.cuts.put(key, cutEntry{err: c.err, at: p.clock.Now()})
			}
		}
		p.mu.Unlock()
		close(c.done)
	}()
	c.entry, c.err = p.calibrate(ctx, t, key)
	return c.entry, c.err
}

// calibrate finds the body length, in corpus words, whose prompt the server
// counts as key.input tokens (chat template included).
func (p *Prober) calibrate(ctx context.Context, t Target, key calKey) (*calEntry, error) {
	p.mu.Lock()
	noTokenize, _ := p.noTokenize.get(key.base)
	p.mu.Unlock()
	// /tokenize knows the forms of some APIs only (apiTokenizer): the
	// others are calibrated with their own usage counts.
	if !apiTokenizes(key.api) {
		noTokenize = true
	}

	e := &calEntry{method: CalibrationTokenize, preps: p.newPreps()}
	// A step's count is what the step adds to the prompt: measured with
	// one word more than asked (an empty new message is not a request every
	// server takes), less the prompt without the step.
	baseKey := key
	baseKey.step = false
	shift := 0
	if key.step {
		shift = 1
	}
	var c0, base int
	var err error
	if !noTokenize {
		base, e.maxModelLen, err = p.tokenizeCount(ctx, t, key, calSpec(baseKey, 0, ""))
		if errors.Is(err, errNoTokenize) {
			p.logger.Info("target has no /tokenize; calibrating with max_tokens=1 requests",
				"target", t.Name, "err", err)
			p.mu.Lock()
			p.noTokenize.put(key.base, true)
			p.mu.Unlock()
			noTokenize = true
		} else if err != nil {
			return nil, err
		}
	}
	countSpec := func(spec requestSpec) (int, error) {
		n, _, err := p.tokenizeCount(ctx, t, key, spec)
		return n, err
	}
	if noTokenize {
		e.method = CalibrationUsage
		countSpec = func(spec requestSpec) (int, error) { return p.usageCount(ctx, t, key, spec) }
		// /tokenize told us max_model_len; without it, ask /v1/models (best effort).
		if models, err := ListModels(ctx, t); err == nil {
			for _, m := range models {
				if m.ID == key.model {
					e.maxModelLen = m.MaxModelLen
				}
			}
		}
		if base, err = countSpec(calSpec(baseKey, 0, "")); err != nil {
			return nil, err
		}
	}
	countFill := func(words int, fill string) (int, error) { return countSpec(calSpec(key, words, fill)) }
	c0 = base
	if key.step {
		countFill = func(words int, fill string) (int, error) {
			n, err := countSpec(calSpec(key, words+shift, fill))
			return n - base, err
		}
	}
	count := func(words int) (int, error) { return countFill(words, "") }
	if key.step {
		if c0, err = count(0); err != nil {
			return nil, err
		}
	}
	e.words, e.tokens, e.rounds, err = searchWords(key.input, c0, count)
	if err != nil {
		if key.step {
			return nil, fmt.Errorf("follow-up step of %d new tokens: %w", key.input, err)
		}
		return nil, err
	}
	if e.tokens != key.input {
		var rounds int
		e.words, e.fill, e.tokens, rounds = fillToExact(key.input, e.words, e.tokens, count, countFill)
		e.rounds += rounds
	}
	e.words += shift
	p.logger.Info("calibrated prompt", "target", t.Name, "model", key.model, "api", key.api,
		"input_tokens", key.input, "tools", key.tools, "follow_up_step", key.step, "counted", e.tokens, "words", e.words, "fill", e.fill, "method", e.method, "rounds", e.rounds)
	return e, nil
}

// searchWords finds n with count(n) as close to target as word granularity
// allows. c0 = count(0) is the fixed overhead (nonce, instruction, chat
// template). It steps with the measured tokens-per-word slope, then
// interpolates inside the bracket [lo, hi] of the closest counts below and
// above target (regula falsi, falling back to bisection), so a handful of
// round trips suffice even for long prompts. It stops on an exact hit or when
// the bracket is one word wide, and fails when the best count is outside
// PromptTolerance.
func searchWords(target, c0 int, count func(words int) (int, error)) (words, got, rounds int, err error) {
	tol := PromptTolerance(target)
	if c0 > target+tol {
		return 0, 0, 0, fmt.Errorf("the fixed part of the prompt alone is %d tokens, more than %d±%d", c0, target, tol)
	}
	type point struct{ n, c int }
	seen := []point{{0, c0}}
	// cutAt reports a count that stopped growing with the prompt: every word
	// is at least one token, so a prompt 8 or more words longer that counts
	// less than half a token per added word more was cut by the server.
	cutAt := func(pt point) (int, bool) {
		for _, q := range seen {
			lo, hi := q, pt
			if lo.n > hi.n {
				lo, hi = hi, lo
			}
			if dn := hi.n - lo.n; dn >= 8 && hi.c-lo.c < dn/2 {
				return max(lo.c, hi.c), true
			}
		}
		return 0, false
	}
	lo := point{0, c0}
	var hi *point
	best := lo
	closer := func(a, b point) bool { return absInt(a.c-target) < absInt(b.c-target) }
	maxWords := 8*target + 1024 // every word is at least one token; this only stops a runaway
	n := int(math.Round(float64(target-c0) / tokensPerWordGuess))
	if n < 1 {
		n = 1
	}
	for best.c != target && rounds < calibrationRounds {
		c, err := count(n)
		if err != nil {
			return 0, 0, rounds, err
		}
		rounds++
		pt := point{n, c}
		if limit, cut := cutAt(pt); cut {
			return 0, 0, rounds, &PromptCutError{Read: limit, Want: target}
		}
		seen = append(seen, pt)
		if closer(pt, best) {
			best = pt
		}
		if c == target {
			break
		}
		if c < target {
			if n > lo.n {
				lo = pt
			}
		} else if hi == nil || n < hi.n {
			hi = &point{n, c}
		}
		if hi != nil && hi.n-lo.n <= 1 {
			break // adjacent word counts straddle the target
		}
		var next int
		if hi != nil {
			next = lo.n + int(math.Round(float64(target-lo.c)*float64(hi.n-lo.n)/float64(hi.c-lo.c)))
			if next <= lo.n || next >= hi.n {
				next = (lo.n + hi.n) / 2
			}
		} else {
			slope := float64(c-c0) / float64(n)
			if slope <= 0 {
				return 0, 0, rounds, fmt.Errorf("token count did not grow with the prompt (%d words: %d tokens, 0 words: %d)", n, c, c0)
			}
			next = n + int(math.Round(float64(target-c)/slope))
			if next <= n {
				next = n + 1
			}
		}
		if next > maxWords {
			return 0, 0, rounds, fmt.Errorf("calibration diverged: %d words needed for %d tokens", next, target)
		}
		n = next
	}
	if absInt(best.c-target) > tol {
		return 0, 0, rounds, fmt.Errorf("closest prompt is %d tokens (%d words), not within %d±%d", best.c, best.n, target, tol)
	}
	return best.n, best.c, rounds, nil
}

// fillToExact closes the gap words leave: from the word count just below target (words, or one
// fewer when words counts above), it appends the missing tokens as fill units (fillUnits, in turn;
// a unit that counts k tokens each is repeated gap/k times when k divides the gap) and keeps the
// first fill the server counts exactly at target. Otherwise, or when a count fails, it keeps what
// the word search found. It returns the words, fill and count it settled on and the counts it
// asked for (at most 1 + 2 per unit).
func fillToExact(target, words, got int, count func(int) (int, error), countFill func(int, string) (int, error)) (w int, fill string, c, rounds int) {
	w, c = words, got
	if got > target {
		if words < 1 {
			return words, "", got, 0
		}
		n, err := count(words - 1)
		rounds++
		if err != nil || n >= target {
			return words, "", got, rounds
		}
		w, c = words-1, n
	}
	gap := target - c
	if gap < 1 || gap > maxFill {
		return words, "", got, rounds
	}
	for _, unit := range fillUnits {
		n, err := countFill(w, strings.Repeat(unit, gap))
		rounds++
		if err != nil {
			return words, "", got, rounds
		}
		if n == target {
			return w, strings.Repeat(unit, gap), n, rounds
		}
		// A unit of k tokens, each of gap units alike: gap/k units, if k divides the gap.
		if k := (n - c) / gap; k > 1 && (n-c)%gap == 0 && gap%k == 0 {
			fill := strings.Repeat(unit, gap/k)
			n, err := countFill(w, fill)
			rounds++
			if err != nil {
				return words, "", got, rounds
			}
			if n == target {
				return w, fill, n, rounds
			}
		}
	}
	return words, "", got, rounds
}

// calSpec is the request a calibration of key counts for words words: the
// prompt of a cold probe or priming turn; for a step key, a priming prompt
// without corpus words followed by one follow-up step whose replayed answer
// is empty (the real answer's tokens are added as the turn is sent) and
// whose new text is words words. A step's count thus includes the template
// tokens of the assistant message, the synthesized tool call and the new
// message.
func calSpec(key calKey, words int, fill string) requestSpec {
	spec := requestSpec{API: key.api, Model: key.model, Tools: key.tools}
	if !key.step {
		spec.Prompt = promptText(newNonce(), bodyText(words, fill))
		return spec
	}
	spec.Prompt = promptText(newNonce(), "")
	spec.Steps = []convStep{{Turn: 2, New: bodyText(words, fill)}}
	return spec
}

// tokenizeCount asks POST {base}/tokenize (no /v1) for the token count of
// spec's prompt. It returns errNoTokenize when the endpoint is absent
// (404, 405, 501), rejects the request form (422), or does not answer JSON.
func (p *Prober) tokenizeCount(ctx context.Context, t Target, key calKey, spec requestSpec) (count, maxModelLen int, err error) {
	body, err := marshalTokenize(spec)
	if err != nil {
		return 0, 0, err
	}
	status, resp, err := postJSON(ctx, t, endpointURL(key.base, "/tokenize"), "", body)
	if err != nil {
		return 0, 0, err
	}
	switch {
	case status == http.StatusNotFound && isAPIError(resp):
		// vLLM's own 404 (unknown model): /tokenize exists, the request is wrong.
		return 0, 0, &HTTPError{StatusCode: status, Message: errorMessage(resp)}
	case status == http.StatusNotFound, status == http.StatusMethodNotAllowed,
		status == http.StatusNotImplemented, status == http.StatusUnprocessableEntity:
		return 0, 0, fmt.Errorf("%w: %v", errNoTokenize, &HTTPError{StatusCode: status, Message: errorMessage(resp)})
	case status < 200 || status > 299:
		return 0, 0, newHTTPError(status, resp)
	}
	var out struct {
		Count       *int `json:"count"`
		MaxModelLen *int `json:"max_model_len"`
	}
	if err := json.Unmarshal(resp, &out); err != nil || out.Count == nil {
		return 0, 0, fmt.Errorf("%w: answer is not {count: …}: %q", errNoTokenize, clipForErr(resp))
	}
	if out.MaxModelLen != nil {
		maxModelLen = *out.MaxModelLen
	}
	return *out.Count, maxModelLen, nil
}

// isAPIError reports whether a body is an OpenAI-style error object
// ({"error": …} or {"object": "error", …}), as opposed to a router's
// "Not Found" for a missing endpoint.
func isAPIError(b []byte) bool {
	var v struct {
		Error  json.RawMessage `json:"error"`
		Object string          `json:"object"`
	}
	if json.Unmarshal(b, &v) != nil {
		return false
	}
	return (len(v.Error) > 0 && string(v.Error) != "null") || v.Object == "error"
}

// usageCount sends spec as a non-streaming max_tokens: 1 request with a
// fresh cache_salt and reads usage.prompt_tokens. It costs a full prefill.
func (p *Prober) usageCount(ctx context.Context, t Target, key calKey, spec requestSpec) (int, error) {
	spec.MaxTokens, spec.CacheSalt = 1, newSalt()
	body, err := marshalRequest(spec)
	if err != nil {
		return 0, err
	}
	status, resp, err := postJSON(ctx, t, endpointURL(key.base, apiPath(key.api)), key.api, body)
	if err != nil {
		return 0, err
	}
	if status < 200 || status > 299 {
		return 0, newHTTPError(status, resp)
	}
	var out struct {
		Usage *struct {
			PromptTokens *int `json:"prompt_tokens"` // chat, completions
			InputTokens  *int `json:"input_tokens"`  // responses, messages
			CacheRead    int  `json:"cache_read_input_tokens"`
			CacheCreated int  `json:"cache_creation_input_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(resp, &out); err != nil || out.Usage == nil {
		return 0, fmt.Errorf("calibration request: no usage in %q", clipForErr(resp))
	}
	switch u := out.Usage; {
	case u.PromptTokens != nil:
		return *u.PromptTokens, nil
	case u.InputTokens != nil:
		// Anthropic counts prompt-cache reads and writes apart from input_tokens.
		return *u.InputTokens + u.CacheRead + u.CacheCreated, nil
	}
	return 0, fmt.Errorf("calibration request: no usage.prompt_tokens or usage.input_tokens in %q", clipForErr(resp))
}

// postJSON posts body to url with the target's headers (and the header of
// api, when the request is one of an API's) and returns the status and
// (bounded) body. Transport failures come back as *ReasonError.
func postJSON(ctx context.Context, t Target, url string, api API, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if e, ok := apiOf(api); ok && e.header != "" {
		req.Header.Set(e.header, e.headerValue)
	}
	setTargetHeaders(req, t)
	resp, err := targetClient(t).Do(req)
	if err != nil {
		return 0, nil, transportError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 { // not followed: reason redirect
		return 0, nil, readHTTPError(resp.StatusCode, resp.Header, resp.Body)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxCalibrationBody+1))
	if err != nil {
		return 0, nil, transportError(ctx, err)
	}
	if len(b) > maxCalibrationBody {
		return 0, nil, fmt.Errorf("%s answered more than %d bytes; expected a short JSON answer", url, maxCalibrationBody)
	}
	return resp.StatusCode, b, nil
}

func absInt(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

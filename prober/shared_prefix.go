package prober

// This file holds the prompts of probes drawn from a request trace
// (internal/workload): a prompt whose leading blocks are shared with every
// other probe naming the same block keys, so that the engine's prefix cache
// sees what it would see in production, followed by a unique, calibrated
// tail. Nothing here shares a block with a real user: the block text is
// derived from a key the caller derives from a per-instance salt, and every
// request carries that salt as its cache_salt.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// SharedPrefix is one probe drawn from a trace.
type SharedPrefix struct {
	InputTokens  int // the whole prompt, as the server counts it
	OutputTokens int // forced answer length
	// Blocks are the keys of the prompt's leading blocks, in prompt order;
	// probes naming the same keys in the same places share those blocks
	// byte for byte. Blocks that do not fit before the tail are dropped.
	Blocks []uint64
	// BlockTokens is each block's length in the server's tokens (a
	// Mooncake trace's 512).
	BlockTokens int
	// CacheSalt is sent as cache_salt: the same for the probes that may
	// share blocks, never a user's.
	CacheSalt string
}

// PrefixPrompts builds the requests of SharedPrefix probes on one Prober,
// keeping each block calibration (per server, model, API and block length).
type PrefixPrompts struct {
	p      *Prober
	mu     sync.Mutex
	blocks *boundedMap[blockCalKey, *blockCal] // bounded as the Prober's calibrations are (bounded.go)
}

type blockCalKey struct {
	base, model string
	api         API
	tokens      int
}

// blockCal is a calibrated block: words corpus words make it tokens tokens;
// overhead is the token count of the tail's fixed part (nonce,
// instruction, chat template).
type blockCal struct {
	words, tokens, overhead int
}

// NewPrefixPrompts returns a builder of shared-prefix probes for p.
func NewPrefixPrompts(p *Prober) *PrefixPrompts {
	return &PrefixPrompts{p: p, blocks: newBoundedMap[blockCalKey, *blockCal](maxCalibrations, stateTTL, p.clock.Now)}
}

// Shaper draws the probes of a scenario shaped by real traffic (a trace,
// or the engine's live length mix): each call one probe for t and its
// length class. It must be safe for concurrent use, and a pointer (a
// Scenario is compared and used as a map key).
type Shaper interface {
	Next(t Target) (SharedPrefix, string, error)
}

// probeShaped sends one probe of s drawn by s.Shape; a draw that fails is a
// failed probe of reason calibration.
func (p *Prober) probeShaped(ctx context.Context, t Target, model string, s Scenario) Result {
	sp, class, err := s.Shape.Next(t)
	if err != nil {
		if model == "" {
			model = t.Model
		}
		return Result{Target: t.Name, Model: model, Scenario: s.Name, API: s.APIOn(t), RequestedTokens: s.OutputTokens,
			Start: p.clock.Now(), Kind: KindError, Reason: ReasonCalibration, Err: err}
	}
	p.mu.Lock()
	if p.prefix.p == nil {
		p.prefix = PrefixPrompts{p: p, blocks: newBoundedMap[blockCalKey, *blockCal](maxCalibrations, stateTTL, p.clock.Now)}
	}
	p.mu.Unlock()
	res := p.prefix.Probe(ctx, t, model, s, sp)
	res.LengthClass = class
	return res
}

// blockText is the text of the block with the given key: a header whose
// sixteen digits come from the key (the nonce's shape, so every key costs
// the same tokens), then words corpus words and a paragraph break.
func blockText(key uint64, words int) string {
	var d [16]byte
	v := key
	for i := len(d) - 1; i >= 0; i-- {
		d[i] = byte('0' + v%10)
		v /= 10
	}
	var b strings.Builder
	b.WriteString("[block ")
	b.Write(d[0:4])
	b.WriteByte('-')
	b.Write(d[4:8])
	b.WriteByte('-')
	b.Write(d[8:12])
	b.WriteByte('-')
	b.Write(d[12:16])
	b.WriteString("] ")
	b.WriteString(bodyWords(words))
	b.WriteString("\n\n")
	return b.String()
}

// count is the server's token count of prompt as the whole user message:
// /tokenize when the server has it, else a max_tokens: 1 request.
func (pp *PrefixPrompts) count(ctx context.Context, t Target, key calKey, prompt string) (int, error) {
	p := pp.p
	spec := requestSpec{API: key.api, Model: key.model, Prompt: prompt}
	p.mu.Lock()
	no, _ := p.noTokenize.get(key.base)
	p.mu.Unlock()
	if !apiTokenizes(key.api) {
		no = true
	}
	if !no {
		n, _, err := p.tokenizeCount(ctx, t, key, spec)
		if !errors.Is(err, errNoTokenize) {
			return n, err
		}
		p.mu.Lock()
		p.noTokenize.put(key.base, true)
		p.mu.Unlock()
	}
	return p.usageCount(ctx, t, key, spec)
}

// block returns the calibration of a block of tokens tokens: the corpus
// words whose block adds that many tokens in front of a probe's tail.
func (pp *PrefixPrompts) block(ctx context.Context, t Target, key calKey, tokens int) (*blockCal, error) {
	bk := blockCalKey{base: key.base, model: key.model, api: key.api, tokens: tokens}
	pp.mu.Lock()
	bc, _ := pp.blocks.get(bk)
	pp.mu.Unlock()
	if bc != nil {
		return bc, nil
	}
	tail := promptText(newNonce(), "")
	base, err := pp.count(ctx, t, key, tail)
	if err != nil {
		return nil, err
	}
	count := func(words int) (int, error) {
		n, err := pp.count(ctx, t, key, blockText(0, words)+tail)
		return n - base, err
	}
	c0, err := count(0)
	if err != nil {
		return nil, err
	}
	words, got, _, err := searchWords(tokens, c0, count)
	if err != nil {
		return nil, fmt.Errorf("block of %d tokens: %w", tokens, err)
	}
	bc = &blockCal{words: words, tokens: got, overhead: base}
	pp.p.logger.Info("calibrated prompt block", "target", t.Name, "model", key.model, "api", key.api,
		"block_tokens", tokens, "counted", got, "words", words, "tail_overhead", base)
	pp.mu.Lock()
	pp.blocks.put(bk, bc)
	pp.mu.Unlock()
	return bc, nil
}

// tailMargin is the fewest corpus tokens a tail keeps after its fixed part,
// so its calibration has words to work with.
const tailMargin = 8

// Prepare builds the request of one shared-prefix probe of scenario s (its
// name, timeout and API; InputTokens and OutputTokens come from sp) on t:
// as many of sp's blocks as fit, then a tail calibrated so that the whole
// prompt is sp.InputTokens. Run sends it with a fresh nonce at the start of
// the tail, so nothing after the blocks is ever shared.
func (pp *PrefixPrompts) Prepare(ctx context.Context, t Target, model string, s Scenario, sp SharedPrefix) (*Prepared, error) {
	p := pp.p
	s.InputTokens, s.OutputTokens = sp.InputTokens, sp.OutputTokens
	s.Conversation = Conversation{}
	if s.InputTokens < 1 || s.OutputTokens < 1 || sp.BlockTokens < 1 {
		return nil, fmt.Errorf("prepare %s: input_tokens=%d output_tokens=%d block_tokens=%d; all must be positive",
			s.Name, s.InputTokens, s.OutputTokens, sp.BlockTokens)
	}
	api := s.APIOn(t)
	if !api.Valid() {
		return nil, fmt.Errorf("prepare %s: target %q: api=%q; expected %s", s.Name, t.Name, api, APIList())
	}
	if model == "" {
		model = t.Model
	}
	if model == "" {
		var err error
		if model, err = p.detectModel(ctx, t); err != nil {
			return nil, fmt.Errorf("prepare %s: %w", s.Name, err)
		}
	}
	key := calKey{base: baseURLOf(t.BaseURL), model: model, api: api}
	k := 0
	tokens := 0
	if len(sp.Blocks) > 0 {
		bc, err := pp.block(ctx, t, key, sp.BlockTokens)
		if err != nil {
			return nil, fmt.Errorf("prepare %s: %w", s.Name, err)
		}
		k = min(len(sp.Blocks), max(0, (s.InputTokens-bc.overhead-tailMargin)/bc.tokens))
		tokens = bc.tokens
		var b strings.Builder
		for _, id := range sp.Blocks[:k] {
			b.WriteString(blockText(id, bc.words))
		}
		key.input = s.InputTokens - k*bc.tokens
		return pp.finish(ctx, t, s, sp, key, b.String(), k*tokens)
	}
	key.input = s.InputTokens
	return pp.finish(ctx, t, s, sp, key, "", 0)
}

func (pp *PrefixPrompts) finish(ctx context.Context, t Target, s Scenario, sp SharedPrefix, key calKey, blocks string, blockTokens int) (*Prepared, error) {
	p := pp.p
	entry, err := p.calibration(ctx, t, key)
	if err != nil {
		return nil, fmt.Errorf("prepare %s: tail of %d tokens: %w", s.Name, key.input, err)
	}
	if entry.maxModelLen > 0 && s.InputTokens+s.OutputTokens > entry.maxModelLen {
		return nil, fmt.Errorf("prepare %s: %d input + %d output tokens exceed max_model_len %d",
			s.Name, s.InputTokens, s.OutputTokens, entry.maxModelLen)
	}
	b, err := marshalRequest(requestSpec{
		API: key.api, Model: key.model,
		Prompt:    blocks + promptText(nonceMark, bodyText(entry.words, entry.fill)),
		MaxTokens: s.OutputTokens, MinTokens: s.OutputTokens, Stream: true,
		CacheSalt:      sp.CacheSalt,
		IncludeMetrics: t.PerRequestMetrics,
	})
	if err != nil {
		return nil, fmt.Errorf("prepare %s: encode request: %w", s.Name, err)
	}
	n := bytes.Index(b, []byte(nonceMark))
	if n < 0 || bytes.Count(b, []byte(nonceMark)) != 1 {
		return nil, fmt.Errorf("prepare %s: encode request: model name %q clashes with the body placeholder", s.Name, key.model)
	}
	body := &bodyTemplate{pre: b[:n], mid: b[n+len(nonceMark):], noSalt: true}
	return &Prepared{
		Target: t.Name, Model: key.model, Scenario: s,
		API: key.api, Words: entry.words, Fill: entry.fill, PromptTokens: blockTokens + entry.tokens, MaxModelLen: entry.maxModelLen, Method: entry.method,
		key: key, entry: entry, body: body,
	}, nil
}

// Probe is Prepare followed by Run. A failed Prepare is a Result with the
// reason Prober.Probe gives the same failure (transport and HTTP reasons as
// such, a cut prompt as prompt_truncated, anything else calibration).
func (pp *PrefixPrompts) Probe(ctx context.Context, t Target, model string, s Scenario, sp SharedPrefix) Result {
	prep, err := pp.Prepare(ctx, t, model, s, sp)
	if err == nil {
		return pp.p.Run(ctx, t, prep)
	}
	if model == "" {
		model = t.Model
	}
	res := Result{Target: t.Name, Model: model, Scenario: s.Name, API: s.APIOn(t), RequestedTokens: sp.OutputTokens,
		Start: pp.p.clock.Now(), Kind: KindError, Reason: ReasonCalibration, Err: err}
	var re *ReasonError
	var he *HTTPError
	var cut *PromptCutError
	switch {
	case errors.As(err, &cut):
		res.Reason, res.PromptTokens = ReasonPromptTruncated, cut.Read
	case errors.As(err, &re):
		res.Reason = re.Reason
	case errors.As(err, &he):
		res.Reason, res.RetryAfter = he.Reason(), he.RetryAfter
	}
	return res
}

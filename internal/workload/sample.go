package workload

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"sync"
)

// Over says what a draw longer than the model's context becomes.
type Over string

// The policies of SamplerOptions.Over.
const (
	OverClip Over = "clip" // the prompt is cut to fit (its block ids with it)
	OverSkip Over = "skip" // the request is left out and another drawn
)

// Order says how probes walk the trace.
type Order string

// The orders of SamplerOptions.Order.
const (
	OrderRandom     Order = "random"     // each probe draws a request uniformly, seeded
	OrderSequential Order = "sequential" // probes replay the kept requests in trace order, round and round
)

// SamplerOptions shape the draws.
type SamplerOptions struct {
	Seed  uint64
	Order Order // default random
	// MaxContext is the model's context (prompt + answer); 0 means no limit.
	MaxContext int
	Over       Over // default clip
	// MinInput is the shortest prompt a probe sends (its fixed part: the
	// nonce, instruction and chat template); shorter ones are left out.
	MinInput int
	// Keep bounds the requests kept from a large trace: a seeded uniform
	// sample of them, in trace order. 0 means DefaultKeep.
	Keep int
	// BlockTokens is the trace's block size (Spec.Block()).
	BlockTokens int
}

// DefaultKeep is how many requests a Sampler keeps by default.
const DefaultKeep = 100_000

// Counts are what the draws so far became.
type Counts struct {
	Drawn         int // probes handed out
	Clipped       int // of them, prompts cut to fit the context
	OutputRaised  int // of them, answers of 1 token raised to 2 (decode speed needs two)
	SkippedLong   int // left out: longer than the context (OverSkip, or an answer alone too long)
	SkippedShort  int // left out: prompt shorter than MinInput
	SkippedFailed int // left out: no answer tokens (a failed request of the trace)
}

// Draw is one probe's request.
type Draw struct {
	Request       // HashIDs are the Sampler's own: do not change them
	Index   int   // the request's place among the kept ones
	Class   Class // ClassOf(Input)
	Clipped bool  // the prompt was cut to fit
}

// Sampler hands out requests of a trace, seeded and reproducible: the same
// trace, options and seed give the same draws in the same order. It is safe
// for concurrent use.
type Sampler struct {
	opts SamplerOptions
	reqs []Request

	mu     sync.Mutex
	rng    *rand.Rand
	next   int
	counts Counts
}

// LoadSampler reads the trace spec names, keeping at most opts.Keep of its
// requests (a seeded uniform sample, in trace order).
func LoadSampler(spec Spec, opts SamplerOptions) (*Sampler, error) {
	s, _, err := LoadSamplerSummary(spec, opts)
	return s, err
}

// LoadSamplerSummary is LoadSampler, and the trace's Summary from the same
// pass.
func LoadSamplerSummary(spec Spec, opts SamplerOptions) (*Sampler, Summary, error) {
	r, err := Open(spec)
	if err != nil {
		return nil, Summary{}, err
	}
	defer r.Close()
	sum := newSummarizer(r)
	if opts.BlockTokens == 0 {
		opts.BlockTokens = spec.Block()
	}
	keep := opts.Keep
	if keep <= 0 {
		keep = DefaultKeep
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x5a3c1e))
	type kept struct {
		n int
		r Request
	}
	var res []kept
	var req Request
	for n := 0; ; n++ {
		err := r.Next(&req)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, Summary{}, err
		}
		sum.add(&req)
		own := req
		own.HashIDs = append([]uint64(nil), req.HashIDs...)
		// Reservoir sampling (Algorithm R): each request is kept with
		// probability keep/(n+1).
		if len(res) < keep {
			res = append(res, kept{n, own})
		} else if j := rng.IntN(n + 1); j < keep {
			res[j] = kept{n, own}
		}
	}
	if len(res) == 0 {
		return nil, Summary{}, fmt.Errorf("workload: %s: no requests (after the models/log_types filters)", spec.Path)
	}
	sort.Slice(res, func(i, j int) bool { return res[i].n < res[j].n })
	reqs := make([]Request, len(res))
	for i, k := range res {
		reqs[i] = k.r
	}
	return NewSampler(reqs, opts), sum.finish(), nil
}

// NewSampler draws from reqs (kept as they are; not copied).
func NewSampler(reqs []Request, opts SamplerOptions) *Sampler {
	if opts.Order == "" {
		opts.Order = OrderRandom
	}
	if opts.Over == "" {
		opts.Over = OverClip
	}
	if opts.BlockTokens <= 0 {
		opts.BlockTokens = DefaultBlockTokens
	}
	return &Sampler{opts: opts, reqs: reqs, rng: rand.New(rand.NewPCG(opts.Seed, 0xd1a5))}
}

// Len is how many requests the sampler draws from.
func (s *Sampler) Len() int { return len(s.reqs) }

// Counts returns what the draws so far became.
func (s *Sampler) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

// Next draws the next probe. It fails when no request of the trace can be
// sent (every one too long, too short or failed).
func (s *Sampler) Next() (Draw, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for tries := 0; tries < 4*len(s.reqs)+16; tries++ {
		var i int
		if s.opts.Order == OrderSequential {
			i = s.next % len(s.reqs)
			s.next++
		} else {
			i = s.rng.IntN(len(s.reqs))
		}
		d, ok := s.shape(i)
		if ok {
			s.counts.Drawn++
			return d, nil
		}
	}
	return Draw{}, fmt.Errorf("workload: no request of the trace fits (context %d tokens, shortest prompt %d): %+v",
		s.opts.MaxContext, s.opts.MinInput, s.counts)
}

// shape fits request i to the context, counting what it did.
func (s *Sampler) shape(i int) (Draw, bool) {
	r := s.reqs[i]
	d := Draw{Request: r, Index: i}
	switch {
	case r.Output == 0:
		s.counts.SkippedFailed++
		return d, false
	case r.Input < max(s.opts.MinInput, 1):
		s.counts.SkippedShort++
		return d, false
	}
	if r.Output == 1 {
		d.Output = 2
		s.counts.OutputRaised++
	}
	if m := s.opts.MaxContext; m > 0 && d.Input+d.Output > m {
		if s.opts.Over == OverSkip || m-d.Output < max(s.opts.MinInput, 1) {
			s.counts.SkippedLong++
			return d, false
		}
		d.Input = m - d.Output
		b := s.opts.BlockTokens
		d.HashIDs = d.HashIDs[:min(len(d.HashIDs), (d.Input+b-1)/b)]
		d.Clipped = true
		s.counts.Clipped++
	}
	d.Class = ClassOf(d.Input)
	return d, true
}

package workload

import (
	"context"

	"github.com/slaprobe/slaprobe/prober"
)

// Probe is a trace as a probe shape: each probe draws one request of the
// trace and sends its lengths, token-exact, with the prompt blocks its hash
// ids name shared with every other probe of this instance that names them.
type Probe struct {
	Sampler *Sampler
	Prompts *prober.PrefixPrompts
	// Salt is the instance's: the blocks' text and the requests' cache_salt
	// derive from it, so probes share blocks with one another and never
	// with a real user. NewSalt makes one.
	Salt string
	// PerProbeSalt gives every probe a fresh salt instead: sharing off
	// (each probe's blocks are its own), for comparison.
	PerProbeSalt bool
	// BlockTokens is the trace's block size; 0 means DefaultBlockTokens.
	BlockTokens int
}

// ProbeOf is the probe request of a draw under salt: its lengths, and the
// keys of its blocks.
func ProbeOf(d Draw, salt string, blockTokens int) prober.SharedPrefix {
	if blockTokens <= 0 {
		blockTokens = DefaultBlockTokens
	}
	keys := make([]uint64, len(d.HashIDs))
	for i, id := range d.HashIDs {
		keys[i] = BlockKey(salt, id)
	}
	return prober.SharedPrefix{InputTokens: d.Input, OutputTokens: d.Output, Blocks: keys, BlockTokens: blockTokens, CacheSalt: salt}
}

// Run draws one request and probes t with it as scenario s (its name,
// timeout and API). A trace with no request that fits is a failed probe of
// reason calibration.
func (w *Probe) Run(ctx context.Context, p *prober.Prober, t prober.Target, model string, s prober.Scenario) (prober.Result, Draw) {
	d, err := w.Sampler.Next()
	if err != nil {
		return prober.Result{Target: t.Name, Model: model, Scenario: s.Name, API: s.APIOn(t),
			Kind: prober.KindError, Reason: prober.ReasonCalibration, Err: err}, d
	}
	salt := w.Salt
	if w.PerProbeSalt {
		salt = NewSalt()
	}
	return w.Prompts.Probe(ctx, t, model, s, ProbeOf(d, salt, w.BlockTokens)), d
}

package workload

import (
	"context"
	"fmt"

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

// Replayer sends the requests of a replay as probes of scenario S on
// Target: before each step every request is prepared (calibrated once,
// then only encoded) under a fresh salt, so a step shares prefixes as the
// trace does and never with an earlier step.
type Replayer struct {
	Prompts     *prober.PrefixPrompts
	Prober      *prober.Prober
	Target      prober.Target
	Model       string
	Scenario    prober.Scenario
	BlockTokens int
	Reqs        []Request

	preps map[int]*prober.Prepared // by Request.Line
}

// Prepare readies every request for a step: ReplayOptions.Prepare.
func (rp *Replayer) Prepare(ctx context.Context, _ int) error {
	salt := NewSalt()
	rp.preps = make(map[int]*prober.Prepared, len(rp.Reqs))
	for _, r := range rp.Reqs {
		d := Draw{Request: r, Class: ClassOf(r.Input)}
		prep, err := rp.Prompts.Prepare(ctx, rp.Target, rp.Model, rp.Scenario, ProbeOf(d, salt, rp.BlockTokens))
		if err != nil {
			return fmt.Errorf("workload: replay: line %d (%d in, %d out): %w", r.Line, r.Input, r.Output, err)
		}
		rp.preps[r.Line] = prep
	}
	return nil
}

// Send sends one prepared request: a SendFunc.
func (rp *Replayer) Send(ctx context.Context, r Request) prober.Result {
	prep := rp.preps[r.Line]
	if prep == nil {
		return prober.Result{Target: rp.Target.Name, Scenario: rp.Scenario.Name, Kind: prober.KindError, Reason: prober.ReasonCalibration,
			Err: fmt.Errorf("workload: replay: line %d was not prepared", r.Line)}
	}
	res := rp.Prober.Run(ctx, rp.Target, prep)
	res.LengthClass = ClassOf(r.Input).Name
	return res
}

package prober

import (
	"context"
	"errors"
	"log/slog"
)

// CONTRACT STUB: the measurement helper replaces the bodies; signatures are fixed.

// Prober runs probes and holds the calibration cache.
type Prober struct {
	logger *slog.Logger
	clock  Clock
}

// New returns a Prober.
func New(logger *slog.Logger, clock Clock) *Prober { return &Prober{logger: logger, clock: clock} }

// Prepared is a calibrated request template for one target, model and scenario.
type Prepared struct {
	Target   string
	Model    string
	Scenario Scenario
}

// Prepare calibrates the prompt for s on t (cached).
func (p *Prober) Prepare(ctx context.Context, t Target, model string, s Scenario) (*Prepared, error) {
	return nil, errors.New("not implemented")
}

// Run sends one streamed request built from prep and measures it.
func (p *Prober) Run(ctx context.Context, t Target, prep *Prepared) Result {
	return Result{Kind: KindError, Reason: ReasonCalibration}
}

// Probe is Prepare followed by Run.
func (p *Prober) Probe(ctx context.Context, t Target, model string, s Scenario) Result {
	prep, err := p.Prepare(ctx, t, model, s)
	if err != nil {
		return Result{Target: t.Name, Model: model, Scenario: s.Name, Kind: KindError, Reason: ReasonCalibration, Err: err}
	}
	return p.Run(ctx, t, prep)
}

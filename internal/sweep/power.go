package sweep

// This file holds the power a step draws, as a sampler reports it.

import (
	"context"
)

// PowerSampler measures accelerator power over an interval. The NVML
// implementation lives in internal/gpu; a sweep without one reports no power.
type PowerSampler interface {
	// Start begins an interval. The sampler polls on its own goroutine.
	Start(ctx context.Context) error
	// Stop ends the interval and returns what was drawn during it.
	Stop() (PowerReading, error)
}

// PowerReading is the power drawn over one interval, summed over the GPUs
// the sampler watches.
type PowerReading struct {
	AvgWatts  float64 `json:"avg_watts"`
	PeakWatts float64 `json:"peak_watts"`
	Joules    float64 `json:"joules"` // energy-counter delta when the GPU has one
	// JoulesPerOutputToken is Joules over the output tokens counted in the
	// same interval; filled in by the sweep.
	JoulesPerOutputToken float64 `json:"joules_per_output_token,omitempty"`
}

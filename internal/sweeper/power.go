package sweeper

import (
	"github.com/slaprobe/slaprobe/internal/gpu"
	"github.com/slaprobe/slaprobe/internal/sweep"
)

// gpuPower measures a sweep's power per step with NVML: it adapts
// gpu.PowerSampler to sweep.PowerSampler, so that neither of those packages
// imports the other.
type gpuPower struct{ *gpu.PowerSampler }

var _ sweep.PowerSampler = gpuPower{}

// Stop ends the interval and returns what the GPUs drew during it.
func (p gpuPower) Stop() (sweep.PowerReading, error) {
	st, err := p.PowerSampler.Stop()
	if err != nil {
		return sweep.PowerReading{}, err
	}
	return sweep.PowerReading{AvgWatts: st.AverageWatts, PeakWatts: st.PeakWatts, Joules: st.EnergyJoules}, nil
}

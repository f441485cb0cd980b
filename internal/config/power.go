package config

import (
	"fmt"
	"time"

	"github.com/prometheus/common/model"

	"github.com/slaprobe/slaprobe/internal/gpu"
	"github.com/slaprobe/slaprobe/internal/slo"
)

// PowerConfig configures GPU readings through NVML and the energy and cost
// signals built on them (docs/nvml.md, docs/live-signals.md).
type PowerConfig struct {
	// NVML turns GPU readings on. Without a driver the exporter logs one
	// line, reports slaprobe_nvml_up 0 and carries on.
	NVML bool `yaml:"nvml"`
	// Devices selects the GPUs to read, by index ("0") or UUID
	// ("GPU-5f3b…", from nvidia-smi -L). Empty: every GPU.
	Devices []string `yaml:"devices,omitempty"`
	// TargetDevices maps a target name to the GPUs that serve it, for energy
	// per token and cost. A target not listed is charged every selected GPU,
	// which is right when one server uses the whole node.
	TargetDevices map[string][]string `yaml:"target_devices,omitempty"`
	// PollInterval is the least time between two NVML reads (default 5s).
	PollInterval model.Duration `yaml:"poll_interval"`
	// PricePerKWh is the electricity price in dollars (default 0.10, as in
	// the reports).
	PricePerKWh float64 `yaml:"price_per_kwh"`
	// Window is the span energy per token, cost and average/peak power are
	// computed over (default 5m).
	Window model.Duration `yaml:"window"`
}

// DefaultPowerConfig returns the defaults: NVML on, every GPU, a read every
// 5 s, $0.10 per kWh, a 5-minute window.
func DefaultPowerConfig() PowerConfig {
	return PowerConfig{
		NVML:         true,
		PollInterval: model.Duration(gpu.DefaultPollInterval),
		PricePerKWh:  slo.DefaultPricePerKWh,
		Window:       model.Duration(5 * time.Minute),
	}
}

// DevicesFor returns the GPUs that serve the named target: its
// target_devices entry, or every selected device when it has none. Energy
// per token, bench and the daemon's sweeps all charge a target through it.
func (p PowerConfig) DevicesFor(target string) []string {
	if d, ok := p.TargetDevices[target]; ok && len(d) > 0 {
		return d
	}
	return p.Devices
}

type plainPower PowerConfig

// UnmarshalYAML sets the defaults of `power` and validates it.
func (p *PowerConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*p = DefaultPowerConfig()
	if err := unmarshal((*plainPower)(p)); err != nil {
		return err
	}
	return p.Validate()
}

// minPollInterval: NVML polled every 100 ms costs about 2 % ITL on the GPU
// host (as measured by vLLM users); a second is the floor.
const minPollInterval = time.Second

// Validate reports the first problem, naming the field, its value and what
// was expected.
func (p PowerConfig) Validate() error {
	for i, s := range p.Devices {
		if err := gpu.ValidateSelector(s); err != nil {
			return fmt.Errorf("power.devices[%d]=%q: %w", i, s, err)
		}
	}
	for target, sels := range p.TargetDevices {
		if target == "" {
			return fmt.Errorf("power.target_devices: empty target name; expected a target's name")
		}
		if len(sels) == 0 {
			return fmt.Errorf("power.target_devices[%q] is empty; expected at least one GPU index or UUID", target)
		}
		for i, s := range sels {
			if err := gpu.ValidateSelector(s); err != nil {
				return fmt.Errorf("power.target_devices[%q][%d]=%q: %w", target, i, s, err)
			}
		}
	}
	switch {
	case time.Duration(p.PollInterval) < minPollInterval:
		return fmt.Errorf("power.poll_interval=%s; expected at least 1s: NVML polling takes GPU time from the server", p.PollInterval)
	case p.PricePerKWh < 0:
		return fmt.Errorf("power.price_per_kwh=%g; expected a price in dollars >= 0, e.g. 0.10", p.PricePerKWh)
	case p.Window < 2*p.PollInterval:
		return fmt.Errorf("power.window=%s; expected at least twice power.poll_interval (%s), so a window holds two readings", p.Window, p.PollInterval)
	}
	return nil
}

// CheckTargets reports a target_devices entry that names no configured target.
func (p PowerConfig) CheckTargets(targets []string) error {
	known := map[string]bool{}
	for _, t := range targets {
		known[t] = true
	}
	for t := range p.TargetDevices {
		if !known[t] {
			return fmt.Errorf("power.target_devices[%q]: no target has that name; expected one of %v", t, targets)
		}
	}
	return nil
}

// ReaderOptions converts the config for gpu.New.
func (p PowerConfig) ReaderOptions() gpu.Options {
	return gpu.Options{Selectors: p.Devices, PollInterval: time.Duration(p.PollInterval)}
}

package collector

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slaprobe/slaprobe/internal/gpu"
)

// NVMLCollector exports per-GPU power, energy and state read through NVML,
// labelled gpu (index), uuid and name, in base units. Readings are cached by
// the gpu.Reader: a Prometheus scrape reads NVML at most once per poll
// interval (docs/nvml.md).
type NVMLCollector struct {
	r *gpu.Reader

	up, power, energy, limit, util, memUsed, memTotal, temp *prometheus.Desc
}

// NewNVMLCollector returns the collector. r may be a null Reader (no
// driver): then only slaprobe_nvml_up 0 is exported.
func NewNVMLCollector(r *gpu.Reader) *NVMLCollector {
	l := []string{"gpu", "uuid", "name"}
	return &NVMLCollector{
		r: r,
		up: prometheus.NewDesc("slaprobe_nvml_up",
			"Whether NVML initialised and GPUs can be read (1) or not (0: no driver, or NVML disabled).", nil, nil),
		power: prometheus.NewDesc("slaprobe_gpu_power_watts",
			"GPU power draw as NVML reports it (on recent GPUs a one-second average).", l, nil),
		energy: prometheus.NewDesc("slaprobe_gpu_energy_joules_total",
			"Energy the GPU consumed since the driver loaded, from its energy counter (nvmlDeviceGetTotalEnergyConsumption).", l, nil),
		limit: prometheus.NewDesc("slaprobe_gpu_power_limit_watts",
			"Power limit the driver enforces on the GPU.", l, nil),
		util: prometheus.NewDesc("slaprobe_gpu_utilization_ratio",
			"Fraction of the last sample period during which a kernel ran on the GPU (0 to 1); not a measure of how full the GPU is.", l, nil),
		memUsed: prometheus.NewDesc("slaprobe_gpu_memory_used_bytes",
			"GPU memory in use.", l, nil),
		memTotal: prometheus.NewDesc("slaprobe_gpu_memory_total_bytes",
			"GPU memory installed.", l, nil),
		temp: prometheus.NewDesc("slaprobe_gpu_temperature_celsius",
			"GPU core temperature.", l, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *NVMLCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.power, c.energy, c.limit, c.util, c.memUsed, c.memTotal, c.temp} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *NVMLCollector) Collect(ch chan<- prometheus.Metric) {
	up := 0.0
	if c.r.Up() {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
	if up == 0 {
		return
	}
	for _, g := range c.r.Read().GPUs {
		l := []string{strconv.Itoa(g.Index), g.UUID, g.Name}
		emit := func(d *prometheus.Desc, t prometheus.ValueType, v float64, ok bool) {
			if ok {
				ch <- prometheus.MustNewConstMetric(d, t, v, l...)
			}
		}
		emit(c.power, prometheus.GaugeValue, g.PowerWatts, g.HasPower)
		emit(c.energy, prometheus.CounterValue, g.EnergyJoules, g.HasEnergy)
		emit(c.limit, prometheus.GaugeValue, g.PowerLimitWatts, g.HasPowerLimit)
		emit(c.util, prometheus.GaugeValue, g.UtilizationRatio, g.HasUtilization)
		emit(c.memUsed, prometheus.GaugeValue, g.MemoryUsedBytes, g.HasMemory)
		emit(c.memTotal, prometheus.GaugeValue, g.MemoryTotalBytes, g.HasMemory)
		emit(c.temp, prometheus.GaugeValue, g.TemperatureCelsius, g.HasTemperature)
	}
}

package collector

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/slaprobe/slaprobe/internal/gpu"
	"github.com/slaprobe/slaprobe/internal/gpu/gpumock"
)

func TestNVMLCollectorGolden(t *testing.T) {
	srv := gpumock.New(3)
	srv.Devices[0].SetLoad(612.5, 98)
	srv.Devices[1].SetLoad(350, 40)
	srv.Devices[2].SetFail("energy", nvml.ERROR_NOT_SUPPORTED)
	r, err := gpu.New(srv, nil, gpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	liveGolden(t, NewNVMLCollector(r), "nvml_metrics.prom")
}

func TestNVMLCollectorNoDriver(t *testing.T) {
	for name, lib := range map[string]nvml.Interface{"mock": gpumock.NoDriver(), "real library, no driver": nvml.New()} {
		t.Run(name, func(t *testing.T) {
			r, err := gpu.New(lib, nil, gpu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if r.Up() {
				_ = r.Close()
				t.Skip("an NVIDIA driver is present")
			}
			liveGolden(t, NewNVMLCollector(r), "nvml_no_driver.prom")
		})
	}
}

// The energy counter comes from the driver, and the collector only reads
// NVML again once the poll interval has passed.
func TestNVMLCollectorEnergyCounterAdvances(t *testing.T) {
	srv := gpumock.New(2)
	clk := newLiveTestClock()
	r, _ := gpu.New(srv, nil, gpu.Options{Now: clk.Now, PollInterval: 5 * time.Second})
	c := NewNVMLCollector(r)
	energy := func() float64 {
		t.Helper()
		return nvmlValue(t, c, "slaprobe_gpu_energy_joules_total", gpumock.UUIDFor(1))
	}
	e0 := energy()
	srv.Devices[1].SetLoad(500, 90)
	srv.Advance(4 * time.Second)
	clk.Add(4 * time.Second)
	if got := energy(); got != e0 {
		t.Errorf("read NVML within the poll interval: %v -> %v", e0, got)
	}
	clk.Add(time.Second)
	// 4 s at 500 W = 2000 J, read from the counter.
	if got := energy(); got-e0 != 2000 {
		t.Errorf("energy advanced by %v J, want 2000", got-e0)
	}
}

// nvmlValue returns the value of metric for the GPU whose uuid label is uuid.
func nvmlValue(t *testing.T, c prometheus.Collector, metric, uuid string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "uuid" && l.GetValue() == uuid {
					if m.GetCounter() != nil {
						return m.GetCounter().GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("%s{uuid=%q} not found", metric, uuid)
	return 0
}

// TestNVMLRealDriver reads the real driver when one is present, and prints
// what the collectors export. It runs only with SLAPROBE_NVML_REAL=1 (on a
// GPU host); SLAPROBE_NVML_OUT names a file for the exposition.
func TestNVMLRealDriver(t *testing.T) {
	if os.Getenv("SLAPROBE_NVML_REAL") != "1" {
		t.Skip("set SLAPROBE_NVML_REAL=1 on a GPU host")
	}
	var logs bytes.Buffer
	r, err := gpu.New(nvml.New(), slog.New(slog.NewTextHandler(&logs, nil)), gpu.Options{PollInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	t.Log(strings.TrimSpace(logs.String()))
	if !r.Up() {
		t.Fatal("NVML did not initialise")
	}
	s := gpu.NewPowerSampler(r, nil, 200*time.Millisecond)
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	pr, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	st := s.Last()
	t.Logf("power sampler over %s: %d samples, avg %.1f W, peak %.1f W, %.1f J, from energy counter: %v",
		st.Duration(), st.Samples, pr.AverageWatts, pr.PeakWatts, pr.EnergyJoules, st.FromEnergyCounter)

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewNVMLCollector(r))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		_ = enc.Encode(mf)
	}
	t.Log("\n" + buf.String())
	if out := os.Getenv("SLAPROBE_NVML_OUT"); out != "" {
		report := logs.String() + "\n" + buf.String()
		if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "slaprobe_gpu_power_watts"); err != nil || n == 0 {
		t.Errorf("no power readings: %d %v", n, err)
	}
}

package gpu

import (
	"context"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/slaprobe/slaprobe/internal/gpu/gpumock"
)

type logRec struct {
	mu   sync.Mutex
	msgs []string
	lvls []slog.Level
}

func (r *logRec) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRec) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	r.lvls = append(r.lvls, rec.Level)
	return nil
}
func (r *logRec) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRec) WithGroup(string) slog.Handler      { return r }
func (r *logRec) atLeast(l slog.Level) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, x := range r.lvls {
		if x >= l {
			n++
		}
	}
	return n
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *clock { return &clock{t: time.Unix(1_700_000_000, 0)} }

func TestReaderReadsAllDevices(t *testing.T) {
	srv := gpumock.New(4)
	srv.Devices[2].SetLoad(650, 97)
	clk := newClock()
	r, err := New(srv, nil, Options{Now: clk.now})
	if err != nil || !r.Up() {
		t.Fatalf("New: %v up=%v", err, r.Up())
	}
	if srv.Inits() != 1 {
		t.Errorf("Init called %d times", srv.Inits())
	}
	rs := r.Read()
	if len(rs.GPUs) != 4 {
		t.Fatalf("GPUs = %d", len(rs.GPUs))
	}
	g := rs.GPUs[2]
	if g.Index != 2 || g.UUID != gpumock.UUIDFor(2) || g.Name != "NVIDIA H100 80GB HBM3" {
		t.Errorf("identity %+v", g.Device)
	}
	if g.PowerWatts != 650 || g.PowerLimitWatts != 700 || g.UtilizationRatio != 0.97 ||
		g.MemoryUsedBytes != 1<<30 || g.MemoryTotalBytes != 80<<30 || g.TemperatureCelsius != 33 {
		t.Errorf("reading %+v", g)
	}
	if g.EnergyJoules != 1_200_000 { // 1.2e9 mJ
		t.Errorf("energy = %v J, want 1.2e6 (mJ converted)", g.EnergyJoules)
	}
	if err := r.Close(); err != nil || srv.Shutdowns() != 1 || r.Up() {
		t.Errorf("Close: %v shutdowns=%d up=%v", err, srv.Shutdowns(), r.Up())
	}
}

func TestReaderSelection(t *testing.T) {
	srv := gpumock.New(8)
	rec := &logRec{}
	r, err := New(srv, slog.New(rec), Options{Selectors: []string{"5", strings.ToLower(gpumock.UUIDFor(1)), "1", "GPU-nope"}})
	if err != nil {
		t.Fatal(err)
	}
	devs := r.Devices()
	if len(devs) != 2 || devs[0].Index != 5 || devs[1].Index != 1 {
		t.Errorf("selected %+v; want GPU 5 then GPU 1 (by UUID, case-insensitive), once each", devs)
	}
	if rec.atLeast(slog.LevelError) != 1 {
		t.Errorf("an unmatched UUID should log one error, got %d", rec.atLeast(slog.LevelError))
	}
	for _, bad := range []string{"-1", "gpu0", "MIG-abc", ""} {
		if _, err := New(gpumock.New(1), nil, Options{Selectors: []string{bad}}); err == nil {
			t.Errorf("selector %q accepted", bad)
		}
	}
}

func TestReaderNoDriver(t *testing.T) {
	for name, lib := range map[string]nvml.Interface{
		"mock without driver": gpumock.NoDriver(),
		"nil library":         nil,
		// The real library on a machine with no driver (this one and CI):
		// Init fails with ERROR_LIBRARY_NOT_FOUND. Skipped where a driver is.
		"real nvml.New()": nvml.New(),
	} {
		t.Run(name, func(t *testing.T) {
			rec := &logRec{}
			r, err := New(lib, slog.New(rec), Options{Selectors: []string{"0"}})
			if err != nil {
				t.Fatal(err)
			}
			if name == "real nvml.New()" && r.Up() {
				_ = r.Close()
				t.Skip("an NVIDIA driver is present")
			}
			if r.Up() || len(r.Read().GPUs) != 0 || len(r.Devices()) != 0 {
				t.Error("null reader is not null")
			}
			rec.mu.Lock()
			n := len(rec.msgs)
			rec.mu.Unlock()
			if n != 1 {
				t.Errorf("log lines = %d, want exactly 1", n)
			}
			if err := r.Close(); err != nil {
				t.Error(err)
			}
			// Everything else keeps working on a null Reader.
			s := NewPowerSampler(r, nil, 0)
			if err := s.Start(context.Background()); err != ErrNoPower {
				t.Errorf("sampler start = %v", err)
			}
			if _, err := s.Stop(); err == nil {
				t.Error("sampler stop without start: no error")
			}
		})
	}
}

func TestReaderCachesReads(t *testing.T) {
	srv := gpumock.New(2)
	clk := newClock()
	r, _ := New(srv, nil, Options{Now: clk.now, PollInterval: 5 * time.Second})
	var refreshes int
	r.OnRefresh(func(Readings) { refreshes++ })
	r.Read()
	reads := srv.Devices[0].ReadCount()
	for range 10 {
		clk.add(400 * time.Millisecond)
		r.Read()
	}
	if got := srv.Devices[0].ReadCount(); got != reads {
		t.Errorf("NVML read %d more times within the poll interval", got-reads)
	}
	clk.add(time.Second)
	r.Read()
	if got := srv.Devices[0].ReadCount(); got != 2*reads {
		t.Errorf("after the interval: %d reads, want %d", got, 2*reads)
	}
	if refreshes != 2 {
		t.Errorf("listeners called %d times, want 2", refreshes)
	}
}

func TestReaderUnsupportedAndFailingFields(t *testing.T) {
	srv := gpumock.New(2)
	srv.Devices[0].SetFail("energy", nvml.ERROR_NOT_SUPPORTED) // pre-Volta
	srv.Devices[1].SetFail("temperature", nvml.ERROR_GPU_IS_LOST)
	clk := newClock()
	rec := &logRec{}
	r, _ := New(srv, slog.New(rec), Options{Now: clk.now, PollInterval: time.Second})
	for range 3 {
		rs := r.Read()
		if rs.GPUs[0].HasEnergy || !rs.GPUs[0].HasPower || rs.GPUs[1].HasTemperature || !rs.GPUs[1].HasEnergy {
			t.Fatalf("flags wrong: %+v", rs.GPUs)
		}
		clk.add(2 * time.Second)
	}
	if n := rec.atLeast(slog.LevelWarn); n != 1 {
		t.Errorf("warnings = %d, want 1 (GPU lost, logged once)", n)
	}
}

func TestPowerSamplerUsesEnergyCounter(t *testing.T) {
	srv := gpumock.New(4)
	clk := newClock()
	r, _ := New(srv, nil, Options{Now: clk.now})
	s := NewPowerSampler(r, []string{"0", "1"}, time.Hour) // the test drives samples
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// 10 s at 400 W per GPU, then 10 s at 700 W, sampled only at the ends of
	// each phase: average is exact from the energy counter.
	for _, d := range srv.Devices {
		d.SetLoad(400, 80)
	}
	srv.Advance(10 * time.Second)
	clk.add(10 * time.Second)
	s.sample()
	for _, d := range srv.Devices {
		d.SetLoad(700, 100)
	}
	srv.Advance(10 * time.Second)
	clk.add(10 * time.Second)
	pr, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	st := s.Last()
	if st.GPUs != 2 || !st.FromEnergyCounter || st.Samples != 3 {
		t.Errorf("stats %+v", st)
	}
	if math.Abs(st.EnergyJoules-2*(4000+7000)) > 1e-6 || math.Abs(pr.AverageWatts-1100) > 1e-6 || pr.PeakWatts != 1400 {
		t.Errorf("energy %v J avg %v W peak %v W; want 22000 J, 1100 W, 1400 W", st.EnergyJoules, pr.AverageWatts, pr.PeakWatts)
	}
	if st != pr {
		t.Errorf("Last() %+v, Stop() returned %+v", st, pr)
	}
	// 22000 J over 11000 output tokens: 2 J/token.
	if j, ok := st.JoulesPerToken(11000); !ok || j != 2 {
		t.Errorf("joules per token %v, %v; want 2", j, ok)
	}
	// A new interval starts afresh.
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.Advance(time.Second)
	clk.add(time.Second)
	if _, err := s.Stop(); err != nil || s.Last().Samples != 2 {
		t.Errorf("second interval: %v %+v", err, s.Last())
	}
}

func TestPowerSamplerTicks(t *testing.T) {
	srv := gpumock.New(1)
	r, _ := New(srv, nil, Options{})
	s := NewPowerSampler(r, nil, 10*time.Millisecond)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Four samples: the one Start takes and three ticks. Wait for them
	// rather than a fixed time: a loaded machine drops a ticker's ticks.
	for deadline := time.Now().Add(5 * time.Second); len(s.Samples()) < 4 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if n := len(s.Samples()); n < 4 {
		t.Errorf("samples = %d, want several", n)
	}
}

func TestWindowStatsWithoutEnergyCounter(t *testing.T) {
	t0 := time.Unix(0, 0)
	var w Window
	for i, watts := range []float64{100, 300, 300, 100} {
		w.Add(PowerSample{Time: t0.Add(time.Duration(i) * 10 * time.Second), GPUs: 1, Watts: watts, HasPower: true})
	}
	st := w.Stats(time.Time{})
	// Trapezoids: 10*(200) + 10*300 + 10*200 = 7000 J over 30 s.
	if st.FromEnergyCounter || math.Abs(st.EnergyJoules-7000) > 1e-9 || math.Abs(st.AverageWatts-7000.0/30) > 1e-9 || st.PeakWatts != 300 {
		t.Errorf("stats %+v", st)
	}
	if _, ok := w.EnergyAt(t0.Add(5 * time.Second)); ok {
		t.Error("EnergyAt without counters should fail")
	}
	w.Prune(t0.Add(35*time.Second), 10*time.Second)
	if w.Len() != 2 {
		t.Errorf("after prune: %d samples, want 2 (one kept at the horizon)", w.Len())
	}
}

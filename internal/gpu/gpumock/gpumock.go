// Package gpumock is a fake NVML server for tests and demos: a go-nvml
// mock.Interface holding H100-like devices whose power, energy counter and
// other readings the caller sets and advances.
//
// go-nvml v0.13.0-1 ships only a DGX A100 mock server (mock/dgxa100), which
// stubs neither power nor energy; this one stubs exactly what package gpu reads.
package gpumock

import (
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// Server is an nvml.Interface with Devices.
type Server struct {
	mock.Interface
	Devices []*Device

	mu         sync.Mutex
	initReturn nvml.Return
	inits      int
	shutdowns  int
}

var _ nvml.Interface = (*Server)(nil)

// Device is one fake GPU. Lock it (or use its setters) to change readings
// while a Reader may be polling.
type Device struct {
	mock.Device

	sync.Mutex
	Index             int
	UUID              string
	Name              string
	PowerMilliwatts   uint32
	EnergyMillijoules uint64
	LimitMilliwatts   uint32
	UtilPercent       uint32
	MemUsed, MemTotal uint64
	TempCelsius       uint32
	// Fail makes the named getters ("power", "energy", "power_limit",
	// "utilization", "memory", "temperature") return that code.
	Fail map[string]nvml.Return
	// Reads counts getter calls, to check polling is gentle.
	Reads int
}

var _ nvml.Device = (*Device)(nil)

// New returns a server with n H100-like devices, 80 GiB each, idle at 70 W
// with a 700 W limit, and energy counters at deterministic offsets.
func New(n int) *Server {
	s := &Server{initReturn: nvml.SUCCESS}
	for i := range n {
		s.Devices = append(s.Devices, NewDevice(i))
	}
	s.InitFunc = func() nvml.Return {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.inits++
		return s.initReturn
	}
	s.ShutdownFunc = func() nvml.Return {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.shutdowns++
		return nvml.SUCCESS
	}
	s.DeviceGetCountFunc = func() (int, nvml.Return) { return len(s.Devices), nvml.SUCCESS }
	s.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i < 0 || i >= len(s.Devices) {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		return s.Devices[i], nvml.SUCCESS
	}
	s.DeviceGetHandleByUUIDFunc = func(u string) (nvml.Device, nvml.Return) {
		for _, d := range s.Devices {
			if d.UUID == u {
				return d, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	s.ErrorStringFunc = func(r nvml.Return) string { return r.Error() }
	s.SystemGetDriverVersionFunc = func() (string, nvml.Return) { return "570.124.06", nvml.SUCCESS }
	return s
}

// NoDriver returns a server whose Init fails as it does on a machine without
// the NVIDIA driver.
func NoDriver() *Server {
	s := New(0)
	s.initReturn = nvml.ERROR_LIBRARY_NOT_FOUND
	return s
}

// Inits and Shutdowns count the calls, to check Init is called once.
func (s *Server) Inits() int     { s.mu.Lock(); defer s.mu.Unlock(); return s.inits }
func (s *Server) Shutdowns() int { s.mu.Lock(); defer s.mu.Unlock(); return s.shutdowns }

// UUIDFor is the UUID New gives device i.
func UUIDFor(i int) string {
	return fmt.Sprintf("GPU-%08x-5ca1-4e0b-9d1e-%012x", 0x51a0be00+i, 0xc0ffee000+i)
}

// NewDevice returns one H100-like device.
func NewDevice(i int) *Device {
	d := &Device{
		Index:             i,
		UUID:              UUIDFor(i),
		Name:              "NVIDIA H100 80GB HBM3",
		PowerMilliwatts:   70_000,
		EnergyMillijoules: uint64(1_000_000_000 + i*100_000_000),
		LimitMilliwatts:   700_000,
		MemTotal:          80 << 30,
		MemUsed:           1 << 30,
		TempCelsius:       33,
	}
	fail := func(name string) (nvml.Return, bool) {
		d.Reads++
		r, ok := d.Fail[name]
		return r, ok
	}
	d.GetIndexFunc = func() (int, nvml.Return) { return d.Index, nvml.SUCCESS }
	d.GetUUIDFunc = func() (string, nvml.Return) { return d.UUID, nvml.SUCCESS }
	d.GetNameFunc = func() (string, nvml.Return) { return d.Name, nvml.SUCCESS }
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) {
		d.Lock()
		defer d.Unlock()
		if r, ok := fail("power"); ok {
			return 0, r
		}
		return d.PowerMilliwatts, nvml.SUCCESS
	}
	d.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) {
		d.Lock()
		defer d.Unlock()
		if r, ok := fail("energy"); ok {
			return 0, r
		}
		return d.EnergyMillijoules, nvml.SUCCESS
	}
	d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) {
		d.Lock()
		defer d.Unlock()
		if r, ok := fail("power_limit"); ok {
			return 0, r
		}
		return d.LimitMilliwatts, nvml.SUCCESS
	}
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		d.Lock()
		defer d.Unlock()
		if r, ok := fail("utilization"); ok {
			return nvml.Utilization{}, r
		}
		return nvml.Utilization{Gpu: d.UtilPercent, Memory: d.UtilPercent / 2}, nvml.SUCCESS
	}
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		d.Lock()
		defer d.Unlock()
		if r, ok := fail("memory"); ok {
			return nvml.Memory{}, r
		}
		return nvml.Memory{Total: d.MemTotal, Used: d.MemUsed, Free: d.MemTotal - d.MemUsed}, nvml.SUCCESS
	}
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) {
		d.Lock()
		defer d.Unlock()
		if r, ok := fail("temperature"); ok {
			return 0, r
		}
		return d.TempCelsius, nvml.SUCCESS
	}
	return d
}

// SetLoad sets the device's power draw (watts) and utilization (0..100).
func (d *Device) SetLoad(watts float64, utilPercent uint32) {
	d.Lock()
	d.PowerMilliwatts = uint32(watts * 1000)
	d.UtilPercent = utilPercent
	d.Unlock()
}

// Advance runs the device for dt at its current power: the energy counter
// grows by power × dt, as the driver's does.
func (d *Device) Advance(dt time.Duration) {
	d.Lock()
	d.EnergyMillijoules += uint64(float64(d.PowerMilliwatts) * dt.Seconds())
	d.Unlock()
}

// SetFail makes one getter fail with r (nvml.SUCCESS clears it).
func (d *Device) SetFail(field string, r nvml.Return) {
	d.Lock()
	defer d.Unlock()
	if d.Fail == nil {
		d.Fail = map[string]nvml.Return{}
	}
	if r == nvml.SUCCESS {
		delete(d.Fail, field)
		return
	}
	d.Fail[field] = r
}

// ReadCount returns how many getter calls the device has served.
func (d *Device) ReadCount() int { d.Lock(); defer d.Unlock(); return d.Reads }

// Advance advances every device by dt.
func (s *Server) Advance(dt time.Duration) {
	for _, d := range s.Devices {
		d.Advance(dt)
	}
}

// Package gpu reads NVIDIA GPUs through NVML (github.com/NVIDIA/go-nvml)
// behind a small Reader: device selection by index or UUID, cached readings
// refreshed at most every PollInterval, and a null mode when NVML cannot be
// loaded, so the exporter runs unchanged on machines without a driver.
//
// The nvml.Interface is injected: main calls nvml.New() once; tests pass a
// go-nvml mock (see package gpumock).
package gpu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// DefaultPollInterval is the least time between two NVML reads of the same
// device by the Reader. See docs/nvml.md for what a read costs.
const DefaultPollInterval = 5 * time.Second

// Options tunes a Reader.
type Options struct {
	// Selectors pick the devices to read: an index ("0") or a UUID
	// ("GPU-8f2c…"). Empty means every device.
	Selectors []string
	// PollInterval is the least time between two refreshes (default 5 s).
	PollInterval time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Device is a selected GPU's identity.
type Device struct {
	Index int
	UUID  string
	Name  string
}

// Reading is one refresh of one device. A metric whose Has flag is false
// could not be read (unsupported on this GPU, or an NVML error).
type Reading struct {
	Device
	Time time.Time

	PowerWatts         float64
	HasPower           bool
	EnergyJoules       float64 // driver's energy counter since it loaded (GetTotalEnergyConsumption)
	HasEnergy          bool
	PowerLimitWatts    float64 // enforced power limit
	HasPowerLimit      bool
	UtilizationRatio   float64 // fraction of the sample period a kernel ran (0..1)
	HasUtilization     bool
	MemoryUsedBytes    float64
	MemoryTotalBytes   float64
	HasMemory          bool
	TemperatureCelsius float64
	HasTemperature     bool
}

// Readings is one refresh of every selected device, in selection order.
type Readings struct {
	Time time.Time
	GPUs []Reading
}

// Reader reads selected GPUs. It is safe for concurrent use. A Reader whose
// NVML failed to initialise is "null": Up is false, Read returns nothing.
type Reader struct {
	lib      nvml.Interface
	logger   *slog.Logger
	interval time.Duration
	now      func() time.Time

	up      atomic.Bool // NVML initialised and not closed
	devices []Device
	handles []nvml.Device

	mu        sync.Mutex
	last      Readings
	hasLast   bool
	refreshMu sync.Mutex // serialises refreshes without blocking readers of the cache
	warned    map[string]bool
	noSupport map[string]bool
	listeners []func(Readings)
	closed    bool
}

// New initialises NVML through lib and opens the selected devices.
//
// When lib is nil or Init fails (ERROR_LIBRARY_NOT_FOUND where there is no
// driver), New logs one line and returns a null Reader and no error. A
// selector that is not an index or a UUID is a configuration error and is
// returned; a well-formed selector that matches no device is logged and
// skipped, so a missing GPU does not stop the exporter.
func New(lib nvml.Interface, logger *slog.Logger, opts Options) (*Reader, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	for _, s := range opts.Selectors {
		if err := ValidateSelector(s); err != nil {
			return nil, err
		}
	}
	r := &Reader{
		lib:       lib,
		logger:    logger,
		interval:  opts.PollInterval,
		now:       opts.Now,
		warned:    map[string]bool{},
		noSupport: map[string]bool{},
	}
	if r.interval <= 0 {
		r.interval = DefaultPollInterval
	}
	if r.now == nil {
		r.now = time.Now
	}
	if lib == nil {
		logger.Info("NVML disabled: GPU power and energy metrics are off (slaprobe_nvml_up 0)")
		return r, nil
	}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		logger.Warn("NVML not available: GPU power and energy metrics are off (slaprobe_nvml_up 0); probing is unaffected. "+
			"Check that the NVIDIA driver is installed and libnvidia-ml.so.1 is on the library path "+
			"(in a container: the NVIDIA container toolkit with NVIDIA_DRIVER_CAPABILITIES including utility)",
			"err", ret.Error())
		return r, nil
	}
	if err := r.open(opts.Selectors); err != nil {
		logger.Error("NVML: cannot list GPUs; GPU metrics are off (slaprobe_nvml_up 0)", "err", err)
		_ = lib.Shutdown()
		return r, nil
	}
	r.up.Store(true)
	names := make([]string, len(r.devices))
	for i, d := range r.devices {
		names[i] = fmt.Sprintf("%d:%s", d.Index, d.UUID)
	}
	logger.Info("NVML ready", "gpus", strings.Join(names, ","), "poll_interval", r.interval)
	return r, nil
}

// ValidateSelector reports whether s is a device index or a GPU UUID.
func ValidateSelector(s string) error {
	if _, err := parseIndex(s); err == nil {
		return nil
	}
	u := strings.ToUpper(s)
	if strings.HasPrefix(u, "GPU-") && len(s) > len("GPU-") {
		return nil
	}
	if strings.HasPrefix(u, "MIG-") {
		return fmt.Errorf("GPU selector %q: MIG devices are not supported; expected the index or UUID of the whole GPU", s)
	}
	return fmt.Errorf("GPU selector %q: expected a device index such as \"0\" or a UUID such as \"GPU-5f3b…\" (nvidia-smi -L)", s)
}

func parseIndex(s string) (int, error) {
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 {
		return 0, fmt.Errorf("not an index: %q", s)
	}
	return i, nil
}

// Matches reports whether selector s names d (by index, or by UUID, case-insensitively).
func Matches(s string, d Device) bool {
	if i, err := parseIndex(s); err == nil {
		return i == d.Index
	}
	return strings.EqualFold(s, d.UUID)
}

func (r *Reader) open(selectors []string) error {
	n, ret := r.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("DeviceGetCount: %s", ret.Error())
	}
	var all []Device
	var handles []nvml.Device
	for i := 0; i < n; i++ {
		h, ret := r.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			r.logger.Warn("NVML: cannot open GPU; skipping it", "gpu", i, "err", ret.Error())
			continue
		}
		d := Device{Index: i}
		if idx, ret := h.GetIndex(); ret == nvml.SUCCESS {
			d.Index = idx
		}
		if u, ret := h.GetUUID(); ret == nvml.SUCCESS {
			d.UUID = u
		}
		if nm, ret := h.GetName(); ret == nvml.SUCCESS {
			d.Name = nm
		}
		all = append(all, d)
		handles = append(handles, h)
	}
	if len(selectors) == 0 {
		r.devices, r.handles = all, handles
		return nil
	}
	seen := map[int]bool{}
	for _, s := range selectors {
		found := false
		for i, d := range all {
			if Matches(s, d) {
				found = true
				if !seen[i] {
					seen[i] = true
					r.devices = append(r.devices, d)
					r.handles = append(r.handles, handles[i])
				}
			}
		}
		if !found {
			r.logger.Error("NVML: GPU selector matches no device; skipping it", "selector", s, "devices", len(all))
		}
	}
	return nil
}

// Up reports whether NVML initialised.
func (r *Reader) Up() bool { return r != nil && r.up.Load() }

// Devices lists the selected devices.
func (r *Reader) Devices() []Device {
	if r == nil {
		return nil
	}
	return append([]Device(nil), r.devices...)
}

// Select returns the devices that match any of selectors (every device
// when selectors is empty).
func (r *Reader) Select(selectors []string) []Device {
	var out []Device
	for _, d := range r.Devices() {
		if selected(selectors, d) {
			out = append(out, d)
		}
	}
	return out
}

// PollInterval is the least time between refreshes.
func (r *Reader) PollInterval() time.Duration { return r.interval }

// OnRefresh registers fn to be called with every new set of readings (not
// with cached ones), from the goroutine that refreshed.
func (r *Reader) OnRefresh(fn func(Readings)) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.listeners = append(r.listeners, fn)
	r.mu.Unlock()
}

// Read returns the cached readings, refreshing them first when they are older
// than PollInterval. A null Reader returns empty Readings.
func (r *Reader) Read() Readings {
	if !r.Up() {
		return Readings{}
	}
	r.mu.Lock()
	fresh := r.hasLast && r.now().Sub(r.last.Time) < r.interval
	last := r.last
	r.mu.Unlock()
	if fresh {
		return last
	}
	return r.refresh(false)
}

// Refresh reads every device now, whatever the cache age. The background
// loop and the bench PowerSampler use it; scrapes use Read.
func (r *Reader) Refresh() Readings {
	if !r.Up() {
		return Readings{}
	}
	return r.refresh(true)
}

func (r *Reader) refresh(force bool) Readings {
	r.refreshMu.Lock()
	defer r.refreshMu.Unlock()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return Readings{}
	}
	// Another caller may have refreshed while this one waited.
	if !force && r.hasLast && r.now().Sub(r.last.Time) < r.interval {
		last := r.last
		r.mu.Unlock()
		return last
	}
	r.mu.Unlock()

	rs := Readings{Time: r.now(), GPUs: make([]Reading, len(r.devices))}
	for i, d := range r.devices {
		rs.GPUs[i] = r.readDevice(d, r.handles[i], rs.Time)
	}
	r.mu.Lock()
	r.last, r.hasLast = rs, true
	ls := append([]func(Readings){}, r.listeners...)
	r.mu.Unlock()
	for _, fn := range ls {
		fn(rs)
	}
	return rs
}

func (r *Reader) readDevice(d Device, h nvml.Device, t time.Time) Reading {
	rd := Reading{Device: d, Time: t}
	if v, ok := readField(r, d, "power", h.GetPowerUsage); ok {
		rd.PowerWatts, rd.HasPower = float64(v)/1000, true // mW
	}
	if v, ok := readField(r, d, "energy", h.GetTotalEnergyConsumption); ok {
		rd.EnergyJoules, rd.HasEnergy = float64(v)/1000, true // mJ
	}
	if v, ok := readField(r, d, "power_limit", h.GetEnforcedPowerLimit); ok {
		rd.PowerLimitWatts, rd.HasPowerLimit = float64(v)/1000, true // mW
	}
	if v, ok := readField(r, d, "utilization", h.GetUtilizationRates); ok {
		rd.UtilizationRatio, rd.HasUtilization = float64(v.Gpu)/100, true // percent
	}
	if v, ok := readField(r, d, "memory", h.GetMemoryInfo); ok {
		rd.MemoryUsedBytes, rd.MemoryTotalBytes, rd.HasMemory = float64(v.Used), float64(v.Total), true
	}
	temp := func() (uint32, nvml.Return) { return h.GetTemperature(nvml.TEMPERATURE_GPU) }
	if v, ok := readField(r, d, "temperature", temp); ok {
		rd.TemperatureCelsius, rd.HasTemperature = float64(v), true
	}
	return rd
}

// readField calls one NVML getter. NOT_SUPPORTED is remembered so the call is
// not repeated; other errors are logged once per device and field (then at
// debug), since a GPU that fell off the bus fails every poll.
func readField[T any](r *Reader, d Device, field string, get func() (T, nvml.Return)) (T, bool) {
	var zero T
	key := d.UUID + "/" + field
	r.mu.Lock()
	skip := r.noSupport[key]
	r.mu.Unlock()
	if skip {
		return zero, false
	}
	v, ret := get()
	if ret == nvml.SUCCESS {
		return v, true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ret == nvml.ERROR_NOT_SUPPORTED {
		r.noSupport[key] = true
		r.logger.Debug("NVML: metric not supported on this GPU", "gpu", d.Index, "uuid", d.UUID, "metric", field)
		return zero, false
	}
	if !r.warned[key] {
		r.warned[key] = true
		r.logger.Warn("NVML: read failed (logged once per GPU and metric)", "gpu", d.Index, "uuid", d.UUID, "metric", field, "err", ret.Error())
	} else {
		r.logger.Debug("NVML: read failed", "gpu", d.Index, "uuid", d.UUID, "metric", field, "err", ret.Error())
	}
	return zero, false
}

// Run refreshes every PollInterval until ctx ends, so listeners (the energy
// collector) get evenly spaced readings. Optional: Read refreshes lazily.
func (r *Reader) Run(ctx context.Context) {
	if !r.Up() {
		return
	}
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		r.Refresh()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Close shuts NVML down. The Reader is null afterwards.
func (r *Reader) Close() error {
	if !r.Up() {
		return nil
	}
	r.refreshMu.Lock()
	defer r.refreshMu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	r.up.Store(false)
	if ret := r.lib.Shutdown(); ret != nvml.SUCCESS {
		return errors.New("nvml shutdown: " + ret.Error())
	}
	return nil
}

package app

import (
	"context"
	"sync"
	"time"

	"github.com/slaprobe/slaprobe/collector"
	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/workload"
	"github.com/slaprobe/slaprobe/prober"
)

// liveMixes keeps each target's live length mix (the engine's own prompt
// and answer length histograms over workload.DefaultLiveWindow) for the
// status page and slaprobe_live_mix_*: a loop reads the engines every
// tenth of the window, and the page reads what it last found without
// waiting on an engine.
type liveMixes struct {
	live *workload.Live

	mu      sync.Mutex
	targets map[string]prober.Target
}

// addLiveMixes starts the loop, reading every refresh (0: a tenth of the
// window); engine metrics must be on.
func (a *App) addLiveMixes(ctx context.Context, refresh time.Duration) error {
	d, logger := a.Daemon, a.Daemon.Logger()
	if refresh <= 0 {
		refresh = max(workload.DefaultLiveWindow/10, 10*time.Second)
	}
	m := &liveMixes{live: &workload.Live{Seed: 1, Refresh: refresh}, targets: map[string]prober.Target{}}
	d.OnReload(func(c *config.Config) {
		targets, err := c.Targets()
		if err != nil {
			logger.Error("live mix: cannot build targets", "err", err)
			return
		}
		urls := map[string]bool{}
		m.mu.Lock()
		m.targets = map[string]prober.Target{}
		for _, t := range targets {
			m.targets[t.Name] = t
			urls[workload.MetricsURL(t)] = true
		}
		m.mu.Unlock()
		m.live.Retain(urls) // a removed target's mix goes with it
	})
	if err := d.AddCollector(collector.NewLiveMixMetrics(m.mixes)); err != nil {
		return err
	}
	a.mixes = m
	go m.run(ctx, refresh)
	return nil
}

func (m *liveMixes) list() []prober.Target {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]prober.Target, 0, len(m.targets))
	for _, t := range m.targets {
		out = append(out, t)
	}
	return out
}

// run reads every target's engine now and then every refresh.
func (m *liveMixes) run(ctx context.Context, refresh time.Duration) {
	tick := time.NewTicker(refresh)
	defer tick.Stop()
	for {
		for _, t := range m.list() {
			_, _ = m.live.Mix(ctx, t) // an error is kept with the target's mix
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// mix is a target's mix as last read: status.Options.LiveMix.
func (m *liveMixes) mix(target string) (workload.LiveMix, time.Time, error) {
	m.mu.Lock()
	t, ok := m.targets[target]
	m.mu.Unlock()
	if !ok {
		return workload.LiveMix{}, time.Time{}, nil
	}
	return m.live.Cached(t)
}

// mixes are the current mixes of the targets read at least twice.
func (m *liveMixes) mixes() map[string]workload.LiveMix {
	out := map[string]workload.LiveMix{}
	for _, t := range m.list() {
		if mix, read, _ := m.live.Cached(t); !read.IsZero() {
			out[t.Name] = mix
		}
	}
	return out
}

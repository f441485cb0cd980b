package engine

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/slaprobe/slaprobe/prober"
)

// Options tunes every Watcher of a Pool. Zero fields take the defaults.
type Options struct {
	// Interval between background scrapes (default 15 s). Probes add
	// on-demand scrapes, so this only matters while no probe runs.
	Interval time.Duration
	// Timeout of a background scrape (default 5 s).
	Timeout time.Duration
	// ProbeTimeout bounds the on-demand scrape made just before a probe is
	// sent (default 1 s): a slow /metrics must not hold the probe back.
	ProbeTimeout time.Duration
	// Fresh: an on-demand scrape reuses a snapshot younger than this
	// (default 250 ms), so probes sent together share one scrape.
	Fresh time.Duration
	// History is how long snapshots are kept for rates (default 15 min).
	History time.Duration
	// Clock stamps snapshots; default the system clock.
	Clock prober.Clock
}

// Defaults for Options.
const (
	DefaultInterval     = 15 * time.Second
	DefaultTimeout      = 5 * time.Second
	DefaultProbeTimeout = time.Second
	DefaultFresh        = 250 * time.Millisecond
	DefaultHistory      = 15 * time.Minute
	// maxHistory caps the snapshots kept per target whatever History says:
	// one probe per second for 15 minutes stays under it.
	maxHistory = 4096
)

func (o Options) withDefaults() Options {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = DefaultProbeTimeout
	}
	if o.Fresh <= 0 {
		o.Fresh = DefaultFresh
	}
	if o.History <= 0 {
		o.History = DefaultHistory
	}
	if o.Clock == nil {
		o.Clock = prober.SystemClock{}
	}
	return o
}

// ErrDown is returned by Refresh while the endpoint is failing: probes do
// not wait on a dead endpoint, the background loop retries it.
var ErrDown = errors.New("engine metrics endpoint is down")

// Watcher scrapes one target's engine metrics in the background and on
// demand, and keeps recent snapshots for rates. It is safe for concurrent use.
type Watcher struct {
	target string
	url    string
	opts   Options
	logger *slog.Logger
	notify func(target string, s Snapshot)

	mu       sync.Mutex
	client   *http.Client
	history  []Snapshot // ascending Time
	tried    bool       // at least one scrape finished
	up       bool
	failing  bool // the failure was logged; later ones go to debug
	everUp   bool
	errors   uint64
	lastErr  error
	inflight *scrapeCall

	noted      map[string]bool // notes already logged (bounded by maxNotes)
	propsTried bool
	props      Props
	hasProps   bool
}

// maxNotes bounds the distinct snapshot notes a Watcher remembers having
// logged; later new ones go to debug.
const maxNotes = 64

type scrapeCall struct {
	done chan struct{}
	snap Snapshot
	err  error
}

// NewWatcher returns a Watcher for one target; Run starts its background
// loop. Most callers use a Pool instead.
func NewWatcher(target, url string, client *http.Client, opts Options, logger *slog.Logger) *Watcher {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Watcher{
		target: target,
		url:    url,
		client: client,
		opts:   opts.withDefaults(),
		logger: logger.With("target", target, "url", url),
	}
}

// Target is the target name.
func (w *Watcher) Target() string { return w.target }

// URL is the metrics URL.
func (w *Watcher) URL() string { return w.url }

// Run scrapes every Interval until ctx ends. The first scrape is immediate.
func (w *Watcher) Run(ctx context.Context) {
	t := time.NewTicker(w.opts.Interval)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
		_, _ = w.Scrape(sctx)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Refresh is the on-demand scrape made before a probe. It reuses a snapshot
// younger than Fresh, joins a scrape already in flight, gives up after
// ProbeTimeout, and returns ErrDown at once while the endpoint is failing.
func (w *Watcher) Refresh(ctx context.Context) (Snapshot, error) {
	return w.refresh(ctx, func(s Snapshot) bool { return w.opts.Clock.Now().Sub(s.Time) < w.opts.Fresh })
}

// RefreshAfter is Refresh for a snapshot of the engine after t (the end of
// a probe, whose own tokens it must count): it reuses only a snapshot taken
// at or after t, however fresh an older one is, and otherwise scrapes.
func (w *Watcher) RefreshAfter(ctx context.Context, t time.Time) (Snapshot, error) {
	return w.refresh(ctx, func(s Snapshot) bool { return !s.Time.Before(t) })
}

// refresh returns the latest snapshot when reuse accepts it, else scrapes.
func (w *Watcher) refresh(ctx context.Context, reuse func(Snapshot) bool) (Snapshot, error) {
	w.mu.Lock()
	if w.tried && !w.up {
		w.mu.Unlock()
		return Snapshot{}, ErrDown
	}
	if n := len(w.history); n > 0 && reuse(w.history[n-1]) {
		s := w.history[n-1]
		w.mu.Unlock()
		return s, nil
	}
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, w.opts.ProbeTimeout)
	defer cancel()
	return w.Scrape(ctx)
}

// Scrape scrapes now (joining a scrape already in flight) and records the
// result. ctx bounds the wait.
func (w *Watcher) Scrape(ctx context.Context) (Snapshot, error) {
	w.mu.Lock()
	call := w.inflight
	if call == nil {
		call = &scrapeCall{done: make(chan struct{})}
		w.inflight = call
		client := w.client
		w.mu.Unlock()
		// The scrape runs under the caller's deadline; a caller joining it
		// later waits no longer than its own.
		go w.do(ctx, client, call)
	} else {
		w.mu.Unlock()
	}
	select {
	case <-call.done:
		return call.snap, call.err
	case <-ctx.Done():
		return Snapshot{}, ctx.Err()
	}
}

func (w *Watcher) do(ctx context.Context, client *http.Client, call *scrapeCall) {
	snap, err := scrapeAt(ctx, client, w.url, w.opts.Clock.Now)
	call.snap, call.err = snap, err
	// A scrape cancelled by its caller (shutdown, a probe abandoned) says
	// nothing about the endpoint; a deadline that passed does.
	if !errors.Is(err, context.Canceled) {
		w.record(snap, err)
	}
	if err == nil && readsProps(snap.Flavor) {
		w.readPropsOnce(ctx, client)
	}
	// Listeners run before waiters wake and before the next scrape may
	// start, so they see snapshots in order and a caller of Scrape sees
	// their effect.
	if err == nil && w.notify != nil {
		w.notify(w.target, snap)
	}
	w.mu.Lock()
	w.inflight = nil
	w.mu.Unlock()
	close(call.done)
}

func (w *Watcher) record(snap Snapshot, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tried = true
	if err != nil {
		w.errors++
		w.lastErr = err
		w.up = false
		if !w.failing {
			w.failing = true
			w.logger.Warn("engine metrics unavailable; probing continues without them (logged once until it recovers)", "err", err)
		} else {
			w.logger.Debug("engine metrics still unavailable", "err", err)
		}
		return
	}
	switch {
	case w.failing:
		w.logger.Info("engine metrics recovered", "flavor", snap.Flavor)
	case !w.everUp:
		w.logger.Info("engine metrics found", "flavor", snap.Flavor)
	}
	w.failing, w.up, w.everUp, w.lastErr = false, true, true, nil
	for _, n := range snap.Notes {
		if w.noted[n] {
			continue
		}
		if len(w.noted) >= maxNotes {
			w.logger.Debug("engine metric not read", "reason", n)
			continue
		}
		if w.noted == nil {
			w.noted = map[string]bool{}
		}
		w.noted[n] = true
		w.logger.Warn("engine metric not read (logged once)", "reason", n)
	}
	w.append(snap)
}

// append keeps history sorted and bounded by age and count.
func (w *Watcher) append(s Snapshot) {
	// Only the newest snapshot keeps the engine's histograms, notes and
	// cache tiers: rates need the scalars alone, and thousands of copies of
	// histograms would be most of a target's memory.
	if n := len(w.history); n > 0 && s.Time.Before(w.history[n-1].Time) {
		i := sort.Search(n, func(i int) bool { return w.history[i].Time.After(s.Time) })
		s.Hists, s.Notes, s.CacheTokensByTier = nil, nil, nil
		w.history = append(w.history, Snapshot{})
		copy(w.history[i+1:], w.history[i:])
		w.history[i] = s
	} else {
		if n > 0 {
			w.history[n-1].Hists, w.history[n-1].Notes, w.history[n-1].CacheTokensByTier = nil, nil, nil
		}
		w.history = append(w.history, s)
	}
	cut := 0
	horizon := w.history[len(w.history)-1].Time.Add(-w.opts.History)
	for cut < len(w.history)-1 && w.history[cut].Time.Before(horizon) {
		cut++
	}
	if over := len(w.history) - cut - maxHistory; over > 0 {
		cut += over
	}
	if cut > 0 {
		w.history = append(w.history[:0], w.history[cut:]...)
	}
}

// Status is what the collectors export about a Watcher.
type Status struct {
	Target       string
	URL          string
	Up           bool // the last scrape succeeded
	Tried        bool // a scrape has finished
	ScrapeErrors uint64
	LastErr      error
	Latest       Snapshot
	HasLatest    bool
	// Props is what llama.cpp server's GET /props said, read once when the
	// watcher first found llamacpp: metrics.
	Props    Props
	HasProps bool
}

// Status returns the Watcher's current state.
func (w *Watcher) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := Status{Target: w.target, URL: w.url, Up: w.up, Tried: w.tried, ScrapeErrors: w.errors, LastErr: w.lastErr,
		Props: w.props, HasProps: w.hasProps}
	if n := len(w.history); n > 0 {
		st.Latest, st.HasLatest = w.history[n-1], true
	}
	return st
}

// Latest returns the newest snapshot, if any.
func (w *Watcher) Latest() (Snapshot, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.history); n > 0 {
		return w.history[n-1], true
	}
	return Snapshot{}, false
}

// Window returns the snapshots no older than d before the newest one,
// oldest first. The slice is a copy.
func (w *Watcher) Window(d time.Duration) []Snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(w.history)
	if n == 0 {
		return nil
	}
	horizon := w.history[n-1].Time.Add(-d)
	i := sort.Search(n, func(i int) bool { return !w.history[i].Time.Before(horizon) })
	return append([]Snapshot(nil), w.history[i:]...)
}

func (w *Watcher) setClient(c *http.Client) {
	w.mu.Lock()
	w.client = c
	w.mu.Unlock()
}

// Pool holds one Watcher per target and runs their background loops.
type Pool struct {
	opts   Options
	logger *slog.Logger

	mu        sync.Mutex
	ctx       context.Context
	cancelAll context.CancelFunc
	watchers  map[string]*poolEntry
	listeners []func(target string, s Snapshot)
	wg        sync.WaitGroup
	closed    bool
}

type poolEntry struct {
	w      *Watcher
	cancel context.CancelFunc
	done   chan struct{}
}

// NewPool returns an empty Pool; Sync adds targets.
func NewPool(opts Options, logger *slog.Logger) *Pool {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Pool{opts: opts.withDefaults(), logger: logger, ctx: ctx, cancelAll: cancel, watchers: map[string]*poolEntry{}}
}

// Options returns the pool's options with defaults filled in.
func (p *Pool) Options() Options {
	if p == nil {
		return Options{}.withDefaults()
	}
	return p.opts
}

// MetricsURL is the engine metrics URL of t: MetricsURL, or BaseURL + "/metrics".
func MetricsURL(t prober.Target) string {
	if t.MetricsURL != "" {
		return t.MetricsURL
	}
	return strings.TrimRight(t.BaseURL, "/") + "/metrics"
}

// OnSnapshot registers fn to be called after every successful scrape of any
// target, from the scraping goroutine. Register before Sync.
func (p *Pool) OnSnapshot(fn func(target string, s Snapshot)) {
	p.mu.Lock()
	p.listeners = append(p.listeners, fn)
	p.mu.Unlock()
}

func (p *Pool) fire(target string, s Snapshot) {
	p.mu.Lock()
	ls := append([]func(string, Snapshot){}, p.listeners...)
	p.mu.Unlock()
	for _, fn := range ls {
		fn(target, s)
	}
}

// Sync makes the pool watch exactly targets: it starts watchers for new
// targets, stops those of removed ones, and keeps (with their history) those
// whose metrics URL is unchanged. Call it at start and after every reload.
func (p *Pool) Sync(targets []prober.Target) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	want := map[string]prober.Target{}
	for _, t := range targets {
		want[t.Name] = t
	}
	for name, e := range p.watchers {
		t, ok := want[name]
		if ok && MetricsURL(t) == e.w.url {
			e.w.setClient(t.Client)
			continue
		}
		e.cancel()
		delete(p.watchers, name)
	}
	for name, t := range want {
		if _, ok := p.watchers[name]; ok {
			continue
		}
		w := NewWatcher(name, MetricsURL(t), t.Client, p.opts, p.logger)
		w.notify = p.fire
		ctx, cancel := context.WithCancel(p.ctx)
		e := &poolEntry{w: w, cancel: cancel, done: make(chan struct{})}
		p.watchers[name] = e
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer close(e.done)
			w.Run(ctx)
		}()
	}
}

// Add watches one more target without a background loop; for tests and
// one-shot commands that drive scrapes themselves.
func (p *Pool) Add(t prober.Target) *Watcher {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.watchers[t.Name]; ok {
		return e.w
	}
	w := NewWatcher(t.Name, MetricsURL(t), t.Client, p.opts, p.logger)
	w.notify = p.fire
	done := make(chan struct{})
	close(done)
	p.watchers[t.Name] = &poolEntry{w: w, cancel: func() {}, done: done}
	return w
}

// Watcher returns the target's Watcher, or nil.
func (p *Pool) Watcher(target string) *Watcher {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.watchers[target]; ok {
		return e.w
	}
	return nil
}

// Watchers returns all watchers sorted by target.
func (p *Pool) Watchers() []*Watcher {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*Watcher, 0, len(p.watchers))
	for _, e := range p.watchers {
		out = append(out, e.w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].target < out[j].target })
	return out
}

// Close stops every background loop and waits for them.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	p.cancelAll()
	p.mu.Unlock()
	p.wg.Wait()
}

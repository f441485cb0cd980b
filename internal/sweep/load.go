package sweep

// This file holds load generation: the closed loop (N streams, each
// sending again as soon as its request ends) and the burst (N at once).
// For a conversation scenario one Run is a whole conversation, so a step
// holds N conversations in flight (or sends N at once), each pacing its
// own turns.

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slaprobe/slaprobe/prober"
)

// Runner is the part of *Prober that load generation needs. Sweeps take it
// as an interface so tests can drive them with a fake.
type Runner interface {
	Prepare(ctx context.Context, t prober.Target, model string, s prober.Scenario) (*prober.Prepared, error)
	Run(ctx context.Context, t prober.Target, prep *prober.Prepared) prober.Result
}

var _ Runner = (*prober.Prober)(nil)

// closedLoopPlan describes one closed-loop step: N workers, each re-issuing
// a request as soon as its previous one completes.
type closedLoopPlan struct {
	N      int
	Warmup time.Duration // ramp-up excluded from the measurement
	Window time.Duration // steady window
	Clock  prober.Clock
	// OnWindowStart and OnWindowEnd run on the coordinating goroutine at the
	// window's edges (power sampling). They must be quick.
	OnWindowStart, OnWindowEnd func()
}

// loadOutcome is what one step of load produced, before it is summarised.
type loadOutcome struct {
	Sampled []prober.Result // requests that make up the per-request statistics
	// RoundEnds holds, for a burst step of several rounds, the end index in
	// Sampled of each round; nil for one round and for the closed loop.
	RoundEnds   []int
	Tokens      float64   // output tokens attributed to the measured span
	SpanStart   time.Time // steady window (closed loop) or release (burst)
	SpanEnd     time.Time // window end (closed loop) or last token (burst)
	Started     time.Time
	Finished    time.Time
	MaxInFlight int
	Interrupted bool // ctx was cancelled before the step completed
}

// inFlight counts requests in flight and remembers the highest count seen.
type inFlight struct {
	cur, max atomic.Int64
}

func (f *inFlight) inc() {
	n := f.cur.Add(1)
	for {
		m := f.max.Load()
		if n <= m || f.max.CompareAndSwap(m, n) {
			return
		}
	}
}

func (f *inFlight) dec() { f.cur.Add(-1) }

// runClosedLoop holds exactly plan.N requests in flight. Timeline:
//
//	t0 ── warm-up ── ws ── steady window ── we ── drain ── done
//
// Requests that start inside [ws, we) are the sample. Workers keep
// re-issuing after we ("fillers"), so every sampled request runs its whole
// life with N in flight; once the last request that started before we has
// finished, the fillers are cancelled and discarded. System throughput
// counts only tokens arriving inside [ws, we], from every request that
// overlaps the window, warm-up ones included.
func runClosedLoop(ctx context.Context, r Runner, t prober.Target, prep *prober.Prepared, plan closedLoopPlan) loadOutcome {
	clock := plan.Clock
	if clock == nil {
		clock = prober.SystemClock{}
	}
	runCtx, cancelRuns := context.WithCancel(ctx)
	defer cancelRuns()

	var (
		mu       sync.Mutex
		closed   bool // the window has ended: new requests are fillers
		pending  int  // non-filler requests still running
		drained  = make(chan struct{})
		signaled bool
		counted  []prober.Result // every non-filler result (warm-up and sampled)
		sampled  []prober.Result
		flight   inFlight
		wg       sync.WaitGroup
	)
	t.WarmConnections(ctx, plan.N)
	t0 := clock.Now()
	ws := t0.Add(plan.Warmup)
	we := ws.Add(plan.Window)
	out := loadOutcome{Started: t0, SpanStart: ws, SpanEnd: we}

	worker := func() {
		defer wg.Done()
		for runCtx.Err() == nil {
			mu.Lock()
			// By the clock, not only by closed: the main goroutine sets
			// closed when its timer for we fires, which on a loaded machine
			// can be milliseconds late, and a request started in between
			// would be taken for a sample.
			now := clock.Now()
			filler := closed || !now.Before(we)
			isSample := !filler && !now.Before(ws)
			if !filler {
				pending++
			}
			mu.Unlock()

			flight.inc()
			res := r.Run(runCtx, t, prep)
			flight.dec()

			if filler {
				continue // started after the window: never measured
			}
			mu.Lock()
			counted = append(counted, res)
			if isSample {
				sampled = append(sampled, res)
			}
			pending--
			if closed && pending == 0 && !signaled {
				signaled = true
				close(drained)
			}
			mu.Unlock()
		}
	}
	wg.Add(plan.N)
	for range plan.N {
		go worker()
	}

	interrupted := !sleepUntil(ctx, clock, ws)
	if !interrupted {
		if plan.OnWindowStart != nil {
			plan.OnWindowStart()
		}
		interrupted = !sleepUntil(ctx, clock, we)
		if plan.OnWindowEnd != nil && !interrupted {
			plan.OnWindowEnd()
		}
	}
	if !interrupted {
		mu.Lock()
		closed = true
		if pending == 0 && !signaled {
			signaled = true
			close(drained)
		}
		mu.Unlock()
		select {
		case <-drained:
		case <-ctx.Done():
			interrupted = true
		}
	}
	cancelRuns()
	wg.Wait()

	out.Finished = clock.Now()
	out.MaxInFlight = int(flight.max.Load())
	out.Interrupted = interrupted
	out.Sampled = sampled
	for i := range counted {
		for _, turn := range turnsOf(&counted[i]) { // every turn of a conversation
			out.Tokens += tokensInWindow(&turn, ws, we)
		}
	}
	return out
}

// runBurst prepares N goroutines, parks them on a barrier, then releases
// them together so that all N requests are written at once. It returns when
// every request has finished.
func runBurst(ctx context.Context, r Runner, t prober.Target, prep *prober.Prepared, n int, clock prober.Clock, onRelease func()) loadOutcome {
	if clock == nil {
		clock = prober.SystemClock{}
	}
	var (
		ready, done sync.WaitGroup
		release     = make(chan struct{})
		results     = make([]prober.Result, n)
		flight      inFlight
	)
	t.WarmConnections(ctx, n)
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-release
			flight.inc()
			results[i] = r.Run(ctx, t, prep)
			flight.dec()
		}()
	}
	ready.Wait()
	t0 := clock.Now()
	if onRelease != nil {
		onRelease()
	}
	close(release)
	done.Wait()

	out := loadOutcome{Started: t0, SpanStart: t0, Sampled: results, Finished: clock.Now(), Interrupted: ctx.Err() != nil}
	out.MaxInFlight = int(flight.max.Load())
	out.SpanEnd = t0
	for i := range results {
		for _, res := range turnsOf(&results[i]) { // every turn of a conversation
			if countsTokens(&res) {
				out.Tokens += float64(res.OutputTokens)
				if res.LastToken.After(out.SpanEnd) {
					out.SpanEnd = res.LastToken
				}
			}
		}
	}
	return out
}

// countsTokens reports whether r delivered output that counts toward
// system throughput: completed streams only, as the engine's own counters
// would also drop an aborted one.
func countsTokens(r *prober.Result) bool {
	return (r.Kind == prober.KindSuccess || r.Kind == prober.KindShortOutput) &&
		r.OutputTokens > 0 && !r.FirstToken.IsZero() && !r.LastToken.Before(r.FirstToken)
}

// tokensInWindow is how many of r's output tokens arrived inside [ws, we].
// Result keeps no per-token timestamps, so the count assumes what a
// steadily decoding stream does: the first chunk's tokens arrive at
// FirstToken and the rest are spread evenly over (FirstToken, LastToken].
// Summed over many streams, the error is a fraction of one token per
// stream crossing a window edge.
func tokensInWindow(r *prober.Result, ws, we time.Time) float64 {
	if !countsTokens(r) {
		return 0
	}
	k := r.FirstChunkTokens
	if k < 1 {
		k = 1
	}
	if k > r.OutputTokens {
		k = r.OutputTokens
	}
	var n float64
	if !r.FirstToken.Before(ws) && !r.FirstToken.After(we) {
		n += float64(k)
	}
	rest := r.OutputTokens - k
	if rest == 0 {
		return n
	}
	span := r.LastToken.Sub(r.FirstToken)
	if span <= 0 { // everything arrived at once
		if !r.LastToken.Before(ws) && !r.LastToken.After(we) {
			n += float64(rest)
		}
		return n
	}
	lo, hi := r.FirstToken, r.LastToken
	if ws.After(lo) {
		lo = ws
	}
	if we.Before(hi) {
		hi = we
	}
	if hi.After(lo) {
		n += float64(rest) * float64(hi.Sub(lo)) / float64(span)
	}
	return n
}

// sleepUntil waits until the clock reads at least deadline. It returns
// false when ctx ends first.
func sleepUntil(ctx context.Context, clock prober.Clock, deadline time.Time) bool {
	for {
		d := deadline.Sub(clock.Now())
		if d <= 0 {
			return true
		}
		timer := time.NewTimer(d)
		select {
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-timer.C:
		}
	}
}

package sweep

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/prober"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// swFakeEngine is a Runner that behaves like a tiny continuous-batching
// server without any network: prefills run one at a time (so a burst
// queues), then every request decodes its tokens at a step time that grows
// with the number of requests in flight.
type swFakeEngine struct {
	prefill  time.Duration             // per request, serialised
	step     func(n int) time.Duration // time per output token with n in flight
	out      int                       // output tokens per request
	failWhen func(n int) bool          // fail requests started with n in flight

	prefillMu sync.Mutex

	mu              sync.Mutex
	inflight, maxIn int
	starts          []time.Time
	queueSum        float64
	queueCount      float64
	tokenTimes      []time.Time // arrival of every output token, when recordTokens
	recordTokens    bool
}

func (f *swFakeEngine) token(at time.Time) {
	if f.recordTokens {
		f.mu.Lock()
		f.tokenTimes = append(f.tokenTimes, at)
		f.mu.Unlock()
	}
}

// tokensBetween counts recorded tokens that arrived in [ws, we] exactly.
func (f *swFakeEngine) tokensBetween(ws, we time.Time) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, at := range f.tokenTimes {
		if !at.Before(ws) && !at.After(we) {
			n++
		}
	}
	return n
}

func newSwFakeEngine() *swFakeEngine {
	return &swFakeEngine{
		prefill: 2 * time.Millisecond,
		step:    func(n int) time.Duration { return time.Millisecond + time.Duration(n)*100*time.Microsecond },
		out:     11,
	}
}

func (f *swFakeEngine) Prepare(_ context.Context, t prober.Target, model string, s prober.Scenario) (*prober.Prepared, error) {
	return &prober.Prepared{Target: t.Name, Model: model, Scenario: s}, nil
}

func (f *swFakeEngine) Run(ctx context.Context, t prober.Target, prep *prober.Prepared) prober.Result {
	f.mu.Lock()
	f.inflight++
	n := f.inflight
	f.maxIn = max(f.maxIn, n)
	start := time.Now()
	f.starts = append(f.starts, start)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inflight--
		f.mu.Unlock()
	}()
	res := prober.Result{Target: t.Name, Model: prep.Model, Scenario: prep.Scenario.Name, Start: start,
		PromptTokens: prep.Scenario.InputTokens, RequestedTokens: f.out, FirstChunkTokens: 1}
	fail := func() prober.Result {
		res.Kind, res.Reason = prober.KindError, prober.ReasonTimeout
		return res
	}
	if f.failWhen != nil && f.failWhen(n) {
		res.Kind, res.Reason = prober.KindError, prober.ReasonHTTP5xx
		return res
	}

	f.prefillMu.Lock()
	queued := time.Since(start)
	ok := sleepUntil(ctx, prober.SystemClock{}, time.Now().Add(f.prefill))
	f.prefillMu.Unlock()
	f.mu.Lock()
	f.queueSum += queued.Seconds()
	f.queueCount++
	f.mu.Unlock()
	if !ok {
		return fail()
	}
	res.FirstToken = time.Now()
	times := []time.Time{res.FirstToken}
	for i := 1; i < f.out; i++ {
		f.mu.Lock()
		cur := f.inflight
		f.mu.Unlock()
		if !sleepUntil(ctx, prober.SystemClock{}, time.Now().Add(f.step(cur))) {
			return fail()
		}
		times = append(times, time.Now())
	}
	res.LastToken = times[len(times)-1]
	for _, at := range times { // a stream's tokens count once it completes
		f.token(at)
	}
	res.OutputTokens = f.out
	res.Kind = prober.KindSuccess
	return res
}

func (f *swFakeEngine) current() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inflight
}

func (f *swFakeEngine) counters(context.Context) (EngineCounters, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return EngineCounters{QueueTimeSum: f.queueSum, QueueTimeCount: f.queueCount, HasQueueTime: true}, nil
}

func swScenario() prober.Scenario {
	return prober.Scenario{Name: "tiny", Family: prober.FamilyCustom, InputTokens: 100, OutputTokens: 11,
		Interval: time.Second, Timeout: 10 * time.Second, Thresholds: prober.Thresholds{TTFT: time.Second}}
}

func TestClosedLoopHoldsN(t *testing.T) {
	testproc.Quiet(t) // counts tokens in a timed window
	for _, n := range []int{1, 4, 16} {
		f := newSwFakeEngine()
		f.prefill = 0
		f.recordTokens = true
		prep, _ := f.Prepare(context.Background(), prober.Target{Name: "t"}, "m", swScenario())

		// Sample the engine's in-flight count through the steady window.
		var samples, atN int
		stop := make(chan struct{})
		var wg sync.WaitGroup
		plan := closedLoopPlan{N: n, Warmup: 50 * time.Millisecond, Window: 300 * time.Millisecond,
			OnWindowStart: func() {
				wg.Add(1)
				go func() {
					defer wg.Done()
					tick := time.NewTicker(2 * time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							return
						case <-tick.C:
							samples++
							if f.current() == n {
								atN++
							}
						}
					}
				}()
			},
			OnWindowEnd: func() { close(stop) },
		}
		out := runClosedLoop(context.Background(), f, prober.Target{Name: "t"}, prep, plan)
		wg.Wait()
		if out.Interrupted {
			t.Fatalf("N=%d: interrupted", n)
		}
		if out.MaxInFlight != n || f.maxIn != n {
			t.Errorf("N=%d: max in flight client=%d engine=%d; want %d", n, out.MaxInFlight, f.maxIn, n)
		}
		if frac := float64(atN) / float64(samples); samples == 0 || frac < 0.9 {
			t.Errorf("N=%d: engine had N in flight in %d of %d samples of the window; want ≥ 90 %%", n, atN, samples)
		}
		if f.current() != 0 {
			t.Errorf("N=%d: %d requests still in flight after the step", n, f.current())
		}
		if len(out.Sampled) < n {
			t.Errorf("N=%d: %d sampled requests; want at least N", n, len(out.Sampled))
		}
		for _, r := range out.Sampled {
			if r.Kind != prober.KindSuccess {
				t.Errorf("N=%d: sampled request failed (%s): fillers must be dropped, sampled ones must finish", n, r.Reason)
			}
			// The worker decides "sampled" just before calling Run, which
			// stamps Start a moment later.
			if r.Start.Before(out.SpanStart) || r.Start.After(out.SpanEnd.Add(5*time.Millisecond)) {
				t.Errorf("N=%d: sampled request started at %v, outside the window", n, r.Start.Sub(out.SpanStart))
			}
		}
		// The window's token count, from FirstToken/LastToken alone, matches
		// the exact count of recorded arrivals within a token per stream
		// crossing each window edge.
		exact := f.tokensBetween(out.SpanStart, out.SpanEnd)
		if diff := math.Abs(out.Tokens - float64(exact)); diff > float64(2*n) {
			t.Errorf("N=%d: %.1f tokens counted in the window; exact count %d", n, out.Tokens, exact)
		}
		// And it is N streams' worth: at most N tokens per step time.
		if limit := float64(n) * out.SpanEnd.Sub(out.SpanStart).Seconds() / f.step(n).Seconds(); out.Tokens > limit*1.02 || out.Tokens < limit*0.3 {
			t.Errorf("N=%d: %.0f tokens in the window; N streams at full speed give %.0f", n, out.Tokens, limit)
		}
	}
}

func TestBurstSendsAtOnce(t *testing.T) {
	f := newSwFakeEngine()
	f.prefill = time.Millisecond
	prep, _ := f.Prepare(context.Background(), prober.Target{Name: "t"}, "m", swScenario())
	const n = 64
	out := runBurst(context.Background(), f, prober.Target{Name: "t"}, prep, n, nil, nil)
	if len(out.Sampled) != n || f.maxIn != n || out.MaxInFlight != n {
		t.Fatalf("burst of %d: %d results, engine max in flight %d, client %d", n, len(out.Sampled), f.maxIn, out.MaxInFlight)
	}
	first, last := f.starts[0], f.starts[0]
	for _, s := range f.starts {
		if s.Before(first) {
			first = s
		}
		if s.After(last) {
			last = s
		}
	}
	if spread := last.Sub(first); spread > 50*time.Millisecond {
		t.Errorf("burst of %d arrived over %v; want all at once", n, spread)
	}
	// Prefills are serialised, so the k-th request waits k-1 prefills.
	var maxTTFT time.Duration
	for _, r := range out.Sampled {
		maxTTFT = max(maxTTFT, r.TTFT())
	}
	if maxTTFT < time.Duration(n-1)*f.prefill {
		t.Errorf("last TTFT %v; want at least %v: the burst should have queued", maxTTFT, time.Duration(n-1)*f.prefill)
	}
	if out.Tokens != float64(n*f.out) {
		t.Errorf("burst tokens = %g; want %d", out.Tokens, n*f.out)
	}
}

func TestTokensInWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	r := prober.Result{Kind: prober.KindSuccess, Start: at(0), FirstToken: at(1), LastToken: at(11), OutputTokens: 101, FirstChunkTokens: 1}
	for _, tc := range []struct {
		ws, we float64
		want   float64
	}{
		{0, 20, 101},        // whole stream inside
		{1, 11, 101},        // window equals the stream
		{6, 11, 50},         // second half: 100 tokens over 10 s
		{0, 6, 51},          // first token + half of the rest
		{12, 20, 0},         // after
		{-5, 0.5, 0},        // before the first token
		{3.5, 4.5, 10},      // one second in the middle
		{0.999, 1.001, 1.0}, // just the first token (plus a sliver)
	} {
		got := tokensInWindow(&r, at(tc.ws), at(tc.we))
		if math.Abs(got-tc.want) > 0.05 {
			t.Errorf("window [%g, %g]: %g tokens; want %g", tc.ws, tc.we, got, tc.want)
		}
	}
	// A first chunk carrying 5 tokens (speculative decoding).
	r.FirstChunkTokens = 5
	if got := tokensInWindow(&r, at(0), at(1.5)); math.Abs(got-(5+96*0.05)) > 1e-6 {
		t.Errorf("first chunk of 5: %g tokens; want %g", got, 5+96*0.05)
	}
	// Failed requests do not count.
	r.Kind = prober.KindError
	if got := tokensInWindow(&r, at(0), at(20)); got != 0 {
		t.Errorf("failed request counted %g tokens", got)
	}
}

func TestClosedLoopCancel(t *testing.T) {
	f := newSwFakeEngine()
	prep, _ := f.Prepare(context.Background(), prober.Target{Name: "t"}, "m", swScenario())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	out := runClosedLoop(ctx, f, prober.Target{Name: "t"}, prep, closedLoopPlan{N: 8, Warmup: time.Second, Window: 10 * time.Second})
	if !out.Interrupted {
		t.Error("step not marked interrupted")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("cancel took %v; want a prompt stop", d)
	}
	if f.current() != 0 {
		t.Errorf("%d requests left in flight", f.current())
	}
}

package tracing

import (
	"runtime"
	"sync"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// The receivers' time budget. A valid export just under the size limit
// takes tens of milliseconds to read and walk, allocating as it goes (the
// collector's work follows), and grpc-go reads and inflates a gRPC export
// before any handler runs. Clients that send such exports back to back
// keep the receivers' slots full, and the decoders then take whole cores
// from the probes (whose timing is the point of slaprobe) and from
// /metrics. So both receivers draw on one budget: the time their exports
// hold a slot (read, inflate, walk) refills at decodeShare of GOMAXPROCS
// seconds per second, up to decodeBurst. While it is spent, an export is
// refused at once, before its body is read: HTTP 503 with Retry-After, gRPC
// UNAVAILABLE, both retried by OTLP exporters. A refusal costs a header
// parse and a short answer.
//
// The time charged is wall time while the slot is held, measured by the
// process itself, so the budget holds whatever the CPU's speed: on a
// machine whose cores are busy elsewhere a decode takes longer and fewer
// are admitted, which is what the probes need then. A client that sends
// slowly spends the budget as it would hold a slot: the receivers are
// refused to others meanwhile, as they are when both slots are held; the
// probes are not slowed by it.
//
// An engine's own exporter needs far less: vLLM's batch of 512 spans is
// about 1 MiB and walks in a few milliseconds, so at one export a second it
// spends under 1 % of one core.
const (
	// decodeShare is the fraction of GOMAXPROCS the receivers may keep
	// busy on average: an eighth, a quarter of one core on two.
	decodeShare = 0.125
	// decodeBurst is the most the receivers may spend at once after a
	// quiet time.
	decodeBurst = 500 * time.Millisecond
	// yieldEvery is how many spans a walk hands on between two yields of
	// its goroutine (runtime.Gosched), so that a probe's goroutine woken
	// meanwhile waits for microseconds, not a 10 ms time slice.
	yieldEvery = 32
)

// RefusedBudget: the receivers' decode time budget is spent (a flood of
// exports). HTTP 503, gRPC Unavailable: both are retried by OTLP exporters.
const RefusedBudget = "decode_budget"

// timeBudget is a token bucket of time: take reports whether any is left,
// charge spends what was used (it may go below zero: an export admitted
// is never cut short, and the debt is paid before the next one).
type timeBudget struct {
	share float64 // seconds earned per second
	burst time.Duration
	now   func() time.Time

	mu     sync.Mutex
	left   time.Duration
	filled time.Time
}

func newTimeBudget(share float64, burst time.Duration, now func() time.Time) *timeBudget {
	if now == nil {
		now = time.Now
	}
	return &timeBudget{share: share, burst: burst, now: now, left: burst, filled: now()}
}

// newDecodeBudget is the receivers' budget: decodeShare of GOMAXPROCS.
func newDecodeBudget() *timeBudget {
	return newTimeBudget(decodeShare*float64(runtime.GOMAXPROCS(0)), decodeBurst, nil)
}

// refill adds what was earned since the last refill. b.mu is held.
func (b *timeBudget) refill() {
	now := b.now()
	if d := now.Sub(b.filled); d > 0 {
		b.left = min(b.burst, b.left+time.Duration(float64(d)*b.share))
	}
	b.filled = now
}

// take reports whether some budget is left, and the time the work starts.
func (b *timeBudget) take() (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	return b.filled, b.left > 0
}

// charge spends the time since start.
func (b *timeBudget) charge(start time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	b.left -= max(0, b.filled.Sub(start))
}

// yielding wraps a walk's span callback so that the walk yields its
// goroutine every yieldEvery spans.
func yielding(span func(s *tracepb.Span)) func(s *tracepb.Span) {
	n := 0
	return func(s *tracepb.Span) {
		span(s)
		if n++; n%yieldEvery == 0 {
			runtime.Gosched()
		}
	}
}

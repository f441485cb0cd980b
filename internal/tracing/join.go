// Package tracing is slaprobe's side of distributed tracing. Every probe is
// a span (prober/trace.go) whose traceparent goes out with the request; this
// package exports those spans over OTLP (export.go), receives the engine's
// own spans over OTLP gRPC and HTTP (receiver.go), and joins each engine
// span to the probe that caused it (this file), so a probe whose response
// carried no per-request timing gets its queue and prefill from the
// engine's trace instead.
//
// A span joins a probe only when it is in the probe's trace AND its parent
// is the probe's own span (the span id in the traceparent the probe sent),
// or a span of a tracing gateway whose parent chain leads there. Trace ids
// are published (the /probes page, exemplars); a probe's span id is not,
// until its join is settled, so knowing a trace id is not enough to set a
// probe's queue and prefill.
package tracing

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/slaprobe/slaprobe/prober"
)

// DefaultJoinTimeout is how long a probe waits for its engine span. vLLM
// sends spans in batches every 5 s; a collector in between adds its own.
const DefaultJoinTimeout = 30 * time.Second

// DefaultMaxProbes is how many probes the joiner holds at once (registered,
// waiting or settled and kept to count late spans). At the limit a new
// probe is not registered: its engine timing from a trace is source none,
// slaprobe_engine_join_overflow_total counts it and a warning is logged
// (once a minute at most). Scheduled probes alone register: at one probe a
// second, 30 minutes of them is 1800.
const DefaultMaxProbes = 10000

// keepProbe is how long a probe is remembered after its span started, to
// recognise its engine span (and count a late one): longer than any probe
// plus the join timeout.
const keepProbe = 30 * time.Minute

// maxChain bounds the spans known to descend from a probe's span (the
// probe span and up to three gateway spans below it); maxOrphans the spans
// of a probe's trace kept until their parent shows up (a gateway's span
// that ends, and so is sent, after the engine's). Both bound what a client
// of the receiver can make the joiner hold for one probe.
const (
	maxChain   = 4
	maxOrphans = 8
)

// Span outcomes, the `result` label of slaprobe_engine_spans_received_total.
const (
	SpanJoined      = "joined"      // the engine's llm_request span of a probe that waited for it, in time
	SpanLate        = "late"        // a probe's llm_request span after its join was settled
	SpanOther       = "other"       // a span of a request slaprobe did not send (or does not join)
	SpanIgnored     = "ignored"     // another span of a probe's trace, or one its probe did not wait for
	SpanRejected    = "rejected"    // an llm_request in a probe's trace whose parent is not the probe's span
	SpanImplausible = "implausible" // the probe's llm_request, its timing not inside the probe's TTFT
)

// SpanResults lists every result, so counters can be initialised.
var SpanResults = []string{SpanJoined, SpanLate, SpanOther, SpanIgnored, SpanRejected, SpanImplausible}

// JoinerOptions configure a Joiner.
type JoinerOptions struct {
	// Timeout is how long a probe waits for its span (DefaultJoinTimeout
	// when <= 0).
	Timeout time.Duration
	// TrustAnyParent joins a probe's llm_request span whatever its parent:
	// for a receiver whose clients authenticate (only the engine, or the
	// gateway's collector, can post), behind a gateway whose own spans do
	// not reach slaprobe. Off, the parent must be the probe's span or lead
	// to it through spans that reached the receiver.
	TrustAnyParent bool
	// MaxProbes bounds the probes held (DefaultMaxProbes when <= 0).
	MaxProbes int
	// Logger gets the warning when MaxProbes is reached; nil discards.
	Logger *slog.Logger
}

// Joiner joins engine spans to probes. Probes are registered when their
// span starts (SpanProcessor), scheduled probes only, so spans of other
// requests, which an engine with tracing on sends for all its traffic, are
// counted and dropped without being kept. Safe for concurrent use.
type Joiner struct {
	timeout   time.Duration
	trustAny  bool
	maxProbes int
	now       func() time.Time
	logger    *slog.Logger
	spans     *prometheus.CounterVec
	overflow  prometheus.Counter

	mu           sync.Mutex
	probes       map[trace.TraceID]*entry
	lastSweep    time.Time
	lastFull     time.Time // the last sweep forced by a full map
	lastFullWarn time.Time
}

type entry struct {
	started   time.Time
	settledAt time.Time
	// chain holds the probe's span id, then the ids of spans found to
	// descend from it (a gateway's); an llm_request whose parent is one of
	// them is the engine's answer to this probe.
	chain   []trace.SpanID
	orphans []orphan             // spans whose parent is not (yet) in chain
	timing  *prober.EngineTiming // from the engine's span, before Join came
	settled bool                 // the probe's timing was handed on (joined, timed out or not waited for)
	skipped bool                 // settled by Skip: the probe did not wait for its span

	waiting *prober.Result // a probe waiting for its span
	done    func(prober.Result)
	timer   *time.Timer

	// held is the probe's own span, kept from the exporter until the join
	// is settled, so its span id is not published before (export.go).
	held   sdktrace.ReadOnlySpan
	heldTo sdktrace.SpanProcessor
}

// orphan is a span of a probe's trace whose parent was not known to
// descend from the probe's span when it came.
type orphan struct {
	id, parent trace.SpanID
	llm        bool                // an llm_request (with timing), else a possible gateway span
	timing     prober.EngineTiming // of an llm_request
}

// NewJoiner returns a Joiner that waits timeout (DefaultJoinTimeout when
// <= 0) for a probe's engine span, with the other options at their defaults.
func NewJoiner(timeout time.Duration) *Joiner {
	return NewJoinerWith(JoinerOptions{Timeout: timeout})
}

// NewJoinerWith returns a Joiner configured by o.
func NewJoinerWith(o JoinerOptions) *Joiner {
	if o.Timeout <= 0 {
		o.Timeout = DefaultJoinTimeout
	}
	if o.MaxProbes <= 0 {
		o.MaxProbes = DefaultMaxProbes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Joiner{
		timeout:   o.Timeout,
		trustAny:  o.TrustAnyParent,
		maxProbes: o.MaxProbes,
		now:       time.Now,
		logger:    o.Logger,
		probes:    map[trace.TraceID]*entry{},
		spans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "slaprobe", Name: "engine_spans_received_total",
			Help: "Spans received on the OTLP receiver, by result: joined (an engine's llm_request span of a scheduled probe that waited for it, in time), " +
				"late (after the probe's join was settled), other (a request slaprobe did not send, or a sweep or /probe request), " +
				"ignored (another span of a probe's trace, or the span of a probe that did not wait: its response carried the timing, or its TTFT is not recorded), " +
				"rejected (an llm_request in a probe's trace whose parent is not the probe's span: not the engine's answer to that probe), " +
				"implausible (the probe's span, its queue + prefill longer than the probe's own TTFT).",
		}, []string{"result"}),
		overflow: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "slaprobe", Name: "engine_join_overflow_total",
			Help: "Probes not registered for a join with their engine span because the joiner already held its limit of probes; their engine timing from a trace is source none.",
		}),
	}
}

// Collector exports slaprobe_engine_spans_received_total and
// slaprobe_engine_join_overflow_total.
func (j *Joiner) Collector() prometheus.Collector {
	for _, r := range SpanResults {
		j.spans.WithLabelValues(r)
	}
	return collectors{j.spans, j.overflow}
}

type collectors []prometheus.Collector

func (c collectors) Describe(ch chan<- *prometheus.Desc) {
	for _, x := range c {
		x.Describe(ch)
	}
}

func (c collectors) Collect(ch chan<- prometheus.Metric) {
	for _, x := range c {
		x.Collect(ch)
	}
}

// Timeout is how long Join waits for a span.
func (j *Joiner) Timeout() time.Duration { return j.timeout }

// TrustsAnyParent reports whether any llm_request span in a probe's trace
// joins it, whatever its parent (JoinerOptions.TrustAnyParent).
func (j *Joiner) TrustsAnyParent() bool { return j.trustAny }

// count adds n to a result's count.
func (j *Joiner) count(result string, n int) {
	if n > 0 {
		j.spans.WithLabelValues(result).Add(float64(n))
	}
}

// expect registers a probe: its trace id and its span's id.
func (j *Joiner) expect(id trace.TraceID, span trace.SpanID) {
	now := j.now()
	var after []func()
	j.mu.Lock()
	if now.Sub(j.lastSweep) > time.Minute {
		j.lastSweep = now
		after = j.sweep(now, false)
	}
	if _, ok := j.probes[id]; !ok {
		if len(j.probes) >= j.maxProbes && now.Sub(j.lastFull) > time.Second {
			// Settled probes are kept only to count late spans: drop them first.
			j.lastFull = now
			after = append(after, j.sweep(now, true)...)
		}
		if len(j.probes) >= j.maxProbes {
			warn := now.Sub(j.lastFullWarn) > time.Minute
			if warn {
				j.lastFullWarn = now
			}
			j.mu.Unlock()
			j.overflow.Inc()
			if warn {
				j.logger.Warn("trace joiner full: a probe is not joined with its engine span (source none)",
					"max_probes", j.maxProbes)
			}
			runAll(after)
			return
		}
		j.probes[id] = &entry{started: now, chain: []trace.SpanID{span}}
	}
	j.mu.Unlock()
	runAll(after)
}

// sweep forgets probes kept past keepProbe (all settled ones, when full);
// the caller holds mu and runs what it returns after unlocking.
func (j *Joiner) sweep(now time.Time, full bool) []func() {
	var after []func()
	for k, e := range j.probes {
		if e.waiting != nil {
			continue
		}
		if now.Sub(e.started) > keepProbe || (full && e.settled) {
			if !e.settled {
				// Registered but never joined nor skipped (its result never
				// reached the daemon): whatever came is not used.
				if e.timing != nil {
					j.count(SpanIgnored, 1)
				}
				after = append(after, j.settle(e, now))
			}
			delete(j.probes, k)
		}
	}
	return after
}

func runAll(fs []func()) {
	for _, f := range fs {
		f()
	}
}

// settle marks e settled: its unresolved llm_request orphans are counted
// rejected, and its held probe span is released to the exporter by the
// function returned, which the caller runs after unlocking mu.
func (j *Joiner) settle(e *entry, now time.Time) func() {
	e.settled, e.settledAt = true, now
	n := 0
	for _, o := range e.orphans {
		if o.llm {
			n++
		}
	}
	j.count(SpanRejected, n)
	e.orphans = nil
	held, to := e.held, e.heldTo
	e.held, e.heldTo = nil, nil
	return func() {
		if held != nil {
			to.OnEnd(held)
		}
	}
}

// Join settles r's engine timing from its trace: done gets r with Engine
// from the probe's llm_request span (Source prober.TimingTrace) once it
// arrives, or with Source prober.TimingNone after the join timeout or when
// the span's timing is implausible (prober.Result.CheckEngine). done runs
// at most once, on the caller's goroutine when the span is already here,
// else on another. Join reports false, and never calls done, when r has no
// trace id that a scheduled probe's span registered.
func (j *Joiner) Join(r prober.Result, done func(prober.Result)) bool {
	id, err := trace.TraceIDFromHex(r.TraceID)
	if err != nil {
		return false
	}
	j.mu.Lock()
	e, ok := j.probes[id]
	if !ok || e.settled || e.waiting != nil {
		j.mu.Unlock()
		return false
	}
	if e.timing != nil {
		r.Engine = *e.timing
		j.judge(&r)
		release := j.settle(e, j.now())
		j.mu.Unlock()
		release()
		done(r)
		return true
	}
	e.waiting, e.done = &r, done
	e.timer = time.AfterFunc(j.timeout, func() { j.expire(id) })
	j.mu.Unlock()
	return true
}

// judge counts the span that settled r: joined, or implausible when its
// timing does not fit r's TTFT (then r's Engine is source none).
func (j *Joiner) judge(r *prober.Result) {
	if r.CheckEngine() != "" {
		j.count(SpanImplausible, 1)
		return
	}
	j.count(SpanJoined, 1)
}

// Skip tells the joiner that r does not wait for its engine span: its
// response carried the engine's timing, or its TTFT is not recorded. Its
// span, when it comes, changes nothing and is counted ignored.
func (j *Joiner) Skip(r prober.Result) {
	id, err := trace.TraceIDFromHex(r.TraceID)
	if err != nil {
		return
	}
	j.mu.Lock()
	e, ok := j.probes[id]
	if !ok || e.settled || e.waiting != nil {
		j.mu.Unlock()
		return
	}
	if e.timing != nil {
		j.count(SpanIgnored, 1)
		e.timing = nil
	}
	e.skipped = true
	release := j.settle(e, j.now())
	j.mu.Unlock()
	release()
}

// expire hands on a probe whose span did not come in time.
func (j *Joiner) expire(id trace.TraceID) {
	j.mu.Lock()
	e, ok := j.probes[id]
	if !ok || e.waiting == nil {
		j.mu.Unlock()
		return
	}
	r, done := *e.waiting, e.done
	e.waiting, e.done = nil, nil
	release := j.settle(e, j.now())
	j.mu.Unlock()
	release()
	r.Engine = prober.EngineTiming{Source: prober.TimingNone}
	done(r)
}

// addSpan takes one received span: its trace, its own and its parent's
// span id, its name, and (for an llm_request) its timing, read on demand.
func (j *Joiner) addSpan(id trace.TraceID, spanID, parent trace.SpanID, name string, timing func() (prober.EngineTiming, bool)) {
	j.mu.Lock()
	e, ok := j.probes[id]
	if !ok {
		j.mu.Unlock()
		j.count(SpanOther, 1)
		return
	}
	llm := name == SpanLLMRequest
	if e.settled {
		// The probe's split is final; nothing changes it now.
		switch {
		case !llm:
			j.count(SpanIgnored, 1)
		case e.skipped && (j.trustAny || slices.Contains(e.chain, parent)):
			j.count(SpanIgnored, 1) // its probe did not wait for it
		case j.trustAny || slices.Contains(e.chain, parent):
			j.count(SpanLate, 1)
		default:
			j.count(SpanRejected, 1)
		}
		j.mu.Unlock()
		return
	}
	if !llm {
		j.count(SpanIgnored, 1)
		if slices.Contains(e.chain, parent) {
			j.link(e, spanID)
		} else if len(e.orphans) < maxOrphans && spanID.IsValid() && !slices.Contains(e.chain, spanID) {
			e.orphans = append(e.orphans, orphan{id: spanID, parent: parent})
		}
		after := j.resolve(e)
		j.mu.Unlock()
		runAll(after)
		return
	}
	t, ok := timing()
	if !ok {
		j.mu.Unlock()
		j.count(SpanIgnored, 1)
		return
	}
	if j.trustAny || slices.Contains(e.chain, parent) {
		after := j.match(e, t)
		j.mu.Unlock()
		runAll(after)
		return
	}
	if len(e.orphans) < maxOrphans {
		// Its parent may be a gateway's span still to come; counted when
		// the chain reaches it (joined) or the join settles (rejected).
		e.orphans = append(e.orphans, orphan{id: spanID, parent: parent, llm: true, timing: t})
		j.mu.Unlock()
		return
	}
	j.mu.Unlock()
	j.count(SpanRejected, 1)
}

// link adds a span found to descend from the probe's span to e's chain.
func (j *Joiner) link(e *entry, spanID trace.SpanID) {
	if len(e.chain) < maxChain && spanID.IsValid() && !slices.Contains(e.chain, spanID) {
		e.chain = append(e.chain, spanID)
	}
}

// resolve moves orphans whose parent is now in e's chain: a gateway span
// joins the chain, an llm_request is the probe's engine span.
func (j *Joiner) resolve(e *entry) []func() {
	var after []func()
	for changed := true; changed && !e.settled; {
		changed = false
		for i, o := range e.orphans {
			if !slices.Contains(e.chain, o.parent) {
				continue
			}
			e.orphans = slices.Delete(e.orphans, i, i+1)
			if o.llm {
				after = append(after, j.match(e, o.timing)...)
			} else {
				j.link(e, o.id)
			}
			changed = true
			break
		}
	}
	return after
}

// match takes t, from the llm_request span that answered e's probe.
func (j *Joiner) match(e *entry, t prober.EngineTiming) []func() {
	if e.timing != nil {
		j.count(SpanIgnored, 1) // a second answer: the first stands
		return nil
	}
	if e.waiting == nil {
		e.timing = &t // the span came before the probe was observed; counted at Join or Skip
		return nil
	}
	r, done := *e.waiting, e.done
	e.timer.Stop()
	e.waiting, e.done = nil, nil
	r.Engine = t
	j.judge(&r)
	release := j.settle(e, j.now())
	return []func(){release, func() { done(r) }}
}

// Pending is the number of probes waiting for their span.
func (j *Joiner) Pending() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, e := range j.probes {
		if e.waiting != nil {
			n++
		}
	}
	return n
}

// Held is the number of probes the joiner holds (at most its MaxProbes).
func (j *Joiner) Held() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.probes)
}

// SpanProcessor registers every scheduled probe (prober.RequestKind
// Recorded) as its span starts; add it to the probe's TracerProvider
// (NewTracerProvider does). Sweep and /probe requests are not registered:
// nothing of theirs is recorded from an engine span.
func (j *Joiner) SpanProcessor() sdktrace.SpanProcessor { return startHook{j} }

type startHook struct{ j *Joiner }

func (h startHook) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	if s.Name() == prober.ProbeSpanName && spanKind(s).Recorded() {
		h.j.expect(s.SpanContext().TraceID(), s.SpanContext().SpanID())
	}
}
func (startHook) OnEnd(sdktrace.ReadOnlySpan)      {}
func (startHook) Shutdown(context.Context) error   { return nil }
func (startHook) ForceFlush(context.Context) error { return nil }

// spanKind is a probe span's prober.AttrRequestKind; a span without one is
// a scheduled probe's.
func spanKind(s sdktrace.ReadOnlySpan) prober.RequestKind {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == prober.AttrRequestKind {
			return prober.RequestKind(kv.Value.AsString())
		}
	}
	return prober.RequestScheduled
}

// HoldExport returns a span processor that passes probe spans on to next
// (the exporter's batch processor) once their join is settled, and every
// other span at once: a probe's span id reaches a trace back end only when
// no span can change its probe's split any more.
func (j *Joiner) HoldExport(next sdktrace.SpanProcessor) sdktrace.SpanProcessor {
	return &holdExport{j: j, next: next}
}

type holdExport struct {
	j    *Joiner
	next sdktrace.SpanProcessor
}

func (h *holdExport) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) { h.next.OnStart(ctx, s) }

func (h *holdExport) OnEnd(s sdktrace.ReadOnlySpan) {
	sc := s.SpanContext()
	h.j.mu.Lock()
	if e, ok := h.j.probes[sc.TraceID()]; ok && !e.settled && e.held == nil && len(e.chain) > 0 && e.chain[0] == sc.SpanID() {
		e.held, e.heldTo = s, h.next
		h.j.mu.Unlock()
		return
	}
	h.j.mu.Unlock()
	h.next.OnEnd(s)
}

// Shutdown passes every held span on (slaprobe is stopping: no join will
// settle any more), then shuts next down.
func (h *holdExport) Shutdown(ctx context.Context) error {
	h.flushHeld()
	return h.next.Shutdown(ctx)
}

func (h *holdExport) ForceFlush(ctx context.Context) error { return h.next.ForceFlush(ctx) }

func (h *holdExport) flushHeld() {
	var spans []sdktrace.ReadOnlySpan
	h.j.mu.Lock()
	for _, e := range h.j.probes {
		if e.held != nil && e.heldTo == h.next {
			spans = append(spans, e.held)
			e.held, e.heldTo = nil, nil
		}
	}
	h.j.mu.Unlock()
	for _, s := range spans {
		h.next.OnEnd(s)
	}
}

package vllmsim

import (
	"errors"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// maxLag bounds how far behind its absolute schedule the engine loop may run and still catch up
// (shorter next steps, so that mean step times stay exact on a loaded machine); beyond it the
// schedule restarts from now.
const maxLag = 50 * time.Millisecond

// maxWakeLag bounds how long after a submission the idle loop may wake and still start the step at
// the submission: that hides the loop's own wake-up (tens of µs) from the model, while a loop woken
// later on a loaded machine starts from now rather than producing tokens in a hurry.
const maxWakeLag = 500 * time.Microsecond

// maxSleepSlice bounds one sleep of the engine loop (and so how late it notices Close).
const maxSleepSlice = 5 * time.Millisecond

// maxSpin bounds the end of a step that the engine loop spends yielding (runtime.Gosched in a loop)
// instead of sleeping, also at most 1/20 of the step: waking from any sleep takes 30–100 µs on a
// virtual machine, which would make every step end that much late.
const maxSpin = 100 * time.Microsecond

var errEngineClosed = errors.New("engine is shut down")

// Engine is a simulated vLLM engine with an OpenAI-compatible HTTP API. Create it with New, serve
// Handler, and Close it when done.
type Engine struct {
	cfg     Config
	log     *slog.Logger
	handler http.Handler
	m       *metrics
	g       gauges
	traces  *traceRing
	tracer  *tracer // llm_request spans; nil without Config.OTLPTracesEndpoint
	created int64   // unix seconds, for /v1/models

	seq      atomic.Uint64 // request counter: ids and per-request seeds
	rejected atomic.Uint64
	handlers atomic.Int64 // generate handlers running, so Close sends their spans

	mu      sync.Mutex
	waiting []*request // FIFO; preempted requests go back to the front
	running []*request // admission order
	kv      *kvCache
	closed  bool
	st      Stats

	wake      chan struct{}
	quit      chan struct{}
	loopDone  chan struct{}
	closeOnce sync.Once
}

// Stats is a snapshot of the engine for tests.
type Stats struct {
	Running           int // requests in the batch now
	Waiting           int // requests in the waiting queue now (preempted ones included)
	MaxRunningSeen    int // since New or ResetPeaks
	MaxWaitingSeen    int // since New or ResetPeaks
	KVCacheTokensUsed int // blocks held by running requests × BlockSize
	KVCacheBlocks     int // the KV cache's size in blocks
	CachedBlocks      int // blocks whose KV a later request can reuse (held or free)
	EvictedBlocks     uint64

	TotalRequests    uint64 // requests accepted into the waiting queue
	FinishedRequests uint64 // finished with "stop" or "length"
	AbortedRequests  uint64 // client gone, fault, or engine closed
	RejectedRequests uint64 // answered with an HTTP error before queueing (error_status fault included)

	PromptTokens    uint64 // prompt tokens of admitted requests (counted once per request)
	CachedTokens    uint64 // prefix-cache hits of admitted requests, in tokens
	GeneratedTokens uint64
	Preemptions     uint64
	PrefillSteps    uint64
	DecodeSteps     uint64
}

type reqState int

const (
	stateNew reqState = iota
	stateWaiting
	stateRunning
	stateFinished
)

// request is one generation request inside the engine.
type request struct {
	id           string
	promptTokens int
	ids          []uint32 // prompt then generated token ids (prefix caching only)
	salt         string   // cache_salt
	gen          *textGen // the engine's copy of the output text, for ids
	hashes       []uint64 // block hashes of ids' full blocks
	target       int      // tokens it will produce
	targetReason string   // finish reason when target is reached: "length" or "stop"
	fault        faultPlan
	trace        *traceRecord

	// Engine side, guarded by Engine.mu.
	state      reqState
	produced   int
	admitted   bool // admitted at least once
	submitted  time.Time
	admittedAt time.Time
	firstToken time.Time
	lastOutput time.Time
	stallUntil time.Time
	stalled    bool
	blocks     []*kvBlock // KV blocks held while running
	hashedUpTo int        // leading blocks already offered to the prefix cache

	// Hand-off to the HTTP handler, guarded by mu.
	mu     sync.Mutex
	avail  int // tokens produced so far
	done   bool
	reason string
	err    error
	notify chan struct{} // capacity 1: "something changed"
}

func (r *request) publish(avail int, done bool, reason string, err error) {
	r.mu.Lock()
	r.avail, r.done, r.reason, r.err = avail, done, reason, err
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *request) snapshot() (avail int, done bool, reason string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.avail, r.done, r.reason, r.err
}

// New validates cfg and starts the engine loop. A nil logger discards logs.
func New(cfg Config, logger *slog.Logger) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	tr, err := newTracer(cfg)
	if err != nil {
		return nil, err
	}
	e := &Engine{
		tracer:   tr,
		cfg:      cfg,
		log:      logger,
		traces:   newTraceRing(cfg.TraceCapacity),
		created:  time.Now().Unix(),
		wake:     make(chan struct{}, 1),
		quit:     make(chan struct{}),
		loopDone: make(chan struct{}),
	}
	e.kv = newKVCache(cfg.KVCacheTokens, cfg.EnablePrefixCaching)
	e.m = newMetrics(cfg, &e.g)
	e.handler = e.routes()
	go e.loop()
	return e, nil
}

// Handler serves the whole API: /v1/chat/completions, /v1/completions, /v1/models, /tokenize,
// /health, /version and /metrics.
func (e *Engine) Handler() http.Handler { return e.handler }

// Gatherer exposes the engine's own Prometheus registry (what /metrics serves).
func (e *Engine) Gatherer() prometheus.Gatherer { return e.m.reg }

// Config returns the engine's configuration.
func (e *Engine) Config() Config { return e.cfg }

// Close stops the engine loop. Requests in flight end with an error event and [DONE] (streaming) or
// a 503 (non-streaming); later requests get 503. Close is idempotent.
func (e *Engine) Close() {
	e.closeOnce.Do(func() {
		e.mu.Lock()
		e.closed = true
		pending := append(slices.Clone(e.running), e.waiting...)
		for _, r := range pending {
			e.endLocked(r)
			e.st.AbortedRequests++
			e.m.success.WithLabelValues(FinishAbort).Inc()
		}
		e.running, e.waiting = nil, nil
		e.syncGaugesLocked()
		e.mu.Unlock()
		close(e.quit)
		<-e.loopDone
		for _, r := range pending {
			r.publish(r.produced, false, "", errEngineClosed)
		}
		if e.tracer != nil {
			// The aborted requests' handlers send their spans as they end.
			for deadline := time.Now().Add(5 * time.Second); e.handlers.Load() > 0 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			e.tracer.shutdown()
		}
	})
}

// Trace returns the ground truth for a response id, if it is among the last TraceCapacity requests.
func (e *Engine) Trace(id string) (Trace, bool) {
	rec, ok := e.traces.get(id)
	if !ok {
		return Trace{}, false
	}
	return rec.snapshot(), true
}

// Stats returns a snapshot of the engine's state and counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.st
	s.Running, s.Waiting, s.KVCacheTokensUsed = len(e.running), len(e.waiting), e.kv.used*BlockSize
	s.KVCacheBlocks, s.CachedBlocks, s.EvictedBlocks = e.kv.total, e.kv.cachedBlocks(), e.kv.evicted
	s.RejectedRequests = e.rejected.Load()
	return s
}

// ResetPeaks restarts MaxRunningSeen and MaxWaitingSeen from the current values (e.g. between the
// levels of a sweep).
func (e *Engine) ResetPeaks() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.st.MaxRunningSeen, e.st.MaxWaitingSeen = len(e.running), len(e.waiting)
}

// submit puts r at the back of the waiting queue.
func (e *Engine) submit(r *request) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return errEngineClosed
	}
	r.submitted = time.Now()
	r.state = stateWaiting
	e.waiting = append(e.waiting, r)
	e.st.TotalRequests++
	e.syncGaugesLocked()
	e.mu.Unlock()
	r.trace.update(func(t *Trace) { t.Submitted = r.submitted })
	select {
	case e.wake <- struct{}{}:
	default:
	}
	return nil
}

// abort removes r from the engine if it is still there (client gone, fault, handler exit).
func (e *Engine) abort(r *request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r.state != stateWaiting && r.state != stateRunning {
		return
	}
	e.endLocked(r)
	e.st.AbortedRequests++
	e.m.success.WithLabelValues(FinishAbort).Inc()
	e.syncGaugesLocked()
}

// endLocked takes r out of the queues and frees its KV cache.
func (e *Engine) endLocked(r *request) {
	switch r.state {
	case stateWaiting:
		if i := slices.Index(e.waiting, r); i >= 0 {
			e.waiting = slices.Delete(e.waiting, i, i+1)
		}
	case stateRunning:
		if i := slices.Index(e.running, r); i >= 0 {
			e.running = slices.Delete(e.running, i, i+1)
		}
		e.releaseLocked(r)
	}
	r.state = stateFinished
	r.ids, r.hashes, r.gen = nil, nil, nil
}

// releaseLocked frees r's KV blocks; the full ones stay in the prefix cache until evicted.
func (e *Engine) releaseLocked(r *request) {
	e.kv.release(r.blocks)
	r.blocks, r.hashedUpTo = nil, 0
}

// allocLocked gives r the blocks for its first tokens tokens. Admission and preemption leave
// room for them; should none be left, r runs short rather than the engine failing.
func (e *Engine) allocLocked(r *request, tokens int) {
	for len(r.blocks) < blocksFor(tokens) && e.kv.numFree() > 0 {
		r.blocks = append(r.blocks, e.kv.alloc())
	}
}

// hashLocked offers the full blocks of r's first computed tokens to the prefix cache. Generated
// tokens are hashed as well, continuing the prompt's chain, so that a follow-up request that
// replays the answer finds the whole conversation cached (as vLLM v1 does).
func (e *Engine) hashLocked(r *request, computed int) {
	if !e.kv.caching {
		return
	}
	r.hashes = extendHashes(r.hashes, r.ids, r.salt)
	n := min(computed/BlockSize, len(r.blocks), len(r.hashes))
	for ; r.hashedUpTo < n; r.hashedUpTo++ {
		e.kv.cache(r.blocks[r.hashedUpTo], r.hashes[r.hashedUpTo])
	}
}

// blocksFor is how many blocks hold tokens tokens.
func blocksFor(tokens int) int { return (tokens + BlockSize - 1) / BlockSize }

func (e *Engine) syncGaugesLocked() {
	e.g.running.Store(int64(len(e.running)))
	e.g.waiting.Store(int64(len(e.waiting)))
	e.g.kvHeld.Store(int64(e.kv.used))
	e.st.MaxRunningSeen = max(e.st.MaxRunningSeen, len(e.running))
	e.st.MaxWaitingSeen = max(e.st.MaxWaitingSeen, len(e.waiting))
}

// step is one engine iteration: a prefill of newly admitted requests, or a decode of the batch.
type step struct {
	prefill bool
	reqs    []*request
	dur     time.Duration
}

// loop is the engine: one step at a time, each ending at an absolute deadline so that timer lateness
// does not accumulate.
func (e *Engine) loop() {
	defer close(e.loopDone)
	sl := newSleeper()
	defer sl.close()
	var last time.Time // end of the previous step; zero after idling
	for {
		e.mu.Lock()
		for !e.closed && len(e.waiting) == 0 && len(e.running) == 0 {
			e.mu.Unlock()
			last = time.Time{}
			select {
			case <-e.wake:
			case <-e.quit:
				return
			}
			e.mu.Lock()
		}
		if e.closed {
			e.mu.Unlock()
			return
		}
		// After idling (last is zero) the schedule restarts at the latest submission among the
		// requests the step admits (planLocked never starts a step before one), not when this loop
		// woke up: waking up is not part of the model.
		now := time.Now()
		start := last
		if !start.IsZero() && now.Sub(start) > maxLag {
			start = now
		}
		idle := start.IsZero()
		st, start := e.planLocked(start)
		e.mu.Unlock()
		if start.IsZero() || now.Sub(start) > maxLag || idle && now.Sub(start) > maxWakeLag {
			start = now
		}
		if st.reqs == nil {
			// Nothing can run (cannot happen with a valid Config); do not spin.
			e.log.Error("vllmsim: engine has waiting requests but can neither admit nor decode")
			if !e.sleepUntil(sl, time.Now().Add(time.Millisecond), 0) {
				return
			}
			continue
		}
		deadline := start.Add(st.dur)
		if !e.sleepUntil(sl, deadline, min(maxSpin, st.dur/20)) {
			return
		}
		end := time.Now()
		e.mu.Lock()
		e.finishLocked(st, end)
		e.mu.Unlock()
		last = deadline
	}
}

// sleepUntil waits for deadline; false means the engine is closing. It sleeps (parked, see
// newSleeper) in slices of at most maxSleepSlice so that Close is noticed quickly, then yields in a
// loop for the last spin before the deadline.
func (e *Engine) sleepUntil(sl sleeper, deadline time.Time, spin time.Duration) bool {
	for {
		select {
		case <-e.quit:
			return false
		default:
		}
		d := time.Until(deadline)
		if d <= 0 {
			return true
		}
		if d <= spin {
			for time.Now().Before(deadline) {
				runtime.Gosched()
			}
			return true
		}
		sl.sleep(min(d-spin, maxSleepSlice))
	}
}

// growth is how many tokens r may add to the KV cache in its next decode step.
func (e *Engine) growth(r *request) int {
	return max(min(e.cfg.TokensPerStep, r.target-r.produced), 0)
}

// planLocked picks the next step. Waiting requests that fit are admitted first and prefilled in one
// step while running requests wait (no chunked prefill); otherwise the running batch decodes. It
// returns the step and its start, which is never before the submission of a request it admits.
func (e *Engine) planLocked(start time.Time) (step, time.Time) {
	var (
		admitted []*request
		batched  int
		work     time.Duration
	)
	for len(e.waiting) > 0 && len(e.running) < e.cfg.MaxNumSeqs {
		r := e.waiting[0]
		ctx := r.promptTokens + r.produced
		// At least one token is always computed, so at most ⌊(ctx−1)/BlockSize⌋ blocks hit.
		hit := e.kv.lookup(r.hashes, (ctx-1)/BlockSize)
		// Blocks taken from the free queue: new ones for the rest of the context and the token
		// this prefill produces, and the hit blocks that no running request holds.
		take := blocksFor(ctx+1) - len(hit)
		for _, b := range hit {
			if b.ref == 0 {
				take++
			}
		}
		if take > e.kv.numFree() {
			break
		}
		cached := len(hit) * BlockSize
		uncached := ctx - cached
		if e.cfg.MaxNumBatchedTokens > 0 && len(admitted) > 0 && batched+uncached > e.cfg.MaxNumBatchedTokens {
			break
		}
		e.waiting[0] = nil
		e.waiting = e.waiting[1:]
		r.state = stateRunning
		e.running = append(e.running, r)
		for _, b := range hit {
			e.kv.touch(b)
		}
		r.blocks = append(r.blocks[:0], hit...)
		r.hashedUpTo = len(hit)
		e.allocLocked(r, ctx+1)
		batched += uncached
		work += e.cfg.prefillWork(ctx, cached)
		admitted = append(admitted, r)
		if r.submitted.After(start) {
			start = r.submitted
		}
		if !r.admitted {
			r.admitted = true
			r.trace.update(func(t *Trace) { t.CachedTokens = cached })
			e.st.PromptTokens += uint64(r.promptTokens)
			e.st.CachedTokens += uint64(cached)
			e.m.promptTokens.Add(float64(r.promptTokens))
			// Counted once per request, as prompt_tokens_total: a preempted
			// request's recompute is not a new prompt.
			e.m.promptCached.Add(float64(cached))
			e.m.promptSource.WithLabelValues("local_cache_hit").Add(float64(cached))
			e.m.promptSource.WithLabelValues("local_compute").Add(float64(r.promptTokens - cached))
			e.m.prefixQueries.Add(float64(r.promptTokens))
			e.m.prefixHits.Add(float64(cached))
		}
	}
	if len(admitted) > 0 {
		// The prompts' blocks are cached from this step on, as vLLM caches full blocks when it
		// schedules them: only later steps can hit them (the lookups above are done). Done here
		// rather than at the end of the step, where it would delay the first tokens.
		for _, r := range admitted {
			e.hashLocked(r, r.promptTokens+r.produced)
		}
		// Admission is stamped with the real time; the step itself may start earlier on the
		// schedule when the loop is catching up (never before a submission, see above).
		now := time.Now()
		for _, r := range admitted {
			if r.admittedAt.IsZero() {
				r.admittedAt = now
				e.m.queue.Observe(now.Sub(r.submitted).Seconds())
				r.trace.update(func(t *Trace) { t.Admitted = now })
			}
		}
		e.syncGaugesLocked()
		return step{prefill: true, reqs: admitted, dur: e.cfg.scale(e.cfg.PrefillOverhead + work)}, start
	}

	// Preempt the most recently admitted requests while the next step would overflow the KV cache.
	// (vLLM v1's recompute preemption: its blocks are freed, and it is prefilled again later.)
	for len(e.running) > 1 {
		need := 0
		for _, r := range e.running {
			need += max(blocksFor(r.promptTokens+r.produced+e.growth(r))-len(r.blocks), 0)
		}
		if need <= e.kv.numFree() {
			break
		}
		v := e.running[len(e.running)-1]
		e.running = e.running[:len(e.running)-1]
		e.releaseLocked(v)
		v.state = stateWaiting
		e.waiting = slices.Insert(e.waiting, 0, v)
		e.st.Preemptions++
		e.m.preemptions.Inc()
		v.trace.update(func(t *Trace) { t.Preemptions++ })
	}
	e.syncGaugesLocked()
	if len(e.running) == 0 {
		return step{}, start
	}
	ctx := 0
	for _, r := range e.running {
		ctx += r.promptTokens + r.produced
		e.allocLocked(r, r.promptTokens+r.produced+e.growth(r))
	}
	return step{reqs: slices.Clone(e.running), dur: e.cfg.DecodeStep(len(e.running), ctx)}, start
}

// finishLocked applies a step that ended at end: each request still running gets its tokens.
func (e *Engine) finishLocked(st step, end time.Time) {
	if st.prefill {
		e.st.PrefillSteps++
	} else {
		e.st.DecodeSteps++
	}
	finished := false
	for _, r := range st.reqs {
		if r.state != stateRunning {
			continue // aborted, preempted or closed during the step
		}
		n := 1 // a prefill yields one token
		if !st.prefill {
			if !r.stallUntil.IsZero() && end.Before(r.stallUntil) {
				continue
			}
			n = e.growth(r)
		}
		isFirst := r.firstToken.IsZero()
		if isFirst {
			r.firstToken = end
			r.trace.update(func(t *Trace) { t.EngineFirstToken = end })
			e.m.ttft.Observe(end.Sub(r.submitted).Seconds())
			e.m.prefill.Observe(end.Sub(r.admittedAt).Seconds())
		} else {
			e.m.itl.Observe(end.Sub(r.lastOutput).Seconds())
		}
		r.lastOutput = end
		r.produced += n
		if r.gen != nil {
			for range n {
				r.ids = append(r.ids, tokenID(r.gen.next()))
			}
		}
		// The last generated token's KV is computed by the next step, so it is not cached yet.
		e.hashLocked(r, r.promptTokens+r.produced-1)
		e.st.GeneratedTokens += uint64(n)
		e.m.genTokens.Add(float64(n))
		if e.m.specDrafts != nil && !isFirst {
			e.m.specDrafts.Inc()
			e.m.specDraftTokens.Add(float64(e.cfg.TokensPerStep - 1))
			e.m.specAccepted.Add(float64(max(n-1, 0)))
			r.trace.update(func(t *Trace) {
				t.SpecDraftTokens += e.cfg.TokensPerStep - 1
				t.SpecAcceptedTokens += max(n-1, 0)
				t.SpecSteps++
			})
		}
		if r.fault.name == FaultStall && !r.stalled && r.fault.after > 0 && r.produced >= r.fault.after {
			r.stalled = true
			r.stallUntil = end.Add(r.fault.stallFor)
		}
		if r.fault.name == FaultSlowStream {
			r.stallUntil = end.Add(r.fault.stallFor) // the next token no earlier
		}
		done := r.produced >= r.target
		if done {
			r.trace.update(func(t *Trace) { t.EngineLastToken = end })
			finished = true
			e.releaseLocked(r)
			r.state = stateFinished
			r.ids, r.hashes, r.gen = nil, nil, nil
			e.st.FinishedRequests++
			e.m.success.WithLabelValues(r.targetReason).Inc()
			e.m.e2e.Observe(end.Sub(r.submitted).Seconds())
			e.m.decode.Observe(end.Sub(r.firstToken).Seconds())
			e.m.reqPrompt.Observe(float64(r.promptTokens))
			e.m.reqGen.Observe(float64(r.produced))
		}
		r.publish(r.produced, done, r.targetReason, nil)
	}
	if finished {
		e.running = slices.DeleteFunc(e.running, func(r *request) bool { return r.state == stateFinished })
	}
	e.syncGaugesLocked()
}

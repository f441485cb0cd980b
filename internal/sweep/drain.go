package sweep

// This file holds how each step starts on an empty engine: the engine's
// counters a sweep reads, and the wait for its queue to drain.

import (
	"context"
	"time"
)

// EngineCounters is what a sweep reads from the target engine's own
// /metrics: the queue-time histogram's sum and count (vLLM
// vllm:request_queue_time_seconds, SGLang queue_time_seconds), and the
// requests running and waiting now (vllm:num_requests_running and
// vllm:num_requests_waiting), which tell when the engine has drained.
type EngineCounters struct {
	QueueTimeSum, QueueTimeCount float64
	HasQueueTime                 bool
	Running, Waiting             float64
	HasQueue                     bool
}

// Drain methods, in DrainResult.Method.
const (
	// DrainEngine: the step waited until the engine's /metrics showed
	// nothing running and nothing waiting (or DrainOptions.Timeout passed).
	DrainEngine = "engine_metrics"
	// DrainCooldown: no engine metrics; the step waited Cooldown and
	// cannot know whether the engine was empty.
	DrainCooldown = "cooldown"
)

// DrainOptions make every step (and every burst round) start on an empty
// engine. Engines differ in whether and how fast they abort the requests of
// a client that went away, and some never do: a fixed cooldown cannot know
// when the leftovers of the previous step are gone, the engine's own
// running and waiting counts can.
type DrainOptions struct {
	// Timeout bounds the wait; a step that starts after it ran out is
	// marked busy (DrainResult.Busy) and left out of capacity.
	Timeout time.Duration
	// MaxRunning is how many running requests still count as drained
	// (0: none). Set it to the background level on a server that always
	// has some traffic.
	MaxRunning float64
	// PollInterval is how often /metrics is read while waiting.
	PollInterval time.Duration
}

// DrainResult is how a step started: after how long a wait, and whether
// the engine was still busy.
type DrainResult struct {
	Method        string  `json:"method"`
	WaitedSeconds float64 `json:"waited_seconds"`
	// Busy is true when the engine still had requests running (above
	// MaxRunning) or waiting when the step or one of its burst rounds
	// started; Running and Waiting are the most seen then.
	Busy    bool    `json:"busy,omitempty"`
	Running float64 `json:"running,omitempty"`
	Waiting float64 `json:"waiting,omitempty"`
}

// EngineScraper reads EngineCounters; callers bind engine.Scrape to the
// target's client and metrics URL, so that a sweep needs no engine package
// and tests can count a fake engine's queue.
type EngineScraper func(ctx context.Context) (EngineCounters, error)

// drain waits until the engine reports nothing running (above
// Drain.MaxRunning) and nothing waiting, for at most Drain.Timeout. Without
// engine counts it sleeps Cooldown instead (when cool is set: not before
// the first step). It returns ctx's error when ctx ends.
func (sw *sweepRun) drain(ctx context.Context, cool bool) (DrainResult, error) {
	start := sw.clock.Now()
	d := sw.opts.Drain
	if d.PollInterval <= 0 {
		d.PollInterval = 250 * time.Millisecond
	}
	c, ok := sw.scrape(ctx)
	if !ok || !c.HasQueue {
		if cool && sw.opts.Cooldown > 0 && !sleepUntil(ctx, sw.clock, start.Add(sw.opts.Cooldown)) {
			return DrainResult{}, ctx.Err()
		}
		return DrainResult{Method: DrainCooldown, WaitedSeconds: sw.clock.Now().Sub(start).Seconds()}, ctx.Err()
	}
	for {
		if c.Running <= d.MaxRunning && c.Waiting <= 0 {
			return DrainResult{Method: DrainEngine, WaitedSeconds: sw.clock.Now().Sub(start).Seconds()}, nil
		}
		if sw.clock.Now().Sub(start) >= d.Timeout {
			return DrainResult{Method: DrainEngine, WaitedSeconds: sw.clock.Now().Sub(start).Seconds(),
				Busy: true, Running: c.Running, Waiting: c.Waiting}, nil
		}
		if !sleepUntil(ctx, sw.clock, sw.clock.Now().Add(d.PollInterval)) {
			return DrainResult{}, ctx.Err()
		}
		next, ok := sw.scrape(ctx)
		if ok && next.HasQueue {
			c = next
		}
	}
}

// merge folds the drain of a later burst round into the step's.
func (d *DrainResult) merge(o DrainResult) {
	d.WaitedSeconds += o.WaitedSeconds
	if o.Busy {
		d.Busy = true
		d.Running, d.Waiting = max(d.Running, o.Running), max(d.Waiting, o.Waiting)
	}
}

func (sw *sweepRun) scrape(ctx context.Context) (EngineCounters, bool) {
	if sw.opts.Scrape == nil {
		return EngineCounters{}, false
	}
	snap, err := sw.opts.Scrape(ctx)
	if err != nil {
		sw.logger.Debug("sweep engine scrape", "err", err)
		return EngineCounters{}, false
	}
	return snap, true
}

// queueWait is the mean queue time of the requests the engine finished
// between two scrapes.
func queueWait(before, after EngineCounters) *float64 {
	if !before.HasQueueTime || !after.HasQueueTime {
		return nil
	}
	dc := after.QueueTimeCount - before.QueueTimeCount
	ds := after.QueueTimeSum - before.QueueTimeSum
	if dc <= 0 || ds < 0 { // nothing finished, or the engine restarted
		return nil
	}
	v := ds / dc
	return &v
}

// drained returns the steps that did not start busy and measured something.
func drained(steps []StepResult) []StepResult {
	out := make([]StepResult, 0, len(steps))
	for i := range steps {
		if !steps[i].StartedBusy() && steps[i].Measured() {
			out = append(out, steps[i])
		}
	}
	return out
}

package sweep

// This file holds what tells a sweep that the engine is empty before a
// step: the engine's counters it reads, the drain options, and how a step
// started (DrainResult). The wait itself is the sweep's (sweep.go).

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

// merge folds the drain of a later burst round into the step's.
func (d *DrainResult) merge(o DrainResult) {
	d.WaitedSeconds += o.WaitedSeconds
	if o.Busy {
		d.Busy = true
		d.Running, d.Waiting = max(d.Running, o.Running), max(d.Waiting, o.Waiting)
	}
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

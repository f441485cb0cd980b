package prober

import "context"

// TrySlot takes one of the in-flight slots (SchedulerOptions.
// MaxInFlightPerTarget) of the scheduled target named target, waiting for
// one until ctx ends, so that a probe sent from outside the scheduler (the
// /probe endpoint) never adds to the target's limit. known is false when
// the scheduler has no such target; ok is false when ctx ended first.
// release gives the slot back; call it once when ok.
func (s *Scheduler) TrySlot(ctx context.Context, target string) (release func(), ok, known bool) {
	for _, ts := range s.targets {
		if ts.t.Name != target {
			continue
		}
		select {
		case ts.sem <- struct{}{}:
			return func() { <-ts.sem }, true, true
		case <-ctx.Done():
			return nil, false, true
		}
	}
	return nil, false, false
}

package vllmsim

import "time"

// sleeper parks the engine loop for a while (see newSleeper). It is used by one goroutine.
type sleeper interface {
	sleep(d time.Duration) // may return early; callers re-check their deadline
	close()
}

// timerSleeper is a plain Go timer: it parks the goroutine too, but in an idle process it ends up to
// a millisecond late (the network poller sleeps in whole milliseconds).
type timerSleeper struct{}

func (timerSleeper) sleep(d time.Duration) { time.Sleep(d) }
func (timerSleeper) close()                {}

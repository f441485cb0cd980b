package bench

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/slaprobe/slaprobe/internal/sweep"
)

// progress draws a one-line bar with ETA on a terminal, or prints one plain
// line per step otherwise.
type progress struct {
	w    io.Writer
	tty  bool
	mu   sync.Mutex
	last sweep.ProgressEvent
	at   time.Time
	stop chan struct{}
	wg   sync.WaitGroup
	// The client's CPU time when the current step started: each finished
	// step reports the share of one core the prober itself used, so a
	// saturated client shows up next to the numbers it would distort.
	stepCPU  time.Duration
	stepWall time.Time
}

func newProgress(w io.Writer, tty bool) *progress {
	p := &progress{w: w, tty: tty, stop: make(chan struct{})}
	if tty {
		p.wg.Add(1)
		go func() { // keep the elapsed time and ETA moving between events
			defer p.wg.Done()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-p.stop:
					return
				case <-tick.C:
					p.mu.Lock()
					if p.last.Steps > 0 {
						p.draw()
					}
					p.mu.Unlock()
				}
			}
		}()
	}
	return p
}

func (p *progress) event(ev sweep.ProgressEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ev.Kind != sweep.ProgressWarning { // the bar keeps showing the step
		p.last, p.at = ev, time.Now()
	}
	cpuShare := ""
	switch ev.Kind {
	case sweep.ProgressStepStarted:
		p.stepCPU, p.stepWall = cpuTime(), time.Now()
	case sweep.ProgressStepFinished:
		if wall := time.Since(p.stepWall); wall > 0 && !p.stepWall.IsZero() {
			cpuShare = fmt.Sprintf(", client CPU %.0f%% of a core", 100*(cpuTime()-p.stepCPU).Seconds()/wall.Seconds())
		}
	}
	if p.tty {
		switch {
		case ev.Kind == sweep.ProgressStepSkipped || ev.Kind == sweep.ProgressScenarioFailed:
			fmt.Fprintf(p.w, "\r\033[K%s: %s\n", ev.Scenario, ev.Message)
		case ev.Kind == sweep.ProgressWarning:
			fmt.Fprintf(p.w, "\r\033[K%s: WARNING: %s\n", ev.Scenario, ev.Message)
		case ev.Kind == sweep.ProgressStepFinished && ev.Result != nil && !ev.Result.Measured():
			fmt.Fprintf(p.w, "\r\033[K%s %s N=%d: nothing measured: %s\n", ev.Scenario, modeName(ev.Mode), ev.Concurrency, ev.Result.NotMeasured)
		}
		p.draw()
		return
	}
	switch ev.Kind {
	case sweep.ProgressStepStarted:
		fmt.Fprintf(p.w, "[%d/%d] %s %s N=%d started (elapsed %s, about %s left)\n", ev.Step, ev.Steps, ev.Scenario,
			modeName(ev.Mode), ev.Concurrency, fmtDur(ev.Elapsed), fmtDur(ev.Remaining))
	case sweep.ProgressStepFinished:
		r := ev.Result
		if !r.Measured() {
			fmt.Fprintf(p.w, "[%d/%d] %s %s N=%d done: nothing measured: %s\n",
				ev.Step, ev.Steps, ev.Scenario, modeName(ev.Mode), ev.Concurrency, r.NotMeasured)
			return
		}
		if cs := r.Conversation; cs != nil {
			// A conversation step: its requests are its follow-ups.
			hit := "cache not reported"
			if cs.HitShare != nil {
				hit = fmt.Sprintf("%.0f%% hit the cache", 100**cs.HitShare)
			}
			fmt.Fprintf(p.w, "[%d/%d] %s %s N=%d done: %d conversations, %d/%d follow-ups ok, %s, follow-up TTFT mean %.3fs (priming %.3fs), system %.0f tok/s%s\n",
				ev.Step, ev.Steps, ev.Scenario, modeName(ev.Mode), ev.Concurrency, cs.Conversations, r.Succeeded, r.Requests,
				hit, r.TTFT.Mean, cs.PrimingTTFT.Mean, r.SystemThroughput, cpuShare)
			return
		}
		fmt.Fprintf(p.w, "[%d/%d] %s %s N=%d done: %d/%d ok, TTFT mean %.3fs, decode %.1f tok/s, system %.0f tok/s%s\n",
			ev.Step, ev.Steps, ev.Scenario, modeName(ev.Mode), ev.Concurrency, r.Succeeded, r.Requests,
			r.TTFT.Mean, r.Decode.Mean, r.SystemThroughput, cpuShare)
	case sweep.ProgressWarning:
		fmt.Fprintf(p.w, "%s: WARNING: %s\n", ev.Scenario, ev.Message)
	default:
		fmt.Fprintf(p.w, "%s: %s\n", ev.Scenario, ev.Message)
	}
}

// draw renders the bar; p.mu is held.
func (p *progress) draw() {
	ev := p.last
	since := time.Since(p.at)
	elapsed := ev.Elapsed + since
	remaining := ev.Remaining - since
	if remaining < 0 {
		remaining = 0
	}
	done := ev.Step
	if ev.Kind == sweep.ProgressStepStarted {
		done--
	}
	const width = 24
	filled := 0
	if ev.Steps > 0 {
		filled = width * done / ev.Steps
	}
	bar := strings.Repeat("█", filled) + strings.Repeat("░", width-filled)
	fmt.Fprintf(p.w, "\r\033[K%s %d/%d  %s %s N=%d  elapsed %s  ETA %s", bar, done, ev.Steps, ev.Scenario,
		modeName(ev.Mode), ev.Concurrency, fmtDur(elapsed), fmtDur(remaining))
}

func (p *progress) done() {
	close(p.stop)
	p.wg.Wait()
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

func modeName(m sweep.Mode) string {
	if m == sweep.ModeBurst {
		return "burst"
	}
	return "closed-loop"
}

func fmtDur(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	if d < time.Hour {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

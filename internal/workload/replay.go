package workload

// This file holds the capacity of a target as a multiple of a trace's
// traffic: the trace replayed open-loop by its own timestamps at speed-ups,
// each step judged by goodput, the headroom the largest speed-up at which
// the rule holds.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/prober"
)

// DefaultSpeedups are the replay's first steps; Refine more follow between
// the last that held and the first that did not.
var DefaultSpeedups = []float64{0.5, 1, 2, 4}

// DefaultRefine is how many bisection steps refine the crossing.
const DefaultRefine = 2

// MaxInFlight bounds the requests of one step in flight at once: beyond it
// a request is not sent and counts as not good (the replay cannot keep up,
// which at that speed-up the target would not either).
const MaxInFlight = 4096

// ReplayOptions shape a replay sweep.
type ReplayOptions struct {
	Speedups []float64 // ascending; default DefaultSpeedups
	Refine   int       // bisection steps after them; default DefaultRefine, -1 for none
	// Rule is what a step must meet: a goodput rule of sweep.capacity_on
	// ("goodput >= 95%", the default).
	Rule string
	// Settle, when set, runs before each step (wait until the target is
	// idle); an error ends the sweep.
	Settle func(ctx context.Context) error
	// Prepare, when set, runs before each step with its index; the requests
	// of a step are prepared before its clock starts (calibration).
	Prepare func(ctx context.Context, step int) error
	// Step, when set, sees each step as it ends.
	Step func(sweep.ReplayStep)
}

// SendFunc sends one request of the trace and returns its result.
type SendFunc func(ctx context.Context, r Request) prober.Result

// Judge says whether a result is good: it succeeded (or ended short as
// prober.Thresholds.MetBy allows), met th, and met its length class's TTFT.
func Judge(th prober.Thresholds, ttft ClassTTFT) func(*prober.Result) bool {
	return func(r *prober.Result) bool {
		if r.Kind == prober.KindError || !th.MetBy(r) {
			return false
		}
		class := r.LengthClass
		if class == "" {
			class = ClassOf(r.WantPromptTokens).Name
		}
		return ttft == nil || ttft.Met(class, r.TTFT())
	}
}

// Replay replays reqs (in trace order; At their timestamps) open-loop at
// each speed-up: request i is sent (At_i − At_0) ÷ speed-up after the step
// starts, whatever the answers before it. Each step is judged by the rule's
// share of good requests; the headroom is the largest speed-up at which it
// holds.
func Replay(ctx context.Context, reqs []Request, send SendFunc, good func(*prober.Result) bool, o ReplayOptions) (sweep.Headroom, error) {
	if len(reqs) < 2 {
		return sweep.Headroom{}, errors.New("workload: replay needs at least two requests")
	}
	ruleText := o.Rule
	if ruleText == "" {
		ruleText = sweep.DefaultCapacityOn
	}
	rule, err := sweep.ParseCapacityRule(ruleText)
	if err != nil {
		return sweep.Headroom{}, fmt.Errorf("workload: replay capacity_on: %w", err)
	}
	if rule.Metric != "goodput" {
		return sweep.Headroom{}, fmt.Errorf("workload: replay capacity_on %q: a replay is judged by goodput only, e.g. %q", ruleText, sweep.DefaultCapacityOn)
	}
	speeds := o.Speedups
	if len(speeds) == 0 {
		speeds = DefaultSpeedups
	}
	for i, f := range speeds {
		if !(f > 0) || math.IsInf(f, 0) || (i > 0 && f <= speeds[i-1]) {
			return sweep.Headroom{}, fmt.Errorf("workload: speed-ups %v: expected positive numbers in ascending order", speeds)
		}
	}
	refine := o.Refine
	if refine == 0 {
		refine = DefaultRefine
	}
	span := reqs[len(reqs)-1].At - reqs[0].At
	if span <= 0 {
		return sweep.Headroom{}, errors.New("workload: replay needs a trace whose timestamps span some time")
	}
	h := sweep.Headroom{Rule: rule.Text, BaseRate: float64(len(reqs)-1) / span.Seconds()}
	run := func(f float64) error {
		if o.Settle != nil {
			if err := o.Settle(ctx); err != nil {
				return err
			}
		}
		if o.Prepare != nil {
			if err := o.Prepare(ctx, len(h.Steps)); err != nil {
				return err
			}
		}
		st := replayStep(ctx, reqs, send, good, f)
		st.OfferedRate = h.BaseRate * f
		if err := ctx.Err(); err != nil {
			return err
		}
		h.Steps = append(h.Steps, st)
		if o.Step != nil {
			o.Step(st)
		}
		return nil
	}
	for _, f := range speeds {
		if err := run(f); err != nil {
			return h, err
		}
	}
	for range max(refine, 0) {
		lo, hi, ok := h.Crossing(rule.Limit)
		if !ok || hi-lo < 0.02*lo {
			break
		}
		if err := run((lo + hi) / 2); err != nil {
			return h, err
		}
	}
	h.Judge(rule.Limit)
	return h, nil
}

// replayStep sends reqs at speed-up f and judges them.
func replayStep(ctx context.Context, reqs []Request, send SendFunc, good func(*prober.Result) bool, f float64) sweep.ReplayStep {
	st := sweep.ReplayStep{Speedup: f, Requests: len(reqs)}
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		late  = make([]float64, 0, len(reqs))
		ttft  []float64
		slots = make(chan struct{}, MaxInFlight)
	)
	start := time.Now()
	t0 := reqs[0].At
	var last time.Time
	for _, r := range reqs {
		due := start.Add(time.Duration(float64(r.At-t0) / f))
		if d := time.Until(due); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		late = append(late, time.Since(due).Seconds())
		select {
		case slots <- struct{}{}:
		default:
			st.Dropped++
			continue
		}
		wg.Add(1)
		go func(r Request) {
			defer wg.Done()
			defer func() { <-slots }()
			res := send(ctx, r)
			ok := good(&res)
			mu.Lock()
			defer mu.Unlock()
			if res.Kind != prober.KindError {
				st.Succeeded++
				ttft = append(ttft, res.TTFT().Seconds())
			}
			if ok {
				st.Good++
			}
			if now := time.Now(); now.After(last) {
				last = now
			}
		}(r)
	}
	wg.Wait()
	st.Duration = last.Sub(start)
	st.GoodShare = float64(st.Good) / float64(st.Requests)
	st.Late = time.Duration(sweep.Summarize(late).P99 * float64(time.Second))
	st.TTFT = sweep.Summarize(ttft)
	return st
}

// ParseSpeedups reads "0.5,1,2,4" (an optional × or x after each).
func ParseSpeedups(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(strings.TrimRight(strings.TrimLeft(strings.TrimSpace(f), "×x"), "×x"))
		x, err := strconv.ParseFloat(f, 64)
		if err != nil || !(x > 0) || math.IsInf(x, 0) || (len(out) > 0 && x <= out[len(out)-1]) {
			return nil, fmt.Errorf("speed-ups %q: expected positive numbers in ascending order, such as 0.5,1,2,4", s)
		}
		out = append(out, x)
	}
	return out, nil
}

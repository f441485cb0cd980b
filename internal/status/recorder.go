// Package status is the daemon's own web view: the status page at "/", the
// recent probes of a target with their log lines, and the latest daemon
// sweep of each target as the same report.html and report.json that
// `slaprobe bench` writes. It holds no state of its own beyond the
// Recorder; every other source (config, scheduler, engine metrics, NVML,
// sweeps) is injected by the composition root.
package status

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/slaprobe/slaprobe/prober"
)

// DefaultKeep is how many probes the Recorder keeps per target and
// scenario: two hours of chatbot at its 30 s interval, ten hours of
// tool_calling at 5 min.
const DefaultKeep = 240

// maxLogLines bounds the log lines kept with one probe and, separately,
// those of a target that belong to no probe (model listing, sweeps).
const maxLogLines = 40

// Bounds of what the Recorder keeps besides each series' keep probes: how
// many series (target and scenario) and targets with log lines of their
// own, the least recently active dropped first, how old a target's own log
// lines may get, and how long one log line may be.
const (
	maxSeries       = 4096
	maxLogTargets   = 1024
	maxLogAge       = 24 * time.Hour
	maxLogLineBytes = 2048
)

// afterProbeLogGrace is how long after a probe ends a log line of its
// target and scenario still belongs to it: the scheduler logs the outcome
// just after the hooks have seen it.
const afterProbeLogGrace = 2 * time.Second

// Probe is one scheduled probe as the status pages show it.
type Probe struct {
	Target, Scenario, Model string
	// Sent is when the scheduler sent it (BeforeProbe).
	Sent time.Time
	// Done is false while the probe runs.
	Done  bool
	Ended time.Time

	Kind   prober.Kind
	Reason prober.Reason
	Err    string // the failure's detail

	TTFT, ITL, E2E time.Duration
	Decode         float64 // tokens/s
	// Acceptance is the probe's speculative-decoding acceptance (accepted
	// ÷ drafted tokens) as the response reported it, when HasAcceptance.
	Acceptance    float64
	HasAcceptance bool
	CacheHit      bool // TTFT and E2E are not valid (the prefix cache served part of the prompt)

	PromptTokens, OutputTokens, RequestedTokens int
	FinishReason, ResponseID                    string

	// TraceID is the W3C trace id the probe sent. Engine is the engine's
	// own timing (settled later when it comes from a trace); Split is the
	// TTFT split it gives, when HasSplit.
	TraceID  string
	Engine   prober.EngineTiming
	Split    prober.Split
	HasSplit bool

	Logs []LogLine

	// Stamps is where the probe's arrival times came from: kernel or user
	// (prober.StampSource); "" when its stream was not read.
	Stamps string

	// Turns counts the probe as slaprobe_probes_total does (a warm
	// conversation: each follow-up, not its priming turn), GoodTurns as
	// slaprobe_probes_good_total does: those that met every threshold of
	// the scenario at once (prober.Thresholds.MetBy).
	Turns, GoodTurns int
	// Conversation holds the turns of a conversation probe, priming turn
	// first; nil for a cold probe.
	Conversation []ConvTurn
	// LengthClass is the prompt-length class of a probe of a trace-shaped
	// or live scenario ("" otherwise); ClassTTFT its TTFT as
	// slaprobe_trace_ttft_seconds records it (0: no first token).
	LengthClass string
	ClassTTFT   time.Duration
	thresholds  prober.Thresholds // the scenario's, as the probe was sent
}

// OK reports whether the probe succeeded.
func (p *Probe) OK() bool { return p.Done && p.Kind == prober.KindSuccess }

// Timed reports whether the probe's timings may be read: it succeeded, or
// the server ended the answer early (short_output), whose TTFT, E2E at the
// asked length and, from prober.MinDecodeTokens tokens on, ITL and decode
// speed are measurements too. A timing that was not measured is zero.
func (p *Probe) Timed() bool {
	return p.Done && (p.Kind == prober.KindSuccess || p.Kind == prober.KindShortOutput)
}

// LogLine is one log record that concerned a probe or its target.
type LogLine struct {
	Time  time.Time
	Level string
	Text  string // message and attributes, logfmt-like
}

type key struct{ target, scenario string }

type series struct {
	probes   []*Probe // finished, oldest first
	inFlight []*Probe // sent, not yet finished, oldest first
	active   time.Time
}

// Recorder keeps the recent probes of every target and scenario, and the
// log lines that concern them, within fixed bounds (maxSeries,
// maxLogTargets, maxLogAge, maxLogLineBytes). It is a prober.ProbeHook; Handler tees the
// daemon's log records into it. Safe for concurrent use.
type Recorder struct {
	keep int
	now  func() time.Time

	mu         sync.Mutex
	series     map[key]*series
	targetLogs map[string][]LogLine
	// known are the configured targets (Forget sets them): log lines of
	// any other target (an address /probe was asked for) are not kept.
	// nil until Forget is first called: every target.
	known map[string]bool
}

// NewRecorder keeps the last keep probes (DefaultKeep when keep < 1) of
// each target and scenario. now is the clock; nil means time.Now.
func NewRecorder(keep int, now func() time.Time) *Recorder {
	if keep < 1 {
		keep = DefaultKeep
	}
	if now == nil {
		now = time.Now
	}
	return &Recorder{keep: keep, now: now, series: map[key]*series{}, targetLogs: map[string][]LogLine{}}
}

func (r *Recorder) get(k key) *series {
	s := r.series[k]
	if s == nil {
		if len(r.series) >= maxSeries {
			r.dropOldestSeries()
		}
		s = &series{}
		r.series[k] = s
	}
	s.active = r.now()
	return s
}

// dropOldestSeries forgets the least recently active series.
func (r *Recorder) dropOldestSeries() {
	var oldest key
	var at time.Time
	first := true
	for k, s := range r.series {
		if first || s.active.Before(at) {
			oldest, at, first = k, s.active, false
		}
	}
	delete(r.series, oldest)
}

// keeps reports whether log lines of target are kept.
func (r *Recorder) keeps(target string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.known == nil || r.known[target]
}

// addTargetLog files l with target's own lines: at most maxLogLines, none
// older than maxLogAge, for at most maxLogTargets targets (the one whose
// newest line is oldest is dropped first).
func (r *Recorder) addTargetLog(target string, l LogLine) {
	ls, ok := r.targetLogs[target]
	if !ok && len(r.targetLogs) >= maxLogTargets {
		var oldest string
		var at time.Time
		first := true
		for t, ls := range r.targetLogs {
			if n := ls[len(ls)-1].Time; first || n.Before(at) {
				oldest, at, first = t, n, false
			}
		}
		delete(r.targetLogs, oldest)
	}
	r.targetLogs[target] = dropOld(appendBounded(ls, l), r.now())
}

// dropOld drops the lines older than maxLogAge.
func dropOld(ls []LogLine, now time.Time) []LogLine {
	i := 0
	for i < len(ls) && now.Sub(ls[i].Time) > maxLogAge {
		i++
	}
	return ls[i:]
}

// BeforeProbe records a probe as in flight.
func (r *Recorder) BeforeProbe(_ context.Context, t prober.Target, s prober.Scenario) {
	p := &Probe{Target: t.Name, Scenario: s.Name, Model: t.Model, Sent: r.now(), RequestedTokens: s.OutputTokens, thresholds: s.Thresholds}
	r.mu.Lock()
	defer r.mu.Unlock()
	ser := r.get(key{t.Name, s.Name})
	// A probe whose AfterProbe never came (a scheduler stopped without
	// one) must not look in flight forever.
	keep := ser.inFlight[:0]
	for _, q := range ser.inFlight {
		if p.Sent.Sub(q.Sent) < s.Timeout*2+time.Minute {
			keep = append(keep, q)
		}
	}
	ser.inFlight = append(keep, p)
}

// AfterProbe completes the probe BeforeProbe recorded. A probe the
// scheduler cancelled (stop or reload) measured nothing and is dropped,
// as the probe metrics drop it.
func (r *Recorder) AfterProbe(res *prober.Result) {
	if res == nil {
		return
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	ser, i := r.findInFlight(res)
	if ser == nil {
		return
	}
	p := ser.inFlight[i]
	ser.inFlight = append(ser.inFlight[:i], ser.inFlight[i+1:]...)
	if errors.Is(res.Err, context.Canceled) {
		return
	}
	fill(p, res, now)
	ser.probes = append(ser.probes, p)
	if n := len(ser.probes) - r.keep; n > 0 {
		ser.probes = append(ser.probes[:0], ser.probes[n:]...)
	}
}

// findInFlight returns the series and index of the in-flight probe res
// ends: its own target and scenario, or, when the result does not name
// its scenario, the oldest probe in flight on its target.
func (r *Recorder) findInFlight(res *prober.Result) (*series, int) {
	if res.Scenario != "" {
		if ser := r.series[key{res.Target, res.Scenario}]; ser != nil && len(ser.inFlight) > 0 {
			return ser, 0
		}
		return nil, 0
	}
	var best *series
	for k, ser := range r.series {
		if k.target == res.Target && len(ser.inFlight) > 0 &&
			(best == nil || ser.inFlight[0].Sent.Before(best.inFlight[0].Sent)) {
			best = ser
		}
	}
	return best, 0
}

func fill(p *Probe, res *prober.Result, now time.Time) {
	p.Done, p.Ended = true, now
	if res.Model != "" {
		p.Model = res.Model
	}
	p.Kind, p.Reason = res.Kind, res.Reason
	if res.Err != nil {
		p.Err = res.Err.Error()
	}
	p.PromptTokens, p.OutputTokens = res.PromptTokens, res.OutputTokens
	if res.RequestedTokens > 0 {
		p.RequestedTokens = res.RequestedTokens
	}
	// A warm follow-up is meant to hit the cache: its TTFT and E2E are the measurement.
	p.FinishReason, p.ResponseID, p.CacheHit = res.FinishReason, res.ResponseID, res.CacheHit() && !res.FollowUp()
	p.TraceID = res.TraceID
	p.Stamps = string(res.Stamps)
	setEngine(p, res)
	for _, turn := range append(res.Earlier[:len(res.Earlier):len(res.Earlier)], *res) {
		if turn.Turn == 1 && turn.Kind == prober.KindSuccess {
			continue // a warm priming turn: not a probe of its own
		}
		p.Turns++
		if p.thresholds.MetBy(&turn) {
			p.GoodTurns++
		}
	}
	p.Conversation = conversationTurns(res)
	p.LengthClass = res.LengthClass
	if res.LengthClass != "" && res.Kind != prober.KindError && !res.FirstToken.IsZero() {
		p.ClassTTFT = res.TTFT()
	}
	if !res.Timed() {
		return
	}
	p.TTFT = res.TTFT()
	if d, ok := res.E2EAtRequested(); ok {
		p.E2E = d
	}
	if res.DecodeMeasured() {
		p.ITL, p.Decode = res.ITL(), res.DecodeSpeed()
	}
	p.Acceptance, p.HasAcceptance = res.SpecDecode.Acceptance()
}

func setEngine(p *Probe, res *prober.Result) {
	p.Engine = res.Engine
	p.Split, p.HasSplit = res.Split()
}

// EngineTimed updates a kept probe with the engine timing a trace join
// settled after the probe ended (daemon.EngineTimingHook).
func (r *Recorder) EngineTimed(res *prober.Result) {
	if res == nil || res.TraceID == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ser := r.series[key{res.Target, res.Scenario}]
	if ser == nil {
		return
	}
	for i := len(ser.probes) - 1; i >= 0; i-- {
		if p := ser.probes[i]; p.TraceID == res.TraceID {
			setEngine(p, res)
			return
		}
	}
}

// addLog files a log line: with the probe of target and scenario in flight
// or just finished, else with the target.
func (r *Recorder) addLog(target, scenario string, l LogLine) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.known != nil && !r.known[target] {
		return
	}
	if len(l.Text) > maxLogLineBytes {
		l.Text = l.Text[:maxLogLineBytes] + "…"
	}
	if scenario == "" {
		// A line that names only the target (calibration, model
		// detection) belongs to the probe running on it, if only one is.
		var only *Probe
		n := 0
		for k, ser := range r.series {
			if k.target == target {
				n += len(ser.inFlight)
				if len(ser.inFlight) > 0 {
					only = ser.inFlight[0]
				}
			}
		}
		if n == 1 {
			only.Logs = appendBounded(only.Logs, l)
			return
		}
	}
	if scenario != "" {
		if ser := r.series[key{target, scenario}]; ser != nil {
			switch {
			case len(ser.inFlight) > 0:
				p := ser.inFlight[len(ser.inFlight)-1]
				p.Logs = appendBounded(p.Logs, l)
				return
			case len(ser.probes) > 0:
				p := ser.probes[len(ser.probes)-1]
				if r.now().Sub(p.Ended) <= afterProbeLogGrace {
					p.Logs = appendBounded(p.Logs, l)
					return
				}
			}
		}
	}
	r.addTargetLog(target, l)
}

func appendBounded(ls []LogLine, l LogLine) []LogLine {
	ls = append(ls, l)
	if n := len(ls) - maxLogLines; n > 0 {
		ls = append(ls[:0], ls[n:]...)
	}
	return ls
}

// Probes returns copies of the finished probes of target and scenario,
// oldest first, and the ones in flight.
func (r *Recorder) Probes(target, scenario string) (done, inFlight []Probe) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ser := r.series[key{target, scenario}]
	if ser == nil {
		return nil, nil
	}
	return copyProbes(ser.probes), copyProbes(ser.inFlight)
}

// TargetProbes returns copies of every probe of target, finished and in
// flight, newest first.
func (r *Recorder) TargetProbes(target string) []Probe {
	r.mu.Lock()
	var out []Probe
	for k, ser := range r.series {
		if k.target == target {
			out = append(out, copyProbes(ser.probes)...)
			out = append(out, copyProbes(ser.inFlight)...)
		}
	}
	r.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Sent.After(out[j].Sent) })
	return out
}

// TargetLogs returns the log lines of target that belong to no probe,
// oldest first.
func (r *Recorder) TargetLogs(target string) []LogLine {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]LogLine(nil), dropOld(r.targetLogs[target], r.now())...)
}

// Forget drops what is kept of targets not in keep (they left the config)
// and keeps no log lines of other targets from then on.
func (r *Recorder) Forget(keep map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.known = make(map[string]bool, len(keep))
	for t, ok := range keep {
		if ok {
			r.known[t] = true
		}
	}
	for k := range r.series {
		if !keep[k.target] {
			delete(r.series, k)
		}
	}
	for t := range r.targetLogs {
		if !keep[t] {
			delete(r.targetLogs, t)
		}
	}
}

func copyProbes(ps []*Probe) []Probe {
	if len(ps) == 0 {
		return nil
	}
	out := make([]Probe, len(ps))
	for i, p := range ps {
		out[i] = *p
		out[i].Logs = append([]LogLine(nil), p.Logs...)
		out[i].Conversation = append([]ConvTurn(nil), p.Conversation...)
	}
	return out
}

package collector

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/engine"
	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/prober"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// TestLiveSignalsUnderLoadRamp runs the simulated engine under a ramp of
// concurrent streams (0, 1, 2, 4, 8, 16 with 8 batch slots), probes it
// through the Live hook and the real prober, and checks the live signals
// against the engine's own record and its timing model:
//   - probes land in the queue-depth bucket of their ramp level, and TTFT
//     rises once requests wait;
//   - the idle baseline matches the engine's trace of its request, and live
//     scaling efficiency the engine's own (its achieved per-sequence speed
//     over its speed alone) at every level, and falls as the batch grows;
//   - the live max safe queue depth lies past the 8 batch slots, before 16.
func TestLiveSignalsUnderLoadRamp(t *testing.T) {
	if testing.Short() {
		t.Skip("the load ramp takes about 30 s")
	}
	testproc.QuietLight(t) // tells idle probes and load apart by timing
	cfg, sim, srv, target, pool := decodeBoundSim(t, 50*time.Millisecond)
	live := NewLive(pool, LiveOptions{EfficiencyWindow: 2 * time.Second, EfficiencySmoothing: 300 * time.Millisecond})
	p := prober.New(nil, prober.SystemClock{})
	scen := prober.Scenario{Name: "e2e", Family: prober.FamilyCustom, InputTokens: 128, OutputTokens: 64,
		Interval: time.Second, Timeout: 20 * time.Second, Thresholds: prober.Thresholds{TTFT: 1200 * time.Millisecond}}
	ctx := context.Background()
	probe := func() prober.Result {
		live.BeforeProbe(ctx, target, scen)
		res := p.Probe(ctx, target, cfg.ModelName, scen)
		live.AfterProbe(&res)
		if res.Kind != prober.KindSuccess {
			t.Errorf("probe failed: %s %v", res.Reason, res.Err)
		}
		return res
	}

	// Load: closed-loop non-streaming requests of 128 output tokens.
	load := func(ctx context.Context, wg *sync.WaitGroup) {
		defer wg.Done()
		body := fmt.Sprintf(`{"model":%q,"prompt":"load load load load","max_tokens":128,"min_tokens":128,"ignore_eos":true}`, cfg.ModelName)
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := srv.Client().Do(req)
			if err != nil {
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}

	// Level 0: the engine is idle; these probes give the single-stream speed.
	time.Sleep(300 * time.Millisecond)
	var idle []prober.Result
	for range 3 {
		idle = append(idle, probe())
	}
	base := liveFind(t, live, "slaprobe_live_single_stream_decode_tokens_per_second", nil)
	if len(base) != 1 {
		t.Fatal("no single-stream baseline from idle probes")
	}
	bs1 := base[0].GetGauge().GetValue()
	bs1Model := cfg.SteadyThroughput(1, 100)
	// The baseline is one idle probe's decode speed: judged against the
	// engine's trace of that very request, not against the model (on a
	// loaded machine the engine falls behind its schedule: 113 tok/s for
	// a modelled 200, the trace agreeing with the probe).
	var from *prober.Result
	for i := range idle {
		if idle[i].DecodeSpeed() == bs1 {
			from = &idle[i]
		}
	}
	if from == nil {
		t.Fatalf("single-stream baseline %.3f tok/s is none of the idle probes' decode speeds", bs1)
	}
	tr, ok := sim.Trace(from.ResponseID)
	if !ok {
		t.Fatalf("no engine trace for response id %q", from.ResponseID)
	}
	bs1Engine := traceDecodeSpeed(tr)
	t.Logf("single-stream decode: probes %.1f tok/s, the engine's trace of the same request %.1f tok/s (%+.2f%%), engine model %.1f tok/s",
		bs1, bs1Engine, 100*(bs1/bs1Engine-1), bs1Model)
	if rel := bs1/bs1Engine - 1; math.Abs(rel) > liveDecodeRel {
		t.Errorf("single-stream decode %.1f tok/s; the engine's trace of the same request %.1f tok/s: off by %+.2f%%, tolerance ±%.0f%%",
			bs1, bs1Engine, 100*rel, 100*liveDecodeRel)
	}
	// The model is a ceiling only: an engine is never faster than its schedule.
	if bs1 > (1+liveDecodeRel)*bs1Model {
		t.Errorf("single-stream decode %.1f tok/s, over the engine model's %.1f", bs1, bs1Model)
	}

	type level struct {
		streams   int
		label     string
		eff       float64
		model     float64
		meanTTFT  float64
		meanBatch float64
		simStep   float64 // the simulator's achieved decode step, seconds
		lagged    bool    // it fell behind its model (CPU starved)
		engSpeed  float64 // its per-sequence speed over live's window of scrapes
	}
	rec := recordSteps(sim, cfg)
	defer rec.Stop()
	levels := []*level{{streams: 1, label: "1"}, {streams: 2, label: "2-3"}, {streams: 4, label: "4-7"}, {streams: 8, label: "8-15"}, {streams: 16, label: "16-31"}}
	for _, lv := range levels {
		lctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for range lv.streams {
			wg.Add(1)
			go load(lctx, &wg)
		}
		// Efficiency first, over a window with the load alone (a probe is a
		// large share of a one-stream load), then the probes.
		time.Sleep(600 * time.Millisecond)
		st0, t0 := sim.Stats(), time.Now()
		time.Sleep(2 * time.Second)
		st1, t1 := sim.Stats(), time.Now()
		if e, ok := live.Efficiency("sim"); ok {
			lv.eff = e.Ratio
		}
		lv.engSpeed = rec.perSeqSpeed(liveWindow(pool, 2*time.Second))
		r, _ := engine.WindowRates(pool.Watcher("sim").Window(2 * time.Second))
		lv.meanBatch = min(r.MeanRunning, float64(cfg.MaxNumSeqs))
		// The model at the measured batch: step(b) is linear in b.
		s1, s2 := cfg.DecodeStep(1, 0).Seconds(), cfg.DecodeStep(2, 0).Seconds()
		modelStep := s1 + (lv.meanBatch-1)*(s2-s1)
		lv.model = s1 / modelStep
		// On a loaded machine the simulator cannot keep its own schedule;
		// then its model says nothing about this level.
		busy := t1.Sub(t0).Seconds() - float64(st1.PrefillSteps-st0.PrefillSteps)*cfg.PrefillTime(32).Seconds()
		if steps := float64(st1.DecodeSteps - st0.DecodeSteps); steps > 0 {
			lv.simStep = busy / steps
		}
		lv.lagged = lv.simStep > 1.1*modelStep
		var ttft float64
		const probes = 3
		for range probes {
			res := probe()
			ttft += res.TTFT().Seconds()
			time.Sleep(250 * time.Millisecond)
		}
		lv.meanTTFT = ttft / probes
		cancel()
		wg.Wait()
		time.Sleep(300 * time.Millisecond)
	}

	// Live efficiency against the engine's own over the same window (the
	// span of the scrapes live's latest figure came from): its per-sequence
	// speed (one token per running sequence each decode step) over its
	// speed alone (the trace of the baseline's probe). At every level, lagged or not: the engine's
	// record follows the engine wherever its schedule went. Judged by the
	// median over the levels, so that one level whose window a stall or a
	// scrape 200 ms late moved does not decide (levels −4.1 … +4.3 % under
	// load, docs/testing.md); the arithmetic is the same at every level, so
	// a fault of it moves the median.
	lagged := 0
	var effRel []float64
	for _, lv := range levels {
		engineEff := 0.0
		if lv.engSpeed > 0 {
			engineEff = lv.engSpeed / bs1Engine
		}
		rel := lv.eff/engineEff - 1
		t.Logf("streams %2d: label %-5s mean batch %4.1f  efficiency live %.3f engine %.3f (%+.2f%%) model %.3f  sim step %.2f ms  probe TTFT %.3f s",
			lv.streams, lv.label, lv.meanBatch, lv.eff, engineEff, 100*rel, lv.model, 1000*lv.simStep, lv.meanTTFT)
		if engineEff <= 0 || lv.eff <= 0 {
			t.Errorf("streams %d: live efficiency %.3f, the engine's own %.3f: want both", lv.streams, lv.eff, engineEff)
		}
		effRel = append(effRel, rel)
		if lv.lagged {
			lagged++
		}
	}
	slices.Sort(effRel)
	if med := effRel[len(effRel)/2]; math.Abs(med) > liveEffRel {
		t.Errorf("live efficiency against the engine's own: median over the levels %+.2f%%, tolerance ±%.0f%%", 100*med, 100*liveEffRel)
	}
	if lagged > 2 {
		t.Skipf("the simulator lagged its model at %d of %d levels: the machine is too busy for this test", lagged, len(levels))
	}
	var prev *level
	for _, lv := range levels {
		if lv.lagged {
			t.Logf("streams %d: the simulator lagged its model (machine busy); level not checked", lv.streams)
			continue
		}
		// Probes land in their level's bucket (the probe itself is not counted:
		// it is read before sending).
		ms := liveFind(t, live, "slaprobe_ttft_by_queue_depth_seconds", map[string]string{"queue_depth": lv.label})
		if len(ms) != 1 || ms[0].GetHistogram().GetSampleCount() < 1 {
			t.Errorf("streams %d: bucket %q holds %v", lv.streams, lv.label, ms)
		}
		if prev != nil && lv.streams <= cfg.MaxNumSeqs && lv.eff >= prev.eff {
			t.Errorf("efficiency did not fall from %d to %d streams: %.3f -> %.3f", prev.streams, lv.streams, prev.eff, lv.eff)
		}
		prev = lv
	}
	// Beyond 8 slots, requests wait: TTFT jumps.
	if last, prev := levels[len(levels)-1], levels[len(levels)-2]; last.meanTTFT < 2*prev.meanTTFT || last.meanTTFT < scen.Thresholds.TTFT.Seconds() {
		t.Errorf("TTFT with a queue %.3f s vs without %.3f s: want a clear rise past the threshold", last.meanTTFT, prev.meanTTFT)
	}
	ms := live.MaxSafeDepths()
	if len(ms) != 1 {
		t.Fatalf("max safe depths: %+v", ms)
	}
	t.Logf("live max safe queue depth %.1f from %d probes (lower bound: %v)", ms[0].Depth, ms[0].Samples, ms[0].LowerBound)
	// With 8 others in the engine a probe waits for a slot but stays under
	// the 1.2 s threshold; with 16 it waits for a whole round: over it.
	if ms[0].LowerBound || ms[0].Depth < 8 || ms[0].Depth > 16 {
		t.Errorf("live max safe queue depth %.1f (lower bound %v); want between 8 and 16", ms[0].Depth, ms[0].LowerBound)
	}
}

// TestLiveEfficiencyWithoutIdle: a server that is never idle gives no probe
// that ran alone and no sweep, so the single-stream baseline comes from the
// fit of the probes' decode speed against the engine's running requests,
// read at one request. Background load cycles between 1, 2 and 3 streams
// and never stops; the baseline must match the engine's own line over the
// same probes (each one's trace against the engine's batch while it ran),
// and live efficiency the engine's own per-sequence speed over the steady
// phase, over the same baseline.
func TestLiveEfficiencyWithoutIdle(t *testing.T) {
	if testing.Short() {
		t.Skip("about 25 s of steady load")
	}
	// Up to three attempts on quiet cores. An attempt where the engine fell
	// more than 10 % behind its own schedule in the steady phase says
	// nothing (the old test skipped it): on a machine that loaded (engine
	// steps of 8.9–11.6 ms for 7) its lag varies in step with the batch
	// cycle, and the fit, slaprobe's as much as the engine's own line, reads
	// that as slope (258 and 225 tok/s for a schedule of 200 once), and
	// live's 2 s windows were off the engine's by −11.6 … +22.9 %.
	testproc.QuietLight(t)
	const attempts = 3
	for i := 1; i <= attempts; i++ {
		var problems []string
		lag := liveEfficiencyWithoutIdle(t, func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) })
		if lag == "" && len(problems) == 0 {
			return
		}
		if lag != "" {
			problems = append(problems, lag)
		}
		for _, p := range problems {
			if i < attempts {
				t.Logf("attempt %d: %s", i, p)
			} else if lag == "" {
				t.Error(p)
			} else {
				t.Log(p)
			}
		}
		if i == attempts && lag != "" {
			t.Skipf("the engine lagged its own schedule in every attempt: the machine is too busy for this test (%s)", lag)
		}
	}
}

// liveEfficiencyWithoutIdle is one attempt of TestLiveEfficiencyWithoutIdle.
// It returns why the attempt says nothing, or "".
func liveEfficiencyWithoutIdle(t *testing.T, errorf func(string, ...any)) (lag string) {
	cfg, sim, srv, target, pool := decodeBoundSim(t, 20*time.Millisecond)
	// Smoothing short against the window, so that the latest figure is
	// about the latest window of scrapes, which the engine's record is read
	// over.
	live := NewLive(pool, LiveOptions{EfficiencyWindow: 2 * time.Second, EfficiencySmoothing: 300 * time.Millisecond})
	p := prober.New(nil, prober.SystemClock{})
	scen := prober.Scenario{Name: "e2e", Family: prober.FamilyCustom, InputTokens: 128, OutputTokens: 64,
		Interval: time.Second, Timeout: 20 * time.Second, Thresholds: prober.Thresholds{TTFT: time.Second}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Background: streams of 128-token requests, cycling 1, 2, 3 every 2 s.
	body := fmt.Sprintf(`{"model":%q,"prompt":"load load load load","max_tokens":128,"min_tokens":128,"ignore_eos":true}`, cfg.ModelName)
	var wg sync.WaitGroup
	stream := func(ctx context.Context) {
		defer wg.Done()
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if resp, err := srv.Client().Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}
	wg.Add(1)
	go stream(ctx) // the one that never stops
	var extra []context.CancelFunc
	setStreams := func(n int) {
		for len(extra) > n-1 {
			extra[len(extra)-1]()
			extra = extra[:len(extra)-1]
		}
		for len(extra) < n-1 {
			c, stop := context.WithCancel(ctx)
			extra = append(extra, stop)
			wg.Add(1)
			go stream(c)
		}
	}
	defer func() { cancel(); wg.Wait() }()

	time.Sleep(300 * time.Millisecond)
	// 17 s of varying load with probes (the fit's inputs), then 7 s steady
	// at 3 streams without probes, over the last 6 s of which live
	// efficiency is compared with the engine's own. Without probes the
	// batch holds still, so the engine's record over those 6 s and live's
	// smoothed windows of 2 s see the same batch.
	start := time.Now()
	var decodeRel []float64        // each probe's decode speed against the engine's trace of it, relative
	var engBatch, engITL []float64 // the engine's mean batch over each probe's decode, and the probe's ITL by its trace
	// The engine's batch, sampled every millisecond through the varying phase.
	type batchAt struct {
		at      time.Time
		running int
	}
	var (
		batchMu  sync.Mutex
		batches  []batchAt
		sampling = make(chan struct{})
		sampled  = make(chan struct{})
	)
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-sampling:
				return
			case now := <-tick.C:
				r := sim.Stats().Running
				batchMu.Lock()
				batches = append(batches, batchAt{now, r})
				batchMu.Unlock()
			}
		}
	}()
	meanBatch := func(from, to time.Time) float64 {
		batchMu.Lock()
		defer batchMu.Unlock()
		sum, n := 0, 0
		for _, b := range batches {
			if !b.at.Before(from) && !b.at.After(to) {
				sum, n = sum+b.running, n+1
			}
		}
		if n == 0 {
			return 0
		}
		return float64(sum) / float64(n)
	}
	for i := 0; time.Since(start) < 17*time.Second; i++ {
		setStreams(1 + i%3)
		for range 3 {
			live.BeforeProbe(ctx, target, scen)
			res := p.Probe(ctx, target, cfg.ModelName, scen)
			live.AfterProbe(&res)
			if res.Kind != prober.KindSuccess {
				t.Fatalf("probe failed: %s %v", res.Reason, res.Err)
			}
			tr, ok := sim.Trace(res.ResponseID)
			if !ok {
				t.Fatalf("no engine trace for response id %q", res.ResponseID)
			}
			decodeRel = append(decodeRel, res.DecodeSpeed()/traceDecodeSpeed(tr)-1)
			if b := meanBatch(tr.FirstTokenWritten, tr.LastTokenWritten); b > 0 {
				engBatch = append(engBatch, b)
				engITL = append(engITL, 1/traceDecodeSpeed(tr))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	close(sampling)
	<-sampled
	setStreams(3)
	rec := recordSteps(sim, cfg)
	defer rec.Stop()
	time.Sleep(7 * time.Second)
	r, _ := engine.WindowRates(pool.Watcher("sim").Window(2 * time.Second))
	s1, s2 := cfg.DecodeStep(1, 0).Seconds(), cfg.DecodeStep(2, 0).Seconds()
	modelStep := s1 + (r.MeanRunning-1)*(s2-s1)
	// The engine's own per-sequence decode speed over the span of the
	// scrapes live's latest figure came from (not the whole steady phase:
	// a stall the engine had before that span is in its record, not in
	// live's window: +22.9 % once under load).
	perSeqEngine := rec.perSeqSpeed(liveWindow(pool, 2*time.Second))

	// What slaprobe said, read before the load stops.
	src := liveFind(t, live, "slaprobe_live_single_stream_decode_source", map[string]string{"source": BaselineFit})
	if len(src) != 1 || src[0].GetGauge().GetValue() != 1 {
		t.Fatalf("baseline source fit = %v; want 1 (no probe ran alone, no sweep)", src)
	}
	if idle := liveFind(t, live, "slaprobe_live_single_stream_decode_source", map[string]string{"source": BaselineIdleProbe}); len(idle) != 1 || idle[0].GetGauge().GetValue() != 0 {
		errorf("an idle probe baseline on a server that was never idle: %v", idle)
	}
	base := liveFind(t, live, "slaprobe_live_single_stream_decode_tokens_per_second", nil)
	n := liveFind(t, live, "slaprobe_live_single_stream_decode_samples", nil)
	got := base[0].GetGauge().GetValue()
	e, ok := live.Efficiency("sim")
	if !ok {
		t.Fatal("no live scaling efficiency under steady load")
	}

	// The engine's own single-stream speed over the same probes: each one's
	// ITL by its trace against the engine's batch while it decoded (sampled
	// every millisecond), the same line ITL = a + b × batch read at one.
	// Not the engine alone later: on a loaded machine its speed alone moved
	// from 93 to 202 tok/s within three requests. Slaprobe's fit differs in
	// what it knows: the running requests as scraped before each probe.
	engine1 := lineAtOne(engBatch, engITL)
	// The fit's inputs, paired: each probe's decode speed against the
	// engine's trace of the same request (the median, so one request the
	// CPU delayed on one side only does not decide).
	slices.Sort(decodeRel)
	med := decodeRel[len(decodeRel)/2]
	t.Logf("probes' decode speed against the engine's traces of the same requests: median %+.2f%%, range %+.2f … %+.2f%% (%d probes)",
		100*med, 100*decodeRel[0], 100*decodeRel[len(decodeRel)-1], len(decodeRel))
	if math.Abs(med) > liveDecodeRel {
		errorf("probes' decode speed against the engine's traces of the same requests: median %+.2f%%, tolerance ±%.0f%%", 100*med, 100*liveDecodeRel)
	}

	// The fit, read at one request, against the engine's own line; the
	// model a ceiling only.
	model1 := cfg.SteadyThroughput(1, 0)
	t.Logf("fitted single-stream decode %.1f tok/s from %v probes; the engine's own line over the same probes %.1f tok/s (%+.2f%%; batches %.2f … %.2f); engine model %.1f tok/s",
		got, n[0].GetGauge().GetValue(), engine1, 100*(got/engine1-1), slices.Min(engBatch), slices.Max(engBatch), model1)
	if rel := got/engine1 - 1; engine1 <= 0 || math.Abs(rel) > liveFitRel {
		errorf("fitted single-stream decode %.1f tok/s; the engine's own over the same probes %.1f tok/s: off by %+.2f%%, tolerance ±%.0f%%", got, engine1, 100*rel, 100*liveFitRel)
	}
	if got > (1+liveFitRel)*model1 {
		errorf("fitted single-stream decode %.1f tok/s, over the engine model's %.1f", got, model1)
	}
	// Efficiency against the engine's own per-sequence speed over the
	// steady phase, over the same baseline: the fit's error is the check
	// above's, so this one judges the numerator (the engine's generation
	// rate and running requests as live scraped them) alone.
	want := perSeqEngine / got
	t.Logf("live efficiency %.3f at mean batch %.2f; the engine's own per-sequence speed over the same baseline %.3f (%+.2f%%; %.1f tok/s a sequence, step %.2f ms); over the engine's own baseline %.3f; engine model %.3f",
		e.Ratio, r.MeanRunning, want, 100*(e.Ratio/want-1), perSeqEngine, 1000/perSeqEngine, perSeqEngine/engine1, s1/modelStep)
	if rel := e.Ratio/want - 1; want <= 0 || math.Abs(rel) > liveEffRel {
		errorf("live efficiency %.3f; the engine's own per-sequence speed over the same baseline %.3f: off by %+.2f%%, tolerance ±%.0f%%", e.Ratio, want, 100*rel, 100*liveEffRel)
	}
	if achieved := 1 / perSeqEngine; perSeqEngine > 0 && achieved > 1.1*modelStep {
		return fmt.Sprintf("the engine's decode step averaged %.2f ms over live's window, over its model (%.2f ms at %.2f running)", 1000*achieved, 1000*modelStep, r.MeanRunning)
	}
	// The fit's phase too: where the engine kept its schedule its own line
	// read 196–200 tok/s for 200; off by more, its lag moved with the batch
	// cycle (180.7 once, with slaprobe's fit +11 % off it).
	if rel := engine1/model1 - 1; math.Abs(rel) > 0.05 {
		return fmt.Sprintf("the engine's own line over the probes read %.1f tok/s at one request, %+.1f%% off its model's %.1f: it did not keep its schedule", engine1, 100*rel, model1)
	}
	return ""
}

// TestLiveSpecDecodeAcceptance: an engine with speculative decoding (the
// simulator's MTP mode drafts TokensPerStep-1 tokens a step and accepts
// them all but at the end) shows its acceptance next to each probe; one
// without shows none.
func TestLiveSpecDecodeAcceptance(t *testing.T) {
	for _, k := range []int{1, 3} {
		cfg := vllmsim.DefaultConfig()
		cfg.TimeScale = 0.3
		cfg.TokensPerStep = k
		sim, err := vllmsim.New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(sim.Handler())
		target := prober.Target{Name: "sim", API: prober.APIChat, BaseURL: srv.URL, Client: srv.Client()}
		pool := engine.NewPool(engine.Options{Interval: time.Second, ProbeTimeout: time.Second, Fresh: 10 * time.Millisecond}, nil)
		pool.Sync([]prober.Target{target})
		live := NewLive(pool, LiveOptions{})
		scen := prober.Scenario{Name: "spec", Family: prober.FamilyCustom, InputTokens: 128, OutputTokens: 61,
			Interval: time.Second, Timeout: 20 * time.Second}
		live.BeforeProbe(context.Background(), target, scen)
		res := prober.New(nil, prober.SystemClock{}).Probe(context.Background(), target, cfg.ModelName, scen)
		live.AfterProbe(&res)
		ms := liveFind(t, live, "slaprobe_probe_spec_decode_acceptance_ratio", nil)
		switch {
		case res.Kind != prober.KindSuccess:
			t.Errorf("k=%d: probe failed: %s %v", k, res.Reason, res.Err)
		case k == 1 && len(ms) != 0:
			t.Errorf("k=1 (no speculative decoding): acceptance exported: %v", ms)
		case k > 1 && (len(ms) != 1 || ms[0].GetGauge().GetValue() < 0.9 || ms[0].GetGauge().GetValue() > 1):
			t.Errorf("k=%d: acceptance %v; want about 1 (all drafts accepted but the last step's)", k, ms)
		}
		pool.Close()
		srv.Close()
		sim.Close()
	}
}

// liveDecodeRel bounds a probe's decode speed against the engine's trace of
// the same request: 63 intervals of about 5 ms, so a 2 ms stamping lag at
// each end is 1.3 %; a 10 % error fails.
const liveDecodeRel = 0.03

// liveFitRel bounds the single-stream decode speed fitted from probes under
// load against the engine's own line over the same probes; liveEffRel live
// scaling efficiency against the engine's own (its per-sequence speed over
// the baseline; over a ramp, the median of its levels): measured spread and source in docs/testing.md ("Accuracy
// tolerances").
const (
	liveFitRel = 0.06
	liveEffRel = 0.05
)

// stepRecorder samples the simulated engine's step counters every 2 ms, so
// that its own per-sequence decode speed can be read over exactly the
// window of scrapes live computed its efficiency from.
type stepRecorder struct {
	cfg  vllmsim.Config
	mu   sync.Mutex
	at   []time.Time
	st   []vllmsim.Stats
	stop chan struct{}
	done chan struct{}
}

func recordSteps(sim *vllmsim.Engine, cfg vllmsim.Config) *stepRecorder {
	r := &stepRecorder{cfg: cfg, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-tick.C:
				st, now := sim.Stats(), time.Now()
				r.mu.Lock()
				r.at, r.st = append(r.at, now), append(r.st, st)
				r.mu.Unlock()
			}
		}
	}()
	return r
}

func (r *stepRecorder) Stop() { close(r.stop); <-r.done }

// perSeqSpeed is the engine's per-sequence decode speed over [from, to]:
// one token per running sequence each decode step, so its decode steps
// over the time it spent decoding (its prefill steps, about 1 ms each,
// taken out), between the samples nearest the two ends; 0 without steps.
func (r *stepRecorder) perSeqSpeed(from, to time.Time) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	near := func(t time.Time) int {
		i, _ := slices.BinarySearchFunc(r.at, t, func(a, b time.Time) int { return a.Compare(b) })
		if i == len(r.at) || (i > 0 && t.Sub(r.at[i-1]) < r.at[i].Sub(t)) {
			i--
		}
		return max(i, 0)
	}
	if len(r.at) < 2 {
		return 0
	}
	i, j := near(from), near(to)
	steps := float64(r.st[j].DecodeSteps - r.st[i].DecodeSteps)
	busy := r.at[j].Sub(r.at[i]).Seconds() - float64(r.st[j].PrefillSteps-r.st[i].PrefillSteps)*r.cfg.PrefillTime(32).Seconds()
	if steps <= 0 || busy <= 0 {
		return 0
	}
	return steps / busy
}

// liveWindow is the span of the scrapes live's latest efficiency came from.
func liveWindow(pool *engine.Pool, d time.Duration) (from, to time.Time) {
	w := pool.Watcher("sim").Window(d)
	if len(w) == 0 {
		return time.Time{}, time.Time{}
	}
	return w[0].Time, w[len(w)-1].Time
}

// lineAtOne fits y = a + b·x by least squares and returns 1 / (a + b): a
// per-token time's line against the batch, read at one request, as a speed;
// 0 when the points do not span a line.
func lineAtOne(x, y []float64) float64 {
	n := float64(len(x))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for i := range x {
		sx, sy = sx+x[i], sy+y[i]
	}
	mx, my := sx/n, sy/n
	for i := range x {
		sxx += (x[i] - mx) * (x[i] - mx)
		sxy += (x[i] - mx) * (y[i] - my)
	}
	if sxx == 0 {
		return 0
	}
	b := sxy / sxx
	if at1 := my + b*(1-mx); at1 > 0 {
		return 1 / at1
	}
	return 0
}

// traceDecodeSpeed is the engine's own decode speed of one streamed
// request: the tokens after the first chunk over the time from the first
// chunk written to the last, as the prober counts its side.
func traceDecodeSpeed(tr vllmsim.Trace) float64 {
	if len(tr.Chunks) < 2 {
		return 0
	}
	n := 0
	for _, c := range tr.Chunks[1:] {
		n += c.Tokens
	}
	return float64(n) / tr.LastTokenWritten.Sub(tr.FirstTokenWritten).Seconds()
}

// decodeBoundSim serves a simulated engine whose decode step is 4 + b ms at
// batch b (8 slots, prefill about 1 ms, no KV-cache cost): 200 tok/s alone,
// efficiency 5/(4+b). It returns the engine, its server, a target on it and
// an engine pool scraping it every 200 ms, all closed when the test ends.
func decodeBoundSim(t *testing.T, fresh time.Duration) (vllmsim.Config, *vllmsim.Engine, *httptest.Server, prober.Target, *engine.Pool) {
	t.Helper()
	cfg := vllmsim.DefaultConfig()
	cfg.MaxNumSeqs = 8
	cfg.PrefillOverhead = time.Millisecond // prefill stalls negligible: decode dominates
	cfg.DecodeBase = 4 * time.Millisecond
	cfg.DecodePerSeq = time.Millisecond
	cfg.DecodePerKVToken = 0
	cfg.EOSMeanTokens = 0
	cfg.RoleChunkEarly = false
	sim, err := vllmsim.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	target := prober.Target{Name: "sim", API: prober.APIChat, BaseURL: srv.URL, Client: srv.Client()}
	pool := engine.NewPool(engine.Options{Interval: 200 * time.Millisecond, ProbeTimeout: 500 * time.Millisecond, Fresh: fresh}, nil)
	t.Cleanup(pool.Close)
	pool.Sync([]prober.Target{target})
	return cfg, sim, srv, target, pool
}

package collector

import (
	"bytes"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/slaprobe/slaprobe/prober"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// success is a cold, successful chatbot probe: TTFT 200 ms, 255 intervals
// of 10 ms after the first token.
func success() prober.Result {
	return prober.Result{
		API: prober.APIChat, Target: "a", Model: "m", Scenario: "chatbot", Kind: prober.KindSuccess,
		Start:            t0,
		FirstToken:       t0.Add(200 * time.Millisecond),
		LastToken:        t0.Add(200*time.Millisecond + 255*10*time.Millisecond),
		PromptTokens:     1024,
		OutputTokens:     256,
		RequestedTokens:  256,
		FirstChunkTokens: 1,
		ContinuousUsage:  true,
		ChunkTokens:      []int32{1, 1, 2, 4},
		CachedReported:   true,
		PromptLengthOK:   true,
		FinishReason:     "length",
		FirstChunkKind:   prober.ChunkContent,
		OutputChunks:     4,
	}
}

func goldenCases() []prober.Result {
	cacheHit := success()
	cacheHit.CachedTokens = 512
	cacheHit.ChunkTokens = nil

	reasoning := success()
	reasoning.Scenario = "rag"
	reasoning.PromptTokens = 4096
	reasoning.Reasoning = true
	reasoning.FirstContent = t0.Add(time.Second)
	reasoning.ChunkTokens = nil
	reasoning.FirstChunkKind = prober.ChunkReasoning
	// vLLM's per-request metrics on the response: TTFT 0.2 s = 30 ms outside
	// + 50 ms queue + 120 ms prefill.
	reasoning.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	reasoning.Engine = prober.EngineTiming{Source: prober.TimingResponse,
		Queue: 50 * time.Millisecond, HasQueue: true, Prefill: 120 * time.Millisecond, HasPrefill: true,
		ITL: 4 * time.Millisecond, HasITL: true}
	// Speculative decoding with counts: 90 of 120 drafted tokens accepted.
	reasoning.SpecDecode = prober.SpecDecode{Draft: 120, Accepted: 90, HasCounts: true, Ratio: 0.75, Has: true}
	reasoning.Stamps = prober.StampKernel // slaprobe_probe_timestamps_total

	short := success()
	short.Kind = prober.KindShortOutput
	short.OutputTokens = 100
	short.LastToken = t0.Add(1200 * time.Millisecond)
	short.ChunkTokens = []int32{1}
	// The engine's span: prefill only, so no split.
	short.Engine = prober.EngineTiming{Source: prober.TimingTrace, Prefill: 150 * time.Millisecond, HasPrefill: true}
	// An acceptance rate without counts.
	short.SpecDecode = prober.SpecDecode{Ratio: 0.42, Has: true}

	timeout := prober.Result{
		API: prober.APIChat, Target: "a", Model: "m", Scenario: "rag", Kind: prober.KindError, Reason: prober.ReasonTimeout,
		Err: errors.New("probe timeout"), Start: t0.Add(time.Minute),
	}

	mismatch := success()
	mismatch.Scenario = "rag"
	mismatch.PromptTokens = 3000
	mismatch.PromptLengthOK = false
	mismatch.Kind = prober.KindError
	mismatch.Reason = prober.ReasonStreamCut
	mismatch.ChunkTokens = nil
	mismatch.Start = t0.Add(2 * time.Minute)
	mismatch.UsageMismatch = true
	mismatch.FirstChunkKind = prober.ChunkToolCall

	// A scenario whose prompt the server cuts to its 8192-token context.
	cut := prober.Result{
		API: prober.APIChat, Target: "a", Model: "m", Scenario: "agentic", Kind: prober.KindError, Reason: prober.ReasonPromptTruncated,
		Start: t0.Add(2 * time.Minute), RequestedTokens: 256, PromptTokens: 8192,
		Err: &prober.PromptCutError{Read: 8192, Want: 16384, Needed: 16640},
	}
	return []prober.Result{success(), cacheHit, reasoning, short, timeout, mismatch, warmConversation(), cut}
}

// warmConversation is a warm probe: a cold priming turn on 32K tokens, then
// a follow-up that adds 1K and hits the cache for the first 32K.
func warmConversation() prober.Result {
	prime := success()
	prime.Scenario = "general_chat_followup"
	prime.Turn = 1
	prime.PromptTokens = 32768
	prime.FirstToken = t0.Add(1400 * time.Millisecond)
	prime.LastToken = prime.FirstToken.Add(1500 * time.Millisecond)
	prime.ChunkTokens = nil

	follow := prime
	follow.Turn = 2
	follow.PromptTokens = 33792
	follow.CachedTokens = 32752
	follow.Start = prime.LastToken.Add(10 * time.Millisecond)
	follow.FirstToken = follow.Start.Add(200 * time.Millisecond)
	follow.LastToken = follow.FirstToken.Add(1500 * time.Millisecond)
	follow.PrimeTTFT = prime.TTFT()
	follow.SeenTokens = 32768
	follow.Earlier = []prober.Result{prime}
	return follow
}

func newTestMetrics(t *testing.T) (*prometheus.Registry, *ProbeMetrics) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	return reg, NewProbeMetrics(reg)
}

// golden compares the registry's text exposition with testdata/name, or
// rewrites it with -update.
func golden(t *testing.T, reg *prometheus.Registry, name string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	defer f.Close()
	if err := testutil.GatherAndCompare(reg, f); err != nil {
		t.Errorf("exposition differs from %s (rerun with -update if intended):\n%v", path, err)
	}
}

func TestProbeMetricsGolden(t *testing.T) {
	reg, m := newTestMetrics(t)
	m.SetThresholds(prober.Builtin()[:2])
	m.SetPlannedTokensPerHour("a", 163840)
	m.SetScenarioEnabled("a", "m", "chatbot", "chat", true)
	m.SetScenarioEnabled("a", "m", "tool_calling", "chat", false)
	for _, r := range goldenCases() {
		m.Observe(&r)
	}
	golden(t, reg, "probe.prom")

	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

func TestProbeMetricsNativeHistograms(t *testing.T) {
	reg, m := newTestMetrics(t)
	r := success()
	m.Observe(&r)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, mf := range mfs {
		if !strings.HasSuffix(mf.GetName(), "_seconds") && !strings.HasSuffix(mf.GetName(), "_per_second") && !strings.HasSuffix(mf.GetName(), "_chunk") {
			continue
		}
		for _, met := range mf.GetMetric() {
			h := met.GetHistogram()
			if h == nil {
				continue
			}
			seen++
			if len(h.GetBucket()) == 0 {
				t.Errorf("%s: no classic buckets", mf.GetName())
			}
			// Schema 3 is the coarsest schema whose growth factor is <= 1.1.
			if h.Schema == nil || h.GetSchema() != 3 || len(h.GetPositiveSpan()) == 0 {
				t.Errorf("%s: native histogram missing or wrong schema: schema=%v spans=%v", mf.GetName(), h.Schema, h.GetPositiveSpan())
			}
		}
	}
	if seen != 6 { // ttft, itl, decode, e2e, prefill, tokens per chunk
		t.Errorf("saw %d observed histograms, want 6", seen)
	}
}

func TestObserveSemantics(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(r *prober.Result)
		// expected sample counts
		ttft, itl, chunks, cacheHits, ttfc int
		noE2E                              bool // E2E at the asked length unknown: no sample though TTFT has one
		result                             string
		contextNeeded                      float64 // slaprobe_scenario_context_needed_tokens; 0: absent
	}{
		{name: "cold success", mutate: func(*prober.Result) {}, ttft: 1, itl: 1, chunks: 4, result: "success"},
		{name: "cache hit keeps decode, drops prefill timings", mutate: func(r *prober.Result) { r.CachedTokens = 1 },
			itl: 1, chunks: 4, cacheHits: 1, result: "success"},
		{name: "reasoning adds time to first content", mutate: func(r *prober.Result) {
			r.Reasoning, r.FirstContent = true, r.Start.Add(time.Second)
		}, ttft: 1, itl: 1, chunks: 4, ttfc: 1, result: "success"},
		{name: "short output of enough tokens records every timing", mutate: func(r *prober.Result) {
			r.Kind, r.OutputTokens, r.FinishReason = prober.KindShortOutput, 100, "stop"
			r.LastToken = r.FirstToken.Add(99 * 10 * time.Millisecond)
		}, ttft: 1, itl: 1, chunks: 4, result: "short_output"},
		{name: "short output under MinDecodeTokens records TTFT and prefill, no ITL", mutate: func(r *prober.Result) {
			r.Kind, r.OutputTokens, r.FinishReason = prober.KindShortOutput, prober.MinDecodeTokens-1, "stop"
			r.LastToken = r.FirstToken.Add(time.Duration(prober.MinDecodeTokens-2) * 10 * time.Millisecond)
		}, ttft: 1, noE2E: true, chunks: 4, result: "short_output"},
		{name: "empty answer records no timing", mutate: func(r *prober.Result) {
			r.Kind, r.OutputTokens, r.FinishReason = prober.KindShortOutput, 1, "stop"
			r.FirstToken, r.LastToken, r.ChunkTokens, r.FirstChunkKind = time.Time{}, time.Time{}, nil, ""
		}, result: "short_output"},
		{name: "cut prompt records no timing and the context it needs", mutate: func(r *prober.Result) {
			r.Kind, r.Reason, r.ChunkTokens, r.PromptTokens, r.PromptLengthOK = prober.KindError, prober.ReasonPromptTruncated, nil, 8192, false
			r.Err = &prober.PromptCutError{Read: 8192, Want: 12000, Needed: 12256, Calibrated: true}
		}, result: "error", contextNeeded: 12256},
		{name: "error records no latency", mutate: func(r *prober.Result) {
			r.Kind, r.Reason, r.ChunkTokens = prober.KindError, prober.ReasonStall, nil
		}, result: "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, m := newTestMetrics(t)
			r := success()
			tc.mutate(&r)
			m.Observe(&r)
			count := func(v *snapHist) int {
				return int(histCount(t, v.WithLabelValues("a", "m", r.Scenario, "chat")))
			}
			if got := count(m.ttft); got != tc.ttft {
				t.Errorf("ttft samples = %d, want %d", got, tc.ttft)
			}
			wantE2E := tc.ttft
			if tc.noE2E {
				wantE2E = 0
			}
			if got := count(m.e2e); got != wantE2E {
				t.Errorf("e2e samples = %d, want %d", got, wantE2E)
			}
			if tc.contextNeeded > 0 {
				if got := testutil.ToFloat64(m.contextNeeded); got != tc.contextNeeded {
					t.Errorf("scenario_context_needed_tokens = %v, want %v", got, tc.contextNeeded)
				}
			} else if n := testutil.CollectAndCount(m.contextNeeded); n != 0 {
				t.Errorf("scenario_context_needed_tokens has %d series, want none", n)
			}
			if got := count(m.prefill); got != tc.ttft {
				t.Errorf("prefill samples = %d, want %d", got, tc.ttft)
			}
			if got := count(m.itl); got != tc.itl {
				t.Errorf("itl samples = %d, want %d", got, tc.itl)
			}
			if got := count(m.decode); got != tc.itl {
				t.Errorf("decode samples = %d, want %d", got, tc.itl)
			}
			if got := count(m.chunk); got != tc.chunks {
				t.Errorf("tokens_per_chunk samples = %d, want %d", got, tc.chunks)
			}
			if got := count(m.ttfc); got != tc.ttfc {
				t.Errorf("ttfc samples = %d, want %d", got, tc.ttfc)
			}
			if got := int(testutil.ToFloat64(m.cacheHits.WithLabelValues("a", "m", r.Scenario, "chat"))); got != tc.cacheHits {
				t.Errorf("cache hits = %d, want %d", got, tc.cacheHits)
			}
			if got := testutil.ToFloat64(m.probes.WithLabelValues("a", "m", r.Scenario, "chat", tc.result)); got != 1 {
				t.Errorf("probes_total{result=%q} = %g, want 1", tc.result, got)
			}
			wantSuccess := 1.0 // an answer, short or not
			if tc.result == "error" {
				wantSuccess = 0
			}
			if got := testutil.ToFloat64(m.success.WithLabelValues("a", "m", r.Scenario, "chat")); got != wantSuccess {
				t.Errorf("probe_success = %g, want %g", got, wantSuccess)
			}
		})
	}
}

func histCount(t *testing.T, o prometheus.Observer) uint64 {
	t.Helper()
	m, ok := o.(prometheus.Metric)
	if !ok {
		t.Fatalf("%T is not a metric", o)
	}
	var pb dto.Metric
	if err := m.Write(&pb); err != nil {
		t.Fatal(err)
	}
	return pb.GetHistogram().GetSampleCount()
}

func TestForget(t *testing.T) {
	reg, m := newTestMetrics(t)
	for _, target := range []string{"a", "b"} {
		r := success()
		r.Target = target
		m.Observe(&r)
		m.SetScenarioEnabled(target, "m", "chatbot", "chat", true)
		m.SetPlannedTokensPerHour(target, 1)
	}
	unknown := prober.Result{API: prober.APIChat, Target: "b", Scenario: "chatbot", Kind: prober.KindError, Reason: prober.ReasonConnectionRefused, Start: t0}
	m.Observe(&unknown)

	m.ForgetModel("b", "")
	if n := countSeries(t, reg, `model=""`); n != 0 {
		t.Errorf("%d series with model=\"\" after ForgetModel", n)
	}
	if n := countSeries(t, reg, `target="b"`); n == 0 {
		t.Error("ForgetModel removed the target's other series")
	}
	m.ForgetTarget("a")
	if n := countSeries(t, reg, `target="a"`); n != 0 {
		t.Errorf("%d series of target a left after ForgetTarget", n)
	}
	if n := countSeries(t, reg, `target="b"`); n == 0 {
		t.Error("ForgetTarget(a) removed target b")
	}
}

// countSeries counts exposition lines containing substr.
func countSeries(t *testing.T, reg *prometheus.Registry, substr string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, line := range strings.Split(buf.String(), "\n") {
		if !strings.HasPrefix(line, "#") && strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

// TestMetricsContract checks the exported names against the metrics
// contract, the "### Probes" table of docs/metrics.md, both ways.
func TestMetricsContract(t *testing.T) {
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatalf("metrics.md: %v", err)
	}
	section := string(doc)
	i := strings.Index(section, "\n### Probes\n")
	if i < 0 {
		t.Fatal(`docs/metrics.md: no "### Probes" section`)
	}
	section = section[i+1:]
	if j := strings.Index(section[1:], "\n#"); j >= 0 {
		section = section[:j+1]
	}
	contract := map[string]bool{}
	for _, name := range regexp.MustCompile("`(slaprobe_[a-z0-9_]+)").FindAllStringSubmatch(section, -1) {
		switch n := name[1]; {
		case n == "slaprobe_build_info", strings.HasPrefix(n, "slaprobe_config_"):
			// the daemon's, not the probe metrics'
		default:
			contract[n] = true
		}
	}

	reg, m := newTestMetrics(t)
	m.SetScenarioEnabled("a", "m", "chatbot", "chat", true)
	m.SetThresholds(prober.Builtin())
	m.SetPlannedTokensPerHour("a", 1)
	for _, r := range goldenCases() {
		m.Observe(&r)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, mf := range mfs {
		exported[mf.GetName()] = true
	}
	for n := range contract {
		if !exported[n] {
			t.Errorf("%s is in the contract (the \"### Probes\" table of docs/metrics.md) but not exported", n)
		}
	}
	for n := range exported {
		if !contract[n] {
			t.Errorf("%s is exported but not in the contract: add a row for it to the \"### Probes\" table of docs/metrics.md", n)
		}
	}
}

// TestEngineTimingFollowsTTFT: the engine's timing is recorded for exactly
// the probes whose TTFT is (one predicate, TTFTRecorded, decides both), so
// the split adds up to the TTFT histogram: a cold answer, a cache hit, an
// empty answer, an error, both turns of a warm conversation, and a priming
// turn the server ended short.
func TestEngineTimingFollowsTTFT(t *testing.T) {
	withEngine := func(r *prober.Result) {
		r.Engine = prober.EngineTiming{Source: prober.TimingResponse, Queue: time.Millisecond, HasQueue: true,
			Prefill: 50 * time.Millisecond, HasPrefill: true}
	}
	for _, tc := range []struct {
		name   string
		result func() prober.Result
		ttft   uint64 // TTFT samples, as TestObserveSemantics has them
	}{
		{"cold success", success, 1},
		{"cache hit", func() prober.Result { r := success(); r.CachedTokens = 1; return r }, 0},
		{"empty answer", func() prober.Result {
			r := success()
			r.Kind, r.OutputTokens, r.FirstToken, r.LastToken = prober.KindShortOutput, 1, time.Time{}, time.Time{}
			return r
		}, 0},
		{"error", func() prober.Result {
			r := success()
			r.Kind, r.Reason = prober.KindError, prober.ReasonStall
			return r
		}, 0},
		{"warm conversation", warmConversation, 1}, // the follow-up; the priming turn is kept apart
		{"short priming turn", func() prober.Result {
			r := warmConversation().Earlier[0]
			r.Kind, r.OutputTokens, r.FinishReason = prober.KindShortOutput, 100, "stop"
			return r
		}, 1}, // counted as a short_output probe of its scenario, with its timings
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, m := newTestMetrics(t)
			r := tc.result()
			withEngine(&r)
			for i := range r.Earlier {
				withEngine(&r.Earlier[i])
			}
			m.Observe(&r)
			lv := []string{"a", "m", r.Scenario, "chat"}
			ttft := histCount(t, m.ttft.WithLabelValues(lv...))
			if ttft != tc.ttft {
				t.Errorf("TTFT samples = %d, want %d", ttft, tc.ttft)
			}
			for name, h := range map[string]*snapHist{"queue": m.engine.queue, "prefill": m.engine.prefill, "outside": m.engine.outside} {
				if got := histCount(t, h.WithLabelValues(lv...)); got != ttft {
					t.Errorf("engine %s samples = %d, TTFT samples = %d: want the same probes", name, got, ttft)
				}
			}
			var timed float64
			for _, s := range prober.TimingSources {
				timed += testutil.ToFloat64(m.engine.timing.WithLabelValues(append(lv, string(s))...))
			}
			if timed != float64(ttft) {
				t.Errorf("probe_engine_timing_total = %g, TTFT samples = %d: want the same probes", timed, ttft)
			}
		})
	}
}

// TestConversationMetrics: each successful follow-up counts once in its
// cache class; only a conversation whose every turn succeeded is timed, as
// the sum of its turns' E2E.
func TestConversationMetrics(t *testing.T) {
	lv := []string{"a", "m", "general_chat_followup", "chat"}
	for _, tc := range []struct {
		name     string
		mutate   func(*prober.Result)
		class    string
		ratios   uint64
		timed    uint64
		waitTime float64
	}{
		{"hit", func(*prober.Result) {}, "hit", 1, 1, 4.6},
		{"partial", func(r *prober.Result) { r.CachedTokens = 16384 }, "partial", 1, 1, 4.6},
		{"miss", func(r *prober.Result) { r.CachedTokens = 0 }, "miss", 1, 1, 4.6},
		{"unknown", func(r *prober.Result) { r.CachedTokens, r.CachedReported = 0, false }, "unknown", 0, 1, 4.6},
		{"failed follow-up", func(r *prober.Result) { r.Kind, r.Reason = prober.KindError, prober.ReasonTimeout }, "", 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, m := newTestMetrics(t)
			r := warmConversation()
			tc.mutate(&r)
			m.Observe(&r)
			for _, c := range prober.ConversationCaches {
				want := 0.0
				if string(c) == tc.class {
					want = 1
				}
				if got := testutil.ToFloat64(m.conv.turns.WithLabelValues(append(lv, string(c))...)); got != want {
					t.Errorf("turns{cache=%q} = %v, want %v", c, got, want)
				}
			}
			if got := histCount(t, m.conv.cachedRatio.WithLabelValues(lv...)); got != tc.ratios {
				t.Errorf("cached_ratio count %d, want %d", got, tc.ratios)
			}
			if got := histCount(t, m.conv.conversationSeconds.WithLabelValues(lv...)); got != tc.timed {
				t.Errorf("conversation_seconds count %d, want %d", got, tc.timed)
			}
			if got := histSum(t, m.conv.conversationSeconds.WithLabelValues(lv...)); math.Abs(got-tc.waitTime) > 1e-9 {
				t.Errorf("conversation_seconds sum %v, want %v (prime 2.9 s + follow-up 1.7 s)", got, tc.waitTime)
			}
		})
	}
}

func histSum(t *testing.T, o prometheus.Observer) float64 {
	t.Helper()
	var pb dto.Metric
	if err := o.(prometheus.Metric).Write(&pb); err != nil {
		t.Fatal(err)
	}
	return pb.GetHistogram().GetSampleSum()
}

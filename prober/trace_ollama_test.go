package prober_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/workload"
	"github.com/slaprobe/slaprobe/prober"
	"github.com/slaprobe/slaprobe/test/ollama"
)

// TestTraceOnOllama: a Mooncake trace excerpt probed for real, through the
// daemon's own path for a scenario that names a trace (workload.Load, the
// scenario's Shape, Prober.Probe), on Ollama engines of one slot, which
// keep the KV cache of their last request and log how much of each prompt
// they took from there (test/ollama CacheLoads). It lives here, not in
// internal/workload, to time the probes with the same independent client
// and the same bound as TestOllamaAccuracy.
//
// The excerpt (generated, seeded) mixes prompts of 600 to 3,500 tokens
// (length classes 1k and 4k); about half start with one shared document
// of three 512-token blocks. It is probed twice in trace order, each
// length calibrated beforehand (the daemon calibrates once per length, so
// calibration requests do not come between two probes in the long run):
// with sharing on (the instance's salt) on one engine, with sharing off (a
// salt per probe) on another, request by request in turn.
//
//   - (a) Every probe's prompt is the trace's length to the token, by the
//     engine's own counts (usage.prompt_tokens and its log). The tiny
//     model's 1,024-token vocabulary splits many corpus words into several
//     tokens, so two word counts one apart often straddle a length; the
//     calibration then fills the gap with fill units it counts (without
//     them 9 of 24 prompts were exact, the others 1 to 4 tokens off).
//   - (b) A follow-up, a probe whose leading blocks are those of the probe
//     before it, is served from the cache with sharing on: the engine took
//     at least the shared blocks from it, and its TTFT is lower than the
//     same request's with sharing off by at least traceHitSaved of its
//     shared share (the median over the follow-ups of (1 − on/off) over
//     the share). With sharing off the advantage is gone: the engine took
//     under traceMissTokens from its cache for every probe, as it did with
//     sharing on for the probes sharing no block with the one before, whose
//     TTFT is the same in both passes (median ratio within traceSameRatio).
//   - (c) Per length class, slaprobe's TTFT agrees with the independent
//     client's on the same requests within ollamaTTFTRel (ollamaAgree, as
//     in TestOllamaAccuracy).
func TestTraceOnOllama(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time probes against a real engine")
	}
	ollama.SkipIfMissing(t)
	const (
		n = 24
		// A follow-up prefills its tail only: what it saves of its TTFT
		// (1 − on/off) over the share of its prompt the shared blocks
		// make. Not 1: the tail still attends to the cached blocks, and a
		// probe has a fixed cost (measured: medians 0.73 to 0.87).
		traceHitSaved = 0.5
		// What the engine takes from its cache of a prompt sharing no
		// block with the one before: the chat template's first tokens and
		// the block header's "[block " (measured: a few).
		traceMissTokens = 64
	)
	// traceSameRatio bounds the median ratio of the other probes' TTFT in
	// the two passes (the same requests, cold both times).
	traceSameRatio := [2]float64{0.75, 1.33}

	// Two engines, the same model: sharing on probes one, sharing off the
	// other, request by request in turn, so that each pair of a request
	// meets the same load on the shared CPU, and each engine's slot holds
	// the probe before of its own pass. Requests go to the engine the test
	// names (route), behind the independent client.
	opts := ollama.Options{Layers: 2, Embedding: 256, Parallel: 1, Debug: true}
	engines := map[bool]*ollama.Server{true: ollama.Start(t, opts), false: ollama.Start(t, opts)}
	var route atomic.Bool // sharing: the engine it probes
	proxies := map[bool]*httputil.ReverseProxy{}
	for sharing, srv := range engines {
		u, err := url.Parse(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		proxies[sharing] = &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u) }, FlushInterval: -1}
	}
	router := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxies[route.Load()].ServeHTTP(w, r)
	}))
	t.Cleanup(router.Close)
	route.Store(true)
	tStarted := time.Now()
	tr := &http.Transport{Proxy: nil}
	t.Cleanup(tr.CloseIdleConnections)
	ic := &indepClient{upstream: router.URL, client: &http.Client{Transport: tr}}
	proxy := httptest.NewServer(ic)
	t.Cleanup(proxy.Close)
	target := prober.Target{Name: "ollama", API: prober.APIChat, BaseURL: proxy.URL, Client: proxy.Client()}

	path := filepath.Join(t.TempDir(), "excerpt.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	err = workload.Generate(f, workload.FormatMooncake, workload.GenOptions{Requests: n, Seed: 7, Rate: 2,
		InputMin: 600, InputMax: 3500, OutputMin: 2, OutputMax: 4, Prefixes: 1, PrefixBlocks: 3, SharedProb: 0.5})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	on, off := true, false
	cfg := func(sharing *bool) workload.Config {
		return workload.Config{Spec: workload.Spec{Path: path, Format: workload.FormatMooncake}, Seed: 1,
			Order: workload.OrderSequential, MaxContext: 8192, Sharing: sharing}
	}
	shapes := map[bool]*workload.Shape{}
	for _, sharing := range []bool{true, false} {
		sh, err := workload.Load("trace", cfg(map[bool]*bool{true: &on, false: &off}[sharing]))
		if err != nil {
			t.Fatal(err)
		}
		shapes[sharing] = sh
	}
	sum := shapes[true].Summary()
	// The draws, as each Shape hands them out: the same options, the same order.
	smp, err := workload.LoadSampler(cfg(&on).Spec, workload.SamplerOptions{Seed: 1, Order: workload.OrderSequential,
		MaxContext: 8192, MinInput: workload.DefaultMinInput})
	if err != nil {
		t.Fatal(err)
	}
	draws := make([]workload.Draw, n)
	for i := range draws {
		if draws[i], err = smp.Next(); err != nil {
			t.Fatal(err)
		}
	}

	cals := &calLog{tails: map[int64][4]int64{}}
	p := prober.New(slog.New(cals), prober.SystemClock{})
	s := prober.Scenario{Name: "trace", Family: prober.FamilyCustom, Interval: time.Minute, Timeout: 60 * time.Second}
	// Calibrate every length first (on the sharing engine; the two have
	// the same tokenizer): the tails on p, which the Shapes' probes use;
	// the blocks' calibration is on a PrefixPrompts of its own, so the
	// first probe repeats it (the first probe is never a follow-up). What
	// slaprobe plans each prompt to count is what Prepare says.
	pp := prober.NewPrefixPrompts(p)
	classes := map[string]int{}
	planned := make([]int, n)
	for i, d := range draws {
		prep, err := pp.Prepare(context.Background(), target, "", s, workload.ProbeOf(d, workload.NewSalt(), 0))
		if err != nil {
			t.Fatalf("line %d (%d tokens): %v", d.Line, d.Input, err)
		}
		planned[i] = prep.PromptTokens
		classes[d.Class.Name]++
	}
	t.Logf("calibrated %d lengths in %v", n, time.Since(tStarted).Round(time.Millisecond))
	if cals.block <= 0 {
		t.Fatalf("no block calibration logged")
	}
	// sent is the blocks of d a probe sends (as many as fit before the
	// tail's fixed part and 8 tokens of words, as Prepare does); follows,
	// how many leading blocks the probe before it sent too.
	sent := func(d workload.Draw) []uint64 {
		return d.HashIDs[:min(len(d.HashIDs), max(0, (d.Input-int(cals.overhead)-8)/int(cals.block)))]
	}
	// (a) Planned to the trace's length, to the token: blocks as the
	// block calibration counted them, the tail filled to the rest.
	filled := 0
	for i, d := range draws {
		if planned[i] != d.Input {
			t.Errorf("line %d: %d tokens planned for the trace's %d", d.Line, planned[i], d.Input)
		}
	}
	cals.mu.Lock()
	for _, c := range cals.tails {
		if c[3] > 0 {
			filled++
		}
	}
	cals.mu.Unlock()
	t.Logf("blocks of %d tokens counted %d; %d of %d tail calibrations filled the words' gap", workload.DefaultBlockTokens, cals.block, filled, len(cals.tails))
	if len(classes) < 2 {
		t.Fatalf("the excerpt's prompts fall in the classes %v; want two or more", classes)
	}

	follows := func(i int) int {
		if i == 0 {
			return 0
		}
		a, b := sent(draws[i]), sent(draws[i-1])
		k := 0
		for k < len(a) && k < len(b) && a[k] == b[k] {
			k++
		}
		return k
	}

	type probe struct {
		res    prober.Result
		client time.Duration
		used   int // the engine's own count of the prompt tokens it took from its cache
	}
	send := func(sharing bool, i int) probe {
		d := draws[i]
		s := s
		s.Shape = shapes[sharing]
		route.Store(sharing)
		k := ic.settled(t)
		res := p.Probe(context.Background(), target, "", s)
		if res.Kind != prober.KindSuccess {
			t.Fatalf("sharing %v, line %d: %s/%s: %v\n%s", sharing, d.Line, res.Kind, res.Reason, res.Err, engines[sharing].Logs())
		}
		load := lastLoads(t, engines[sharing], 1)[0]
		// (a) The prompt is the one slaprobe planned, to the token, by the
		// engine's two counts, and the trace's length as closely as whole
		// words allow: within prober.PromptTolerance.
		if res.PromptTokens != planned[i] || load.Prompt != planned[i] || !prober.PromptLengthWithin(res.PromptTokens, d.Input) || res.LengthClass != d.Class.Name {
			t.Errorf("sharing %v, line %d: usage.prompt_tokens %d, the engine's log %d, class %q; slaprobe planned %d, the trace says %d (±%d), class %q",
				sharing, d.Line, res.PromptTokens, load.Prompt, res.LengthClass, planned[i], d.Input, prober.PromptTolerance(d.Input), d.Class.Name)
		}
		return probe{res: res, client: ic.timing(t, k).ttft, used: load.Used}
	}
	tProbes := time.Now()
	shared, fresh := make([]probe, n), make([]probe, n)
	for i := range draws {
		shared[i], fresh[i] = send(true, i), send(false, i)
	}

	t.Logf("probed in %v", time.Since(tProbes).Round(time.Millisecond))
	var hitRatio, hitSaved, sameRatio []float64
	exact, worst := 0, 0
	byClass := map[string][2][]time.Duration{}
	for i, d := range draws {
		a, b := shared[i], fresh[i]
		k := follows(i)
		ratio := float64(a.res.TTFT()) / float64(b.res.TTFT())
		if planned[i] == d.Input {
			exact++
		}
		worst = max(worst, absI(planned[i]-d.Input))
		t.Logf("line %2d: %4d tokens (%s, %4d sent), %d blocks, %d shared with the probe before | sharing on: TTFT %v (client %v), %4d from the cache | off: TTFT %v (client %v), %4d from the cache | ratio %.2f",
			d.Line, d.Input, d.Class.Name, a.res.PromptTokens, len(sent(d)), k, a.res.TTFT().Round(100*time.Microsecond), a.client.Round(100*time.Microsecond), a.used,
			b.res.TTFT().Round(100*time.Microsecond), b.client.Round(100*time.Microsecond), b.used, ratio)
		// (b) Shared prefixes seen in the engine's cache, by its own count.
		if k > 0 {
			hitRatio = append(hitRatio, ratio)
			hitSaved = append(hitSaved, (1-ratio)*float64(d.Input)/float64(k*workload.DefaultBlockTokens))
			if want := k*workload.DefaultBlockTokens - traceMissTokens; a.used < want {
				t.Errorf("line %d: sharing %d blocks with the probe before, the engine took %d tokens from its cache; want %d or more", d.Line, k, a.used, want)
			}
		} else {
			sameRatio = append(sameRatio, ratio)
			if a.used >= traceMissTokens {
				t.Errorf("line %d: sharing no block with the probe before, the engine took %d tokens from its cache; want under %d", d.Line, a.used, traceMissTokens)
			}
		}
		if b.used >= traceMissTokens {
			t.Errorf("line %d, a salt per probe: the engine took %d tokens from its cache; want under %d", d.Line, b.used, traceMissTokens)
		}
		for _, pr := range []probe{a, b} {
			c := byClass[d.Class.Name]
			c[0], c[1] = append(c[0], pr.res.TTFT()), append(c[1], pr.client)
			byClass[d.Class.Name] = c
		}
	}
	t.Logf("trace excerpt: %d requests, shared-prefix share %.1f %%, classes %v; %d follow-ups in trace order; prompts exact to the token %d of %d, the others within %d tokens",
		sum.Requests, 100*sum.SharedShare, classes, len(hitRatio), exact, n, worst)
	if len(hitRatio) < 4 || len(sameRatio) < 4 {
		t.Fatalf("%d follow-ups and %d other probes; the test needs 4 or more of each", len(hitRatio), len(sameRatio))
	}
	// (b) Faster follow-ups with sharing on, and only them.
	if m := medianF(hitSaved); m < traceHitSaved {
		t.Errorf("follow-ups' TTFT saved with sharing on (1 − on/off, each %s) over their shared share: median %.2f (each %s); want %.2f or more",
			fmtF(hitRatio), m, fmtF(hitSaved), traceHitSaved)
	}
	if m := medianF(sameRatio); m < traceSameRatio[0] || m > traceSameRatio[1] {
		t.Errorf("other probes' TTFT with sharing on over off: median %.2f (each %s); want %.2f to %.2f", m, fmtF(sameRatio), traceSameRatio[0], traceSameRatio[1])
	}
	t.Logf("TTFT with sharing on over off, the same requests: follow-ups median %.2f (each %s), saved over the shared share median %.2f (each %s; want %.2f or more); the others median %.2f (each %s; want %.2f to %.2f)",
		medianF(hitRatio), fmtF(hitRatio), medianF(hitSaved), fmtF(hitSaved), traceHitSaved, medianF(sameRatio), fmtF(sameRatio), traceSameRatio[0], traceSameRatio[1])
	// (c) Per length class, against the independent client.
	for _, c := range workload.Classes {
		if ts, ok := byClass[c.Name]; ok {
			ollamaAgree(t, fmt.Sprintf("class %s (%d probes, median TTFT %v)", c.Name, len(ts[0]), medianD(ts[0]).Round(time.Millisecond)), ts[0], ts[1], ollamaTTFTRel)
		}
	}
}

// calLog keeps what the prober logged of its calibrations: each tail's
// asked tokens → counted, words, rounds; the block's counted tokens and
// the tail's fixed part.
type calLog struct {
	mu              sync.Mutex
	tails           map[int64][4]int64 // input tokens: counted, words, rounds, fill bytes
	block, overhead int64
}

func (c *calLog) Enabled(context.Context, slog.Level) bool { return true }
func (c *calLog) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *calLog) WithGroup(string) slog.Handler            { return c }
func (c *calLog) Handle(_ context.Context, r slog.Record) error {
	a := map[string]int64{}
	r.Attrs(func(at slog.Attr) bool {
		switch at.Value.Kind() {
		case slog.KindInt64:
			a[at.Key] = at.Value.Int64()
		case slog.KindString: // the fill: its length
			a[at.Key] = int64(len(at.Value.String()))
		}
		return true
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	switch r.Message {
	case "calibrated prompt":
		c.tails[a["input_tokens"]] = [4]int64{a["counted"], a["words"], a["rounds"], a["fill"]}
	case "calibrated prompt block":
		c.block, c.overhead = a["counted"], a["tail_overhead"]
	}
	return nil
}

func absI(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func fmtF(v []float64) string {
	s := make([]string, len(v))
	for i, x := range slices.Clone(v) {
		s[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(s, " ")
}

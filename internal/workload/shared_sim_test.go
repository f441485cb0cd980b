package workload

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/prober"
)

// simTarget starts a simulated engine with prefix caching on and cached_tokens reported.
func simTarget(t *testing.T, mutate func(*vllmsim.Config)) (prober.Target, *vllmsim.Engine) {
	t.Helper()
	cfg := vllmsim.DefaultConfig()
	cfg.MaxModelLen = 16384
	cfg.KVCacheTokens = 1 << 21
	cfg.PrefillOverhead = 2 * time.Millisecond
	cfg.PrefillTokensPerSecond = 1e6
	cfg.PrefillQuadratic = 0
	cfg.DecodeBase = 2 * time.Millisecond
	cfg.DecodePerSeq = 50 * time.Microsecond
	cfg.DecodePerKVToken = 0
	cfg.EOSMeanTokens = 0
	cfg.EnablePrefixCaching = true
	cfg.EnablePromptTokensDetails = true
	if mutate != nil {
		mutate(&cfg)
	}
	e, err := vllmsim.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e.Handler())
	t.Cleanup(srv.Close)
	t.Cleanup(e.Close)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	t.Cleanup(tr.CloseIdleConnections)
	return prober.Target{Name: "sim", API: prober.APIChat, BaseURL: srv.URL, Model: cfg.ModelName, Client: &http.Client{Transport: tr}}, e
}

// excerpt is a generated Mooncake trace excerpt whose requests share document prefixes.
func excerpt(t *testing.T, n int) []Request {
	t.Helper()
	var b bytes.Buffer
	if err := Generate(&b, FormatMooncake, GenOptions{Requests: n, Seed: 11, Rate: 10, InputMin: 700, InputMax: 9000,
		OutputMin: 2, OutputMax: 6, Prefixes: 3, PrefixBlocks: 6, SharedProb: 0.7}); err != nil {
		t.Fatal(err)
	}
	return readRequests(t, &b, "excerpt.jsonl")
}

// readRequests reads a Mooncake trace into requests that own their hash ids.
func readRequests(t *testing.T, rd io.Reader, name string) []Request {
	t.Helper()
	r, err := NewReader(rd, name, Spec{Format: FormatMooncake})
	if err != nil {
		t.Fatal(err)
	}
	var out []Request
	for {
		var req Request
		if err := r.Next(&req); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		req.HashIDs = append([]uint64(nil), req.HashIDs...)
		out = append(out, req)
	}
}

// traceShare is the shared-prefix share of reqs in their order: what Summarize says of the trace.
func traceShare(reqs []Request) float64 {
	seen := newIDSet()
	var shared, total int
	for _, r := range reqs {
		shared += SharedPrefix(r.HashIDs, r.Input, DefaultBlockTokens, seen.has)
		total += r.Input
		for _, id := range r.HashIDs {
			seen.add(id)
		}
	}
	return float64(shared) / float64(total)
}

// mooncakeExcerpt is the committed excerpt of Mooncake's conversation trace (testdata/README.md):
// real hash ids; 227328 of its 3534037 prompt tokens are in blocks an earlier request had
// (computed from the raw rows by a separate script).
func mooncakeExcerpt(t *testing.T) []Request {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "mooncake_conversation_head250.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return readRequests(t, f, "mooncake_conversation_head250.jsonl")
}

// TestTraceProbesSharePrefixes: probes replaying a trace excerpt in order (prefix caching on in
// the simulated engine) are served from the cache at the trace's own shared-prefix share, within
// 2 points, with every prompt token-exact; with a fresh salt per probe the share is near zero,
// while the same probe sent twice under one salt is served from the cache the second time. Two
// excerpts: a generated one sharing much (its share known by construction), and the first 250
// requests of Mooncake's real conversation trace.
func TestTraceProbesSharePrefixes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		reqs       func(*testing.T) []Request
		want       float64 // the excerpt's shared share; 0: only at least minShare
		minShare   float64
		maxContext int
		sim        func(*vllmsim.Config)
	}{
		{name: "generated", reqs: func(t *testing.T) []Request { return excerpt(t, 80) }, minShare: 0.2, maxContext: 16384},
		{name: "mooncake", reqs: mooncakeExcerpt, want: 227328.0 / 3534037, minShare: 0.05, maxContext: 131072,
			sim: func(c *vllmsim.Config) {
				// Prompts up to 120633 tokens, 6585 distinct 512-token blocks: every block stays
				// cached. Decode steps of 10 µs: the answers are the trace's (364 tokens on average).
				c.MaxModelLen = 131072
				c.KVCacheTokens = 1 << 23
				c.MaxNumBatchedTokens = 131072
				c.DecodeBase = 10 * time.Microsecond
				c.DecodePerSeq = 0
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reqs := tc.reqs(t)
			testProbesShare(t, reqs, tc.want, tc.minShare, tc.maxContext, tc.sim)
		})
	}
}

func testProbesShare(t *testing.T, reqs []Request, known, minShare float64, maxContext int, sim func(*vllmsim.Config)) {
	want := traceShare(reqs)
	if known != 0 && want != known {
		t.Fatalf("the excerpt's shared share is %.6f; computed from its rows: %.6f", want, known)
	}
	if want < minShare {
		t.Fatalf("the excerpt's shared share is %.3f; the test needs at least %.3f", want, minShare)
	}
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	s := prober.Scenario{Name: "trace", Family: prober.FamilyCustom, Timeout: 30 * time.Second}

	t.Run("shared", func(t *testing.T) {
		target, _ := simTarget(t, sim)
		p := prober.New(logger, prober.SystemClock{})
		w := &Probe{Sampler: NewSampler(reqs, SamplerOptions{Order: OrderSequential, MaxContext: maxContext, MinInput: 64}),
			Prompts: prober.NewPrefixPrompts(p), Salt: NewSalt()}
		var cached, prompt, exact int
		for range reqs {
			res, d := w.Run(ctx, p, target, "", s)
			if res.Kind != prober.KindSuccess || !res.CachedReported {
				t.Fatalf("probe of line %d: %s %s %v (cached reported %v)", d.Line, res.Kind, res.Reason, res.Err, res.CachedReported)
			}
			// Token-exact as every probe is: the calibrated prompt is the closest a whole corpus
			// word allows, within prober.PromptTolerance.
			if !res.PromptLengthOK || !prober.PromptLengthWithin(res.PromptTokens, d.Input) {
				t.Fatalf("line %d: the engine counted %d prompt tokens; the trace says %d", d.Line, res.PromptTokens, d.Input)
			}
			if res.PromptTokens == d.Input {
				exact++
			}
			cached += res.CachedTokens
			prompt += res.PromptTokens
		}
		got := float64(cached) / float64(prompt)
		t.Logf("trace shared-prefix share %.2f %%, engine's cached share %.2f %% (%d of %d prompt tokens); %d of %d prompts exact to the token",
			100*want, 100*got, cached, prompt, exact, len(reqs))
		if d := got - want; d > 0.02 || d < -0.02 {
			t.Errorf("the engine's cached share %.2f %% is more than 2 points from the trace's %.2f %%", 100*got, 100*want)
		}
	})

	t.Run("salt per probe", func(t *testing.T) {
		target, _ := simTarget(t, sim)
		p := prober.New(logger, prober.SystemClock{})
		pp := prober.NewPrefixPrompts(p)
		smp := NewSampler(reqs, SamplerOptions{Order: OrderSequential, MaxContext: maxContext, MinInput: 64})
		var cached, again, prompt, blocks int
		for range reqs {
			d, err := smp.Next()
			if err != nil {
				t.Fatal(err)
			}
			sp := ProbeOf(d, NewSalt(), 0) // sharing off: a fresh salt, so fresh blocks
			first := pp.Probe(ctx, target, "", s, sp)
			// The control: the same probe again under its salt. Its blocks are in the cache now,
			// provided the same key always gives the same text.
			second := pp.Probe(ctx, target, "", s, sp)
			if first.Kind != prober.KindSuccess || second.Kind != prober.KindSuccess {
				t.Fatalf("line %d: %s %v / %s %v", d.Line, first.Kind, first.Err, second.Kind, second.Err)
			}
			cached += first.CachedTokens
			again += second.CachedTokens
			prompt += first.PromptTokens
			blocks += (min(len(d.HashIDs), (d.Input-64)/DefaultBlockTokens)) * DefaultBlockTokens
		}
		share, control := float64(cached)/float64(prompt), float64(again)/float64(prompt)
		t.Logf("salt per probe: cached share %.2f %%; the same probes sent again: %.2f %% (their blocks: %.2f %% of the prompt tokens)",
			100*share, 100*control, 100*float64(blocks)/float64(prompt))
		if share > 0.01 {
			t.Errorf("with a fresh salt per probe the engine still served %.2f %% from its cache; want under 1 %%", 100*share)
		}
		if control < 0.9*float64(blocks)/float64(prompt) {
			t.Errorf("a probe sent again under its own salt was served %.2f %% from the cache; its blocks are %.2f %% of its prompt: block text is not deterministic",
				100*control, 100*float64(blocks)/float64(prompt))
		}
	})
}

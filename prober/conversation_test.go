package prober

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/test/gateway"
	"github.com/slaprobe/slaprobe/test/testproc"
)

func TestConversationCacheClass(t *testing.T) {
	for _, tc := range []struct {
		turn, seen, cached int
		reported           bool
		want               ConversationCache
		share              float64
	}{
		{2, 1000, 1000, true, CacheHitTurn, 1},
		{2, 1000, 1200, true, CacheHitTurn, 1}, // capped: a server may count more than it had seen
		{2, 1000, 900, true, CacheHitTurn, 0.9},
		{2, 1000, 899, true, CachePartialTurn, 0.899},
		{3, 1000, 100, true, CachePartialTurn, 0.1},
		{3, 1000, 99, true, CacheMissTurn, 0.099},
		{2, 1000, 0, true, CacheMissTurn, 0},
		{2, 1000, 0, false, CacheUnknownTurn, -1}, // the server reports no cached tokens
		{2, 0, 500, true, CacheUnknownTurn, -1},   // what the engine had seen unknown
		{1, 1000, 1000, true, CacheUnknownTurn, -1},
	} {
		r := Result{Turn: tc.turn, SeenTokens: tc.seen, CachedTokens: tc.cached, CachedReported: tc.reported}
		if got := r.ConversationCache(); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc, got, tc.want)
		}
		share, ok := r.SeenCachedShare()
		if ok != (tc.share >= 0) || (ok && share != tc.share) {
			t.Errorf("%+v: share %v (ok %v), want %v", tc, share, ok, tc.share)
		}
	}
}

// TestInferSeenCachedShare: where the server reports no cached tokens, the
// share comes from the turn's TTFT at the priming turn's cold pace, less one
// ITL; a reported count always wins; a share the timing cannot give (no
// priming turn, a failed turn) stays unknown.
func TestInferSeenCachedShare(t *testing.T) {
	const ms = time.Millisecond
	// Priming turn: 4,000 tokens in 410 ms, of which 10 ms (one ITL) fixed:
	// 0.1 ms a token. The follow-up has 5,000 tokens, 4,000 of them seen.
	turn := func(ttft time.Duration, out int) Result {
		start := clockEpoch
		return Result{Kind: KindSuccess, Turn: 2, PromptTokens: 5000, SeenTokens: 4000, PrimeTTFT: 410 * ms,
			PrimePromptTokens: 4000, OutputTokens: out, RequestedTokens: out, FirstChunkTokens: 1,
			Start: start, FirstToken: start.Add(ttft), LastToken: start.Add(ttft + time.Duration(out-1)*10*ms)}
	}
	for _, tc := range []struct {
		name   string
		r      Result
		share  float64
		method CachedMethod
		class  ConversationCache
	}{
		{"all seen cached: only the new 1,000 prefilled", turn(110*ms, 5), 1, CachedTTFTMethod, CacheHitTurn},
		{"half cached", turn(310*ms, 5), 0.5, CachedTTFTMethod, CachePartialTurn},
		{"80 % cached", turn(190*ms, 5), 0.8, CachedTTFTMethod, CachePartialTurn},
		{"nothing cached: the whole prompt prefilled", turn(510*ms, 5), 0, CachedTTFTMethod, CacheMissTurn},
		{"slower than a full prefill", turn(900*ms, 5), 0, CachedTTFTMethod, CacheMissTurn},
		{"faster than the new tokens alone", turn(20*ms, 5), 1, CachedTTFTMethod, CacheHitTurn},
		// One output token: no ITL, nothing taken off: 4,000 × 110/410 = 1,073 prefilled.
		{"no decode measured", turn(110*ms, 1), (5000 - 4000*110.0/410) / 4000, CachedTTFTMethod, CacheHitTurn},
		{"reported wins", func() Result { r := turn(510*ms, 5); r.CachedTokens, r.CachedReported = 3000, true; return r }(),
			0.75, CachedReportedMethod, CachePartialTurn},
		{"no priming turn", func() Result { r := turn(110*ms, 5); r.PrimeTTFT = 0; return r }(), -1, CachedNoMethod, CacheUnknownTurn},
		{"priming prompt unknown", func() Result { r := turn(110*ms, 5); r.PrimePromptTokens = 0; return r }(), -1, CachedNoMethod, CacheUnknownTurn},
		{"failed turn", func() Result { r := turn(110*ms, 5); r.Kind = KindError; return r }(), -1, CachedNoMethod, CacheUnknownTurn},
		{"priming turn itself", func() Result { r := turn(110*ms, 5); r.Turn = 1; return r }(), -1, CachedNoMethod, CacheUnknownTurn},
	} {
		share, method := tc.r.SeenCached()
		if method != tc.method || (tc.share >= 0 && math.Abs(share-tc.share) > 1e-9) {
			t.Errorf("%s: share %.4f by %q, want %.4f by %q", tc.name, share, method, tc.share, tc.method)
		}
		if _, ok := tc.r.SeenCachedShare(); ok != (tc.method != CachedNoMethod) {
			t.Errorf("%s: SeenCachedShare ok %v", tc.name, ok)
		}
		if got := tc.r.ConversationCache(); got != tc.class {
			t.Errorf("%s: class %s, want %s", tc.name, got, tc.class)
		}
	}
}

// conversationFleet is n simulated engines behind a test gateway with the
// given policy, as one target.
func conversationFleet(t *testing.T, n int, policy gateway.Policy, mutate func(*vllmsim.Config)) ([]*vllmsim.Engine, *gateway.Gateway, Target) {
	t.Helper()
	var engines []*vllmsim.Engine
	var urls []string
	for range n {
		cfg := vllmsim.DefaultConfig()
		cfg.TimeScale = 0.1
		if mutate != nil {
			mutate(&cfg)
		}
		e, err := vllmsim.New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		url, _ := testproc.Serve(t, e.Handler())
		t.Cleanup(e.Close)
		engines = append(engines, e)
		urls = append(urls, url)
	}
	g, err := gateway.New(policy, urls...)
	if err != nil {
		t.Fatal(err)
	}
	url, client := testproc.Serve(t, g)
	return engines, g, Target{Name: "fleet", BaseURL: url, API: APIChat, Client: client}
}

// conversationClasses runs conversations of s on target and returns each
// one's follow-up classes, checking every turn's prompt length and the
// cached tokens against the engine that served the turn.
func conversationClasses(t *testing.T, p *Prober, target Target, s Scenario, conversations int, engines []*vllmsim.Engine) [][]ConversationCache {
	t.Helper()
	// The gateway names the engine that served each response; the engines'
	// response ids are their own counters, so the same id exists on both.
	var backends []int
	inner := target.Client.Transport
	target.Client = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := inner.RoundTrip(r)
		if err == nil && r.URL.Path == "/v1/chat/completions" {
			i, _ := strconv.Atoi(resp.Header.Get(gateway.BackendHeader))
			backends = append(backends, i)
		}
		return resp, err
	})}
	prep, err := p.Prepare(context.Background(), target, "", s)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]ConversationCache
	for range conversations {
		res := p.Run(context.Background(), target, prep)
		if res.Kind != KindSuccess || res.Turn != s.Turns() || len(res.Earlier) != s.Turns()-1 {
			t.Fatalf("conversation: kind %s reason %s turn %d earlier %d err %v", res.Kind, res.Reason, res.Turn, len(res.Earlier), res.Err)
		}
		turns := append(slices.Clone(res.Earlier), res)
		served := backends[len(backends)-len(turns):]
		var classes []ConversationCache
		for i, r := range turns {
			// The priming turn is calibrated to a word; a follow-up's length
			// is derived from the turn before's usage to the token.
			if !r.PromptLengthOK || (i > 0 && r.PromptTokens != r.WantPromptTokens) || !PromptLengthWithin(r.PromptTokens, s.InputTokens) && i == 0 {
				t.Errorf("turn %d: prompt %d tokens, want %d (ok %v)", i+1, r.PromptTokens, r.WantPromptTokens, r.PromptLengthOK)
			}
			tr, ok := engines[served[i]].Trace(r.ResponseID)
			switch {
			case !ok:
				t.Errorf("turn %d: response %q not on engine %d", i+1, r.ResponseID, served[i])
			case r.CachedReported && tr.CachedTokens != r.CachedTokens:
				t.Errorf("turn %d: client read %d cached tokens, engine %d served %d", i+1, r.CachedTokens, served[i], tr.CachedTokens)
			}
			if i == 0 {
				continue
			}
			if want := turns[i-1].PromptTokens + turns[i-1].OutputTokens; r.SeenTokens != want {
				t.Errorf("turn %d: seen %d tokens, want the turn before's prompt and answer, %d", i+1, r.SeenTokens, want)
			}
			if len(out) == 0 {
				t.Logf("turn %d on engine %d: %d of the %d tokens seen cached, %s", i+1, served[i], r.CachedTokens, r.SeenTokens, r.ConversationCache())
			}
			classes = append(classes, r.ConversationCache())
		}
		out = append(out, classes)
	}
	return out
}

func conversationTestScenario(turns, input, newTokens int) Scenario {
	return Scenario{Name: "agent", Family: FamilyCustom, InputTokens: input, OutputTokens: 16,
		Interval: time.Minute, Timeout: time.Minute, Conversation: Conversation{Turns: turns, NewTokens: newTokens}}
}

// TestConversationAffinity: two engines behind the test gateway. With cookie
// affinity, or header affinity and the conversation's id in that header,
// every follow-up returns to the engine that holds the conversation and hits; round-robin alternates engines, so the first follow-up lands on
// the engine that never saw the conversation (miss) and each later one on the
// engine that saw it two turns before (partial: 4,096 of 5,152 and 5,136 of
// 6,192 tokens). The class is the share of the turn before's prompt and
// answer.
func TestConversationAffinity(t *testing.T) {
	for _, tc := range []struct {
		policy   gateway.Policy
		idHeader string
		want     []ConversationCache
	}{
		{gateway.CookieAffinity, "", []ConversationCache{CacheHitTurn, CacheHitTurn, CacheHitTurn}},
		{gateway.HeaderAffinity, gateway.DefaultHeader, []ConversationCache{CacheHitTurn, CacheHitTurn, CacheHitTurn}},
		{gateway.HeaderAffinity, "", []ConversationCache{CacheMissTurn, CachePartialTurn, CachePartialTurn}}, // no header: round-robin
		{gateway.RoundRobin, "", []ConversationCache{CacheMissTurn, CachePartialTurn, CachePartialTurn}},
	} {
		s := conversationTestScenario(4, 4096, 1024)
		s.Conversation.IDHeader = tc.idHeader
		t.Run(fmt.Sprintf("%s/id_header=%q", tc.policy, tc.idHeader), func(t *testing.T) {
			engines, g, target := conversationFleet(t, 2, tc.policy, nil)
			got := conversationClasses(t, New(nil, nil), target, s, 3, engines)
			for i, classes := range got {
				if !slices.Equal(classes, tc.want) {
					t.Errorf("conversation %d: follow-ups %v, want %v", i+1, classes, tc.want)
				}
			}
			t.Logf("%s: follow-up classes %v; requests per engine %v", tc.policy, got, g.Served())
		})
	}
}

// TestConversationCookiesStayInTheirConversation: a conversation sends the
// affinity cookie the gateway set on its first turn with every later turn;
// a new conversation and a cold probe start without it. The id header is the
// same on every turn of a conversation, differs between two, and is not on a
// cold probe.
func TestConversationCookiesStayInTheirConversation(t *testing.T) {
	var cookies, ids []string
	_, _, target := conversationFleet(t, 2, gateway.CookieAffinity, nil)
	inner := target.Client.Transport
	target.Client = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.Path == "/v1/chat/completions" {
			cookies = append(cookies, r.Header.Get("Cookie"))
			ids = append(ids, r.Header.Get(gateway.DefaultHeader))
		}
		return inner.RoundTrip(r)
	})}
	p := New(nil, nil)
	s := conversationTestScenario(3, 1024, 256)
	s.Conversation.IDHeader = gateway.DefaultHeader
	for range 2 {
		if res := p.Probe(context.Background(), target, "", s); res.Kind != KindSuccess {
			t.Fatalf("conversation: %s %s %v", res.Kind, res.Reason, res.Err)
		}
	}
	cold := s
	cold.Name, cold.Conversation = "cold", Conversation{}
	if res := p.Probe(context.Background(), target, "", cold); res.Kind != KindSuccess {
		t.Fatalf("cold probe: %s %s %v", res.Kind, res.Reason, res.Err)
	}
	// Calibration sends its own chat requests first; the probes' are the last seven.
	if len(cookies) < 7 {
		t.Fatalf("%d chat requests, want at least 7", len(cookies))
	}
	id := ids[len(ids)-7:]
	if id[0] == "" || id[0] != id[1] || id[1] != id[2] || id[3] == "" || id[3] != id[4] || id[4] != id[5] || id[0] == id[3] || id[6] != "" {
		t.Errorf("%s of the last seven chat requests: %q; want one id per conversation, none on the cold probe", gateway.DefaultHeader, id)
	}
	got := cookies[len(cookies)-7:]
	for i, c := range got {
		want := ""
		if i%3 != 0 && i < 6 {
			want = fmt.Sprintf("%s=", gateway.DefaultCookie)
		}
		if (want == "") != (c == "") || (want != "" && len(c) <= len(want)) || (want != "" && c[:len(want)] != want) {
			t.Errorf("chat request %d of the last seven: Cookie %q, want %q…", i+1, c, want)
		}
	}
}

// TestConversationUnknownCache: a server that reports no cached tokens has
// every follow-up's share inferred from its TTFT (method ttft), never left
// unknown; the share's accuracy is TestConversationInferredShare's.
func TestConversationUnknownCache(t *testing.T) {
	engines, _, target := conversationFleet(t, 1, gateway.RoundRobin, func(c *vllmsim.Config) { c.EnablePromptTokensDetails = false })
	p := New(nil, nil)
	conversationClasses(t, p, target, conversationTestScenario(3, 1024, 256), 1, engines)
	prep, err := p.Prepare(context.Background(), target, "", conversationTestScenario(3, 1024, 256))
	if err != nil {
		t.Fatal(err)
	}
	res := p.Run(context.Background(), target, prep)
	for _, r := range append(slices.Clone(res.Earlier), res)[1:] {
		if share, m := r.SeenCached(); m != CachedTTFTMethod || r.CachedReported || r.ConversationCache() == CacheUnknownTurn {
			t.Errorf("turn %d: share %.2f by %q (reported %v), class %s; want inferred from TTFT", r.Turn, share, m, r.CachedReported, r.ConversationCache())
		}
	}
}

// TestConversationInferredShare measures the TTFT inference against the
// simulated engine, which reports cached_tokens and whose prefill time is
// its model of the uncached tokens (Config.PrefillTimeCached): on every
// follow-up of conversations behind the test gateway, hits with cookie
// affinity, a miss and partials with round-robin, the share inferred from
// TTFT (the same result with the count hidden) against the reported one.
// Real time (TimeScale 1): the inference reads the engine's milliseconds.
func TestConversationInferredShare(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time conversations")
	}
	testproc.QuietLight(t)
	// SLAPROBE_INFER_INPUT and SLAPROBE_INFER_NEW give other sizes, for
	// figures only: the bound below holds at 16K adding 2K.
	input, newTokens := 16384, 2048
	if v, _ := strconv.Atoi(os.Getenv("SLAPROBE_INFER_INPUT")); v > 0 {
		input = v
	}
	if v, _ := strconv.Atoi(os.Getenv("SLAPROBE_INFER_NEW")); v > 0 {
		newTokens = v
	}
	judge := input == 16384 && newTokens == 2048
	s := conversationTestScenario(4, input, newTokens)
	type pair struct {
		reported, inferred float64
		turn               int
	}
	var all []pair
	agree, n := 0, 0
	for _, policy := range []gateway.Policy{gateway.CookieAffinity, gateway.RoundRobin} {
		_, _, target := conversationFleet(t, 2, policy, func(c *vllmsim.Config) { c.TimeScale = 1 })
		p := New(nil, nil)
		prep, err := p.Prepare(context.Background(), target, "", s)
		if err != nil {
			t.Fatal(err)
		}
		for c := range 3 {
			res := p.Run(context.Background(), target, prep)
			if res.Kind != KindSuccess || res.Turn != s.Turns() {
				t.Fatalf("%s conversation %d: %s/%s at turn %d: %v", policy, c, res.Kind, res.Reason, res.Turn, res.Err)
			}
			for _, r := range append(slices.Clone(res.Earlier), res)[1:] {
				rep, m := r.SeenCached()
				if m != CachedReportedMethod {
					t.Fatalf("turn %d: method %q; the simulated engine reports cached tokens", r.Turn, m)
				}
				hidden := r
				hidden.CachedReported, hidden.CachedTokens = false, 0
				inf, m := hidden.SeenCached()
				if m != CachedTTFTMethod {
					t.Fatalf("turn %d: hidden count read by %q, want ttft", r.Turn, m)
				}
				all = append(all, pair{rep, inf, r.Turn})
				n++
				if hidden.ConversationCache() == r.ConversationCache() {
					agree++
				}
				t.Logf("%s conversation %d turn %d: TTFT %v (priming %v), reported %.3f (%s), inferred %.3f (%s), error %+.3f",
					policy, c+1, r.Turn, r.TTFT().Round(time.Millisecond), r.PrimeTTFT.Round(time.Millisecond),
					rep, r.ConversationCache(), inf, hidden.ConversationCache(), inf-rep)
			}
		}
	}
	// Error by class of the reported share.
	byClass := map[ConversationCache][]float64{}
	for _, pr := range all {
		r := Result{Turn: 2, SeenTokens: 1000, CachedTokens: int(math.Round(pr.reported * 1000)), CachedReported: true}
		byClass[r.ConversationCache()] = append(byClass[r.ConversationCache()], pr.inferred-pr.reported)
	}
	for _, c := range ConversationCaches {
		errs := byClass[c]
		if len(errs) == 0 {
			continue
		}
		worst := 0.0
		for _, e := range errs {
			worst = max(worst, math.Abs(e))
		}
		t.Logf("%s (%d turns): inferred − reported median %+.3f, worst |%.3f|", c, len(errs), medianFloat(errs), worst)
		// The bound: the inference reads low by the engine's fixed cost of a
		// prefill step (70 ms of a 662 ms cold 16K prefill: 9 points on a
		// hit); a share 10 % off on top of that fails.
		if m := medianFloat(errs); judge && math.Abs(m) > inferredShareTol {
			t.Errorf("%s follow-ups: the inferred share is %+.3f off the reported one (median), tolerance ±%.2f", c, m, inferredShareTol)
		}
	}
	if len(byClass[CacheHitTurn]) == 0 || len(byClass[CacheMissTurn]) == 0 || len(byClass[CachePartialTurn]) == 0 {
		t.Errorf("follow-ups by reported class %v; want hits, partials and misses", byClass)
	}
	t.Logf("classes agree on %d of %d follow-ups", agree, n)
}

// inferredShareTol bounds the median error of the TTFT-inferred share on the
// simulated engine (TestConversationInferredShare); measured -0.09 on hits,
// -0.08 on partials, +0.00 on misses (docs/conversations.md).
const inferredShareTol = 0.15

func medianFloat(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

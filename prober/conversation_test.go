package prober

import (
	"context"
	"fmt"
	"net/http"
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

// TestConversationUnknownCache: a server that reports no cached tokens
// leaves every follow-up unknown.
func TestConversationUnknownCache(t *testing.T) {
	engines, _, target := conversationFleet(t, 1, gateway.RoundRobin, func(c *vllmsim.Config) { c.EnablePromptTokensDetails = false })
	got := conversationClasses(t, New(nil, nil), target, conversationTestScenario(3, 1024, 256), 1, engines)
	if want := []ConversationCache{CacheUnknownTurn, CacheUnknownTurn}; !slices.Equal(got[0], want) {
		t.Errorf("follow-ups %v, want %v", got[0], want)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

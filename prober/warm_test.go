package prober

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// Warm-context probes against the simulated engine, whose prefix cache and
// prefill model (vllmsim.Config.PrefillTimeCached) are the ground truth.

// warmTestScenario is a built-in warm scenario with a short output, so the
// test spends its time on prefill.
func warmTestScenario(t *testing.T, name string) Scenario {
	t.Helper()
	s, ok := LookupBuiltin(name)
	if !ok || !s.IsConversation() {
		t.Fatalf("no built-in warm scenario %q", name)
	}
	s.OutputTokens = 16
	s.Timeout = time.Minute
	return s
}

// simTarget serves the simulated engine e on loopback until t ends.
func simTarget(t *testing.T, e *vllmsim.Engine) Target {
	t.Helper()
	url, client := testproc.Serve(t, e.Handler())
	t.Cleanup(e.Close)
	return Target{Name: "sim", BaseURL: url, API: APIChat, Client: client}
}

func warmSim(t *testing.T, mutate func(*vllmsim.Config)) (*vllmsim.Engine, Target) {
	t.Helper()
	cfg := vllmsim.DefaultConfig()
	cfg.TimeScale = 0.1
	if mutate != nil {
		mutate(&cfg)
	}
	e, err := vllmsim.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e, simTarget(t, e)
}

// The tolerance of TTFT saved against the engine's traces of the same two
// requests (TestWarmFollowUpHitsCache): measured spread and source in
// docs/testing.md ("Accuracy tolerances").
const (
	warmSavedAbs = time.Millisecond
	warmSavedRel = 0.02
)

func TestWarmFollowUpHitsCache(t *testing.T) {
	testproc.Quiet(t) // compares a warm TTFT with a cold one, both a few milliseconds
	e, target := warmSim(t, nil)
	cfg := e.Config()
	p := New(nil, nil)
	s := warmTestScenario(t, "general_chat_followup")
	testproc.TimingAttempts(t, func(errorf func(string, ...any)) {
		res := p.Probe(context.Background(), target, "", s)
		if res.Kind != KindSuccess || res.Turn != 2 || len(res.Earlier) != 1 {
			t.Fatalf("follow-up: kind %s reason %s turn %d earlier %d err %v", res.Kind, res.Reason, res.Turn, len(res.Earlier), res.Err)
		}
		prime := res.Earlier[0]
		if prime.Turn != 1 || prime.Kind != KindSuccess {
			t.Fatalf("priming turn: turn %d kind %s", prime.Turn, prime.Kind)
		}
		if !prime.CachedReported || prime.CachedTokens != 0 {
			t.Errorf("priming turn: cached %d (reported %v), want a cold prompt", prime.CachedTokens, prime.CachedReported)
		}
		if !PromptLengthWithin(res.PromptTokens, s.TurnInputTokens(2)) || !res.PromptLengthOK {
			t.Errorf("follow-up prompt %d tokens, want %d", res.PromptTokens, s.TurnInputTokens(2))
		}
		// Every whole block of the priming prompt hits (the follow-up
		// replays the answer, but its one block is not full: the last
		// generated token's KV is never computed); the new tokens do not.
		if hi := prime.PromptTokens / vllmsim.BlockSize * vllmsim.BlockSize; res.CachedTokens > hi || res.CachedTokens < hi-2*vllmsim.BlockSize {
			t.Errorf("follow-up cached %d tokens, want the priming prompt's whole blocks, %d, but the last one or two", res.CachedTokens, hi)
		}
		share, ok := res.CachedShare()
		if !ok || share < 0.9 {
			t.Errorf("cached share %.3f (reported %v), want about 32/33", share, ok)
		}
		// The client's TTFT is the engine's prefill plus transport: never
		// less than the model, and the saving is close to the model's.
		coldModel := cfg.PrefillTimeCached(prime.PromptTokens, 0)
		warmModel := cfg.PrefillTimeCached(res.PromptTokens, res.CachedTokens)
		if prime.TTFT() < coldModel || res.TTFT() < warmModel {
			t.Errorf("TTFT below the engine's model: prime %s < %s or follow-up %s < %s", prime.TTFT(), coldModel, res.TTFT(), warmModel)
		}
		// The saving against the engine's own record of the very same two
		// requests: when it wrote each first chunk (its trace), from each
		// request's t0, the priming turn's minus the follow-up's. Not from
		// the engine's arrival: the upload and reading of a 32K-token prompt
		// in this -race binary varies by several milliseconds from one
		// request to the next (up to 7 ms measured, docs/testing.md), noise
		// the saving does not depend on; t0 itself is checked against the
		// engine's arrival by TestAccuracyTiming.
		saved, ok := res.TTFTSaved()
		ptr, pok := e.Trace(prime.ResponseID)
		ftr, fok := e.Trace(res.ResponseID)
		if !pok || !fok {
			t.Fatalf("no engine trace of the priming turn (%v) or of the follow-up (%v)", pok, fok)
		}
		traceSaved := ptr.FirstTokenWritten.Sub(prime.Start) - ftr.FirstTokenWritten.Sub(res.Start)
		tol := warmSavedAbs + time.Duration(warmSavedRel*float64(traceSaved))
		if d := saved - traceSaved; !ok || d > tol || -d > tol {
			errorf("TTFT saved %s, the engine's traces of the same two requests %s: off by %s, tolerance %s (model: %s cold, %s warm)",
				saved, traceSaved, d, tol, coldModel, warmModel)
		}
		t.Logf("TTFT saved %s, engine's traces %s (%+.2f%%), model %s", saved.Round(time.Microsecond), traceSaved.Round(time.Microsecond),
			100*float64(saved-traceSaved)/float64(traceSaved), (coldModel - warmModel).Round(time.Microsecond))
		if res.PrimeTTFT != prime.TTFT() {
			t.Errorf("PrimeTTFT %s, want the priming turn's %s", res.PrimeTTFT, prime.TTFT())
		}
		if tr, ok := e.Trace(res.ResponseID); !ok || tr.CachedTokens != res.CachedTokens {
			t.Errorf("engine trace of the follow-up: %+v (found %v), want cached %d", tr.CachedTokens, ok, res.CachedTokens)
		}
	})
}

// A follow-up misses when the server has no prefix cache, or when the
// conversation breaks (a fresh salt): both read as a zero share, not an error.
func TestWarmMissIsZeroShare(t *testing.T) {
	testproc.Quiet(t) // compares a warm TTFT with a cold one, both a few milliseconds
	for _, tc := range []struct {
		name      string
		noCache   bool
		freshSalt bool
	}{
		{name: "cache disabled", noCache: true},
		{name: "fresh salt on the follow-up", freshSalt: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, target := warmSim(t, func(c *vllmsim.Config) { c.EnablePrefixCaching = !tc.noCache })
			p := New(nil, nil)
			p.freshFollowUpSalt = tc.freshSalt
			s := warmTestScenario(t, "general_chat_followup")
			res := p.Probe(context.Background(), target, "", s)
			if res.Kind != KindSuccess || res.Turn != 2 {
				t.Fatalf("kind %s reason %s turn %d err %v", res.Kind, res.Reason, res.Turn, res.Err)
			}
			share, ok := res.CachedShare()
			if !ok || share != 0 || res.CacheHit() {
				t.Errorf("cached share %.3f (reported %v, %d tokens), want 0", share, ok, res.CachedTokens)
			}
			saved, _ := res.TTFTSaved()
			if saved > res.PrimeTTFT/2 {
				t.Errorf("a miss saved %s of the priming turn's %s", saved, res.PrimeTTFT)
			}
		})
	}
}

// Cold probes stay cold: right after warm conversations on the same server,
// cold probes of the priming turn's size and of the follow-up's size (the
// same text but for the nonce) share no prefix-cache block with them.
func TestWarmColdProbesStayCold(t *testing.T) {
	e, target := warmSim(t, nil)
	p := New(nil, nil)
	warm := warmTestScenario(t, "general_chat_followup")
	for range 2 {
		if res := p.Probe(context.Background(), target, "", warm); res.Kind != KindSuccess || !res.CacheHit() {
			t.Fatalf("warm probe: kind %s cached %d err %v", res.Kind, res.CachedTokens, res.Err)
		}
	}
	before := e.Stats().CachedTokens
	for _, in := range []int{warm.TurnInputTokens(1), warm.TurnInputTokens(2)} {
		cold := Scenario{Name: "cold", InputTokens: in, OutputTokens: 16, Timeout: time.Minute}
		for range 2 {
			res := p.Probe(context.Background(), target, "", cold)
			if res.Kind != KindSuccess || res.Turn != 0 {
				t.Fatalf("cold %d: kind %s turn %d err %v", in, res.Kind, res.Turn, res.Err)
			}
			if !res.CachedReported || res.CachedTokens != 0 {
				t.Errorf("cold probe of %d tokens after warm probes: cached %d (reported %v)", in, res.CachedTokens, res.CachedReported)
			}
		}
	}
	if after := e.Stats().CachedTokens; after != before {
		t.Errorf("the engine counted %d cached tokens for cold probes", after-before)
	}
}

func TestWarmScenarioValidate(t *testing.T) {
	base := Scenario{Name: "w", InputTokens: 1024, OutputTokens: 16, Interval: time.Minute, Timeout: time.Minute}
	for _, tc := range []struct {
		conv Conversation
		want string
	}{
		{Conversation{Turns: 1, NewTokens: 10}, `scenario "w": conversation.turns=1; expected 2 to 64 (the priming turn and at least one follow-up)`},
		{Conversation{Turns: 65, NewTokens: 10}, `scenario "w": conversation.turns=65; expected 2 to 64 (the priming turn and at least one follow-up)`},
		{Conversation{Turns: -2, NewTokens: 10}, `scenario "w": conversation.turns=-2; expected 2 to 64 (the priming turn and at least one follow-up)`},
		{Conversation{Turns: 2}, `scenario "w": conversation.new_tokens=0; expected a positive token count per follow-up turn`},
		{Conversation{NewTokens: 5}, `scenario "w": conversation.new_tokens=5 with conversation.turns=0; expected conversation.turns of 2 or more`},
		{Conversation{Turns: 3, NewTokens: 512}, ""},
		{Conversation{Turns: 64, NewTokens: 512}, ""},
		{Conversation{Turns: 2, NewTokens: 512, IDHeader: "X-Session-Id"}, ""},
		{Conversation{Turns: 2, NewTokens: 512, IDHeader: "X Session"}, "scenario \"w\": conversation.id_header=\"X Session\"; expected an HTTP header name such as X-Session-Id (letters, digits and !#$%&'*+-.^_`|~)"},
		{Conversation{Turns: 2, NewTokens: 512, NewTokensMax: 512}, `scenario "w": conversation.new_tokens=512-512; expected a range LOW-HIGH with 0 < LOW < HIGH, such as 1024-4096`},
		{Conversation{Turns: 2, NewTokens: 512, NewTokensMax: 1024, Tools: true, Seed: 9}, ""},
		{Conversation{Tools: true}, `scenario "w": conversation.tools, seed or a new_tokens range with conversation.turns=0; expected conversation.turns of 2 or more`},
		{Conversation{Turns: 2, NewTokens: 512, IDHeader: "host"}, "scenario \"w\": conversation.id_header=\"host\"; expected an HTTP header name such as X-Session-Id (letters, digits and !#$%&'*+-.^_`|~)"},
		{Conversation{IDHeader: "X-Session-Id"}, `scenario "w": conversation.id_header="X-Session-Id" with conversation.turns=0; expected conversation.turns of 2 or more`},
		{Conversation{Turns: 2, NewTokens: 512, ThinkTime: ThinkTime{Min: 15 * time.Second, Max: 15 * time.Second}}, ""},
		{Conversation{Turns: 2, NewTokens: 512, ThinkTime: ThinkTime{Min: 5 * time.Second, Max: 10 * time.Minute}}, ""},
		{Conversation{Turns: 2, NewTokens: 512, ThinkTime: ThinkTime{Min: time.Minute, Max: 5 * time.Second}},
			`scenario "w": conversation.think_time=1m-5s; expected a duration from 0s to 10m, or a range lo-hi with lo <= hi ("5s-1m")`},
		{Conversation{Turns: 2, NewTokens: 512, ThinkTime: ThinkTime{Min: -time.Second, Max: time.Second}},
			`scenario "w": conversation.think_time=-1s-1s; expected a duration from 0s to 10m, or a range lo-hi with lo <= hi ("5s-1m")`},
		{Conversation{Turns: 2, NewTokens: 512, ThinkTime: ThinkTime{Min: time.Second, Max: 10*time.Minute + time.Second}},
			`scenario "w": conversation.think_time=1s-10m1s; expected a duration from 0s to 10m, or a range lo-hi with lo <= hi ("5s-1m")`},
		{Conversation{ThinkTime: ThinkTime{Min: time.Second, Max: time.Second}},
			`scenario "w": conversation.think_time=1s with conversation.turns=0; expected conversation.turns of 2 or more`},
	} {
		s := base
		s.Conversation = tc.conv
		err := s.Validate()
		if got := ""; err != nil {
			got = err.Error()
			if got != tc.want {
				t.Errorf("%+v: %q, want %q", tc.conv, got, tc.want)
			}
		} else if tc.want != "" {
			t.Errorf("%+v: no error, want %q", tc.conv, tc.want)
		}
	}
	s := base
	s.Conversation = Conversation{Turns: 3, NewTokens: 512}
	// Each follow-up replays the 16-token answer before it, then adds 512.
	if got, want := s.TokensPerProbe(), (1024+16)+(1552+16)+(2080+16); got != want {
		t.Errorf("TokensPerProbe %d, want %d", got, want)
	}
	if Fits(s, 2080+15) || !Fits(s, 2080+16) {
		t.Error("Fits must judge the last turn's prompt")
	}
	// A range: its mean for the token cost, its top for the longest prompt.
	s.Conversation = Conversation{Turns: 3, NewTokens: 256, NewTokensMax: 768}
	if got, want := s.TokensPerProbe(), (1024+16)+(1552+16)+(2080+16); got != want {
		t.Errorf("range: TokensPerProbe %d, want %d", got, want)
	}
	if got, want := s.MaxInputTokens(), 1024+2*(768+16); got != want {
		t.Errorf("range: MaxInputTokens %d, want %d", got, want)
	}
}

// TestWarmTTFTFigures measures cold (priming turn) against warm (follow-up)
// TTFT for the built-in warm scenarios on vllmsim's default model (one H100,
// docs/conversations.md), three conversations each, and reports the medians scaled
// back to the model's real time. SLAPROBE_WARM_SCALE sets the engine's time
// scale (default 0.1; 1 runs in real time).
//
//	SLAPROBE_WARM_SCALE=1 go test ./prober/ -run TestWarmTTFTFigures -v
func TestWarmTTFTFigures(t *testing.T) {
	testproc.Quiet(t) // compares a warm TTFT with a cold one, both a few milliseconds
	scale := 0.1
	if v := os.Getenv("SLAPROBE_WARM_SCALE"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			t.Fatalf("SLAPROBE_WARM_SCALE=%q; expected a positive number", v)
		}
		scale = f
	}
	e, target := warmSim(t, func(c *vllmsim.Config) { c.TimeScale = scale })
	cfg := e.Config()
	p := New(nil, nil)
	for _, name := range []string{"general_chat_followup", "long_document_followup"} {
		s := warmTestScenario(t, name)
		var cold, warm []time.Duration
		var res Result
		for range 3 {
			res = p.Probe(context.Background(), target, "", s)
			if res.Kind != KindSuccess || len(res.Earlier) != 1 || !res.CacheHit() {
				t.Fatalf("%s: kind %s cached %d err %v", name, res.Kind, res.CachedTokens, res.Err)
			}
			cold = append(cold, res.Earlier[0].TTFT())
			warm = append(warm, res.TTFT())
		}
		real := func(d time.Duration) time.Duration { return time.Duration(float64(d) / scale).Round(time.Millisecond) }
		c, w := real(median(cold)), real(median(warm))
		prime := res.Earlier[0]
		unscaled := cfg
		unscaled.TimeScale = 1
		mc := unscaled.PrefillTimeCached(prime.PromptTokens, 0).Round(time.Millisecond)
		mw := unscaled.PrefillTimeCached(res.PromptTokens, res.CachedTokens).Round(time.Millisecond)
		t.Logf("%s: cold %d tokens TTFT %s (model %s); warm follow-up %d tokens, %d cached, TTFT %s (model %s; cold at that size %s, a cold 1K prompt %s); saved %.0f %%",
			name, prime.PromptTokens, c, mc, res.PromptTokens, res.CachedTokens, w, mw,
			unscaled.PrefillTime(res.PromptTokens).Round(time.Millisecond), unscaled.PrefillTime(1024).Round(time.Millisecond),
			100*(1-float64(w)/float64(c)))
		if c < mc || w < mw || w >= c {
			t.Errorf("%s: cold %s (model %s), warm %s (model %s)", name, c, mc, w, mw)
		}
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestWarmTypedAPIs: a warm conversation on the Responses and Messages APIs
// hits the prefix cache on its follow-up as on chat (Messages has no
// cache_salt: the repeated nonce alone keeps the conversation's prefix), and
// each API's own cached count (input_tokens_details.cached_tokens,
// cache_read_input_tokens) is read.
func TestWarmTypedAPIs(t *testing.T) {
	testproc.Quiet(t) // compares a warm TTFT with a cold one
	for _, api := range []API{APIResponses, APIMessages} {
		t.Run(string(api), func(t *testing.T) {
			_, target := warmSim(t, nil)
			p := New(nil, nil)
			s := warmTestScenario(t, "general_chat_followup")
			s.API = api
			res := p.Probe(context.Background(), target, "", s)
			if res.Kind != KindSuccess || res.Turn != 2 || len(res.Earlier) != 1 || res.API != api {
				t.Fatalf("follow-up: kind %s reason %s turn %d earlier %d api %s err %v", res.Kind, res.Reason, res.Turn, len(res.Earlier), res.API, res.Err)
			}
			prime := res.Earlier[0]
			if !prime.CachedReported || prime.CachedTokens != 0 {
				t.Errorf("priming turn: cached %d (reported %v), want a cold prompt", prime.CachedTokens, prime.CachedReported)
			}
			if share, ok := res.CachedShare(); !ok || share < 0.9 || !PromptLengthWithin(res.PromptTokens, s.TurnInputTokens(2)) {
				t.Errorf("follow-up: %d prompt tokens, cached share %.3f (reported %v); want %d tokens, about 32/33 cached", res.PromptTokens, share, ok, s.TurnInputTokens(2))
			}
			if saved, ok := res.TTFTSaved(); !ok || saved <= 0 {
				t.Errorf("follow-up TTFT %v, priming %v: the cache saved nothing", res.TTFT(), prime.TTFT())
			}
		})
	}
}

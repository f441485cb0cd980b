package prober

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/test/gateway"
)

func TestParseIntRange(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want IntRange
		ok   bool
	}{
		{"2048", IntRange{2048, 2048}, true},
		{"1024-4096", IntRange{1024, 4096}, true},
		{" 1024 - 4096 ", IntRange{1024, 4096}, true},
		{"4096-1024", IntRange{}, false},
		{"1024-1024", IntRange{}, false},
		{"0", IntRange{}, false},
		{"-5", IntRange{}, false},
		{"1k-2k", IntRange{}, false},
		{"", IntRange{}, false},
	} {
		got, err := ParseIntRange(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseIntRange(%q) = %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok {
			if again, _ := ParseIntRange(got.String()); again != got {
				t.Errorf("%v writes %q, which reads back as %v", got, got.String(), again)
			}
		}
	}
}

// TestDrawReproducible: a stream of a seed draws the same values on every
// run, another stream or seed draws others, every draw is inside the range
// and both ends are reached; a fixed range draws nothing.
func TestDrawReproducible(t *testing.T) {
	r := IntRange{1024, 1031}
	draws := func(seed, n uint64) []int {
		d := NewDraw(seed, n)
		var out []int
		for range 200 {
			out = append(out, d.Int(r))
		}
		return out
	}
	a := draws(DefaultSeed("coding_agent"), 0)
	if !slices.Equal(a, draws(DefaultSeed("coding_agent"), 0)) {
		t.Error("the same seed and stream drew differently")
	}
	if slices.Equal(a, draws(DefaultSeed("coding_agent"), 1)) || slices.Equal(a, draws(DefaultSeed("tool_agent"), 0)) {
		t.Error("another stream or seed drew the same values")
	}
	seen := map[int]bool{}
	for _, v := range a {
		if v < r.Min || v > r.Max {
			t.Fatalf("draw %d outside %v", v, r)
		}
		seen[v] = true
	}
	if len(seen) != r.Max-r.Min+1 {
		t.Errorf("200 draws reached %d of the %d values", len(seen), r.Max-r.Min+1)
	}
	d := NewDraw(1, 0)
	if v := d.Int(IntRange{512, 512}); v != 512 {
		t.Errorf("fixed draw %d", v)
	}
	if v := d.Duration(5*time.Second, 5*time.Second); v != 5*time.Second {
		t.Errorf("fixed duration %v", v)
	}
	for range 100 {
		if v := d.Duration(5*time.Second, 60*time.Second); v < 5*time.Second || v > 60*time.Second {
			t.Fatalf("duration %v outside 5s-60s", v)
		}
	}
}

// TestConversationNewTokensDrawn: new_tokens 256-1024 on the simulated
// engine. Each follow-up adds the answer before it and a drawn number of new
// tokens; the prompt length derived for every turn is the one the engine
// counted, to the token (each level of the range is calibrated), the draws
// spread over the range, and a second run (a new Prober, as after a
// restart) draws the same values for its first conversation.
func TestConversationNewTokensDrawn(t *testing.T) {
	s := conversationTestScenario(6, 1024, 256)
	s.Conversation.NewTokensMax = 1024
	s.OutputTokens = 16
	steps := func() [][]int {
		engines, _, target := conversationFleet(t, 1, gateway.RoundRobin, nil)
		p := New(nil, nil)
		var out [][]int
		for range 2 {
			res := p.Probe(context.Background(), target, "", s)
			if res.Kind != KindSuccess || len(res.Earlier) != 5 {
				t.Fatalf("conversation: %s %s %v", res.Kind, res.Reason, res.Err)
			}
			turns := append(slices.Clone(res.Earlier), res)
			var added []int
			for i, r := range turns {
				tr, _ := engines[0].Trace(r.ResponseID)
				if i == 0 {
					continue
				}
				if !r.PromptLengthOK || r.WantPromptTokens != tr.PromptTokens {
					t.Errorf("turn %d: derived %d prompt tokens, the engine counted %d", i+1, r.WantPromptTokens, tr.PromptTokens)
				}
				n := r.PromptTokens - turns[i-1].PromptTokens - turns[i-1].OutputTokens
				if n < 256-2 || n > 1024+2 { // each level calibrated to a word
					t.Errorf("turn %d added %d tokens besides the answer; want 256 to 1024", i+1, n)
				}
				added = append(added, n)
			}
			out = append(out, added)
		}
		return out
	}
	first, again := steps(), steps()
	t.Logf("new tokens added per follow-up: run 1 %v, run 2 %v", first, again)
	if !slices.Equal(first[0], again[0]) {
		t.Errorf("first conversation drew %v, then %v after a restart; want the same", first[0], again[0])
	}
	if slices.Equal(first[0], first[1]) {
		t.Errorf("two conversations drew the same %v", first[0])
	}
	lo, hi := slices.Min(append(first[0], first[1]...)), slices.Max(append(first[0], first[1]...))
	if hi-lo < 200 {
		t.Errorf("10 draws from 256-1024 span only %d to %d", lo, hi)
	}
}

func TestNewTokenLevels(t *testing.T) {
	for _, tc := range []struct {
		r    IntRange
		want []int
	}{
		{IntRange{2048, 2048}, []int{2048}},
		{IntRange{10, 13}, []int{10, 11, 12, 13}},
		{IntRange{1024, 4096}, []int{1024, 1229, 1434, 1638, 1843, 2048, 2253, 2458, 2662, 2867, 3072, 3277, 3482, 3686, 3891, 4096}},
	} {
		if got := newTokenLevels(tc.r); !slices.Equal(got, tc.want) {
			t.Errorf("%v: levels %v, want %v", tc.r, got, tc.want)
		}
	}
}

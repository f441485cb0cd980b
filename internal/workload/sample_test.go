package workload

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestClassOf(t *testing.T) {
	for _, tc := range []struct {
		input int
		want  string
	}{
		{1, "1k"}, {1024, "1k"}, {2048, "1k"}, {2049, "4k"}, {8192, "4k"}, {8193, "16k"},
		{23170, "16k"}, {23171, "32k"}, {56755, "32k"}, {56756, "96k"}, {1 << 20, "96k"},
	} {
		if got := ClassOf(tc.input).Name; got != tc.want {
			t.Errorf("ClassOf(%d) = %s, want %s", tc.input, got, tc.want)
		}
	}
	if err := (ClassTTFT{"8k": time.Second}).Validate(); err == nil {
		t.Error("ttft_by_class with an unknown class validated")
	}
	if !DefaultClassTTFT.Met("1k", 3*time.Second) || DefaultClassTTFT.Met("1k", 3*time.Second+1) || !DefaultClassTTFT.Met("96k", 11*time.Second) {
		t.Error("DefaultClassTTFT.Met misjudges its own thresholds")
	}
}

func drawN(t *testing.T, s *Sampler, n int) []Draw {
	t.Helper()
	out := make([]Draw, n)
	for i := range out {
		d, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = d
	}
	return out
}

// TestSamplerSeeded: the same seed draws the same requests in the same order; another seed
// another order.
func TestSamplerSeeded(t *testing.T) {
	reqs := excerpt(t, 200)
	a := drawN(t, NewSampler(reqs, SamplerOptions{Seed: 5}), 50)
	b := drawN(t, NewSampler(reqs, SamplerOptions{Seed: 5}), 50)
	c := drawN(t, NewSampler(reqs, SamplerOptions{Seed: 6}), 50)
	if !reflect.DeepEqual(a, b) {
		t.Error("two samplers of seed 5 drew differently")
	}
	if reflect.DeepEqual(a, c) {
		t.Error("seeds 5 and 6 drew the same requests")
	}
	seq := drawN(t, NewSampler(reqs, SamplerOptions{Order: OrderSequential}), 3)
	for i, d := range seq {
		if d.Index != i {
			t.Errorf("sequential draw %d is request %d", i, d.Index)
		}
	}
}

// TestSamplerFits: prompts over the context are clipped (with their block ids) or skipped, short
// prompts and failed requests skipped, one-token answers raised to two; each counted.
func TestSamplerFits(t *testing.T) {
	reqs := []Request{
		{Input: 3000, Output: 100, HashIDs: []uint64{1, 2, 3, 4, 5, 6}},
		{Input: 100, Output: 1},
		{Input: 10, Output: 5},
		{Input: 500, Output: 0},
		{Input: 1000, Output: 1990},
	}
	clip := NewSampler(reqs, SamplerOptions{Order: OrderSequential, MaxContext: 2048, MinInput: 64})
	d := drawN(t, clip, 2)
	if d[0].Input != 1948 || !d[0].Clipped || len(d[0].HashIDs) != 4 || d[0].Class.Name != "1k" {
		t.Errorf("clipped draw %+v; want 1948 input tokens, 4 block ids, class 1k", d[0])
	}
	if d[1].Output != 2 {
		t.Errorf("one-token answer drawn as %d tokens; want 2", d[1].Output)
	}
	want := Counts{Drawn: 2, Clipped: 1, OutputRaised: 1, SkippedShort: 0}
	if got := clip.Counts(); got != want {
		t.Errorf("counts %+v, want %+v", got, want)
	}
	drawN(t, clip, 1) // skips the short, the failed and the one whose answer alone nearly fills the context
	if got := clip.Counts(); got.SkippedShort != 1 || got.SkippedFailed != 1 || got.SkippedLong != 1 {
		t.Errorf("counts %+v; want one each of short, failed and long skipped", got)
	}

	skip := NewSampler(reqs, SamplerOptions{Order: OrderSequential, MaxContext: 2048, Over: OverSkip})
	if d := drawN(t, skip, 1); d[0].Input != 100 || skip.Counts().SkippedLong != 1 {
		t.Errorf("skip policy drew %+v (counts %+v); want the 100-token request after one long skip", d[0], skip.Counts())
	}
	none := NewSampler(reqs[2:4], SamplerOptions{MinInput: 64})
	if _, err := none.Next(); err == nil {
		t.Error("a trace with nothing to send drew a probe")
	}
}

// TestLoadSamplerKeeps: a trace larger than Keep keeps a seeded sample of Keep requests, in trace
// order.
func TestLoadSamplerKeeps(t *testing.T) {
	var b bytes.Buffer
	if err := Generate(&b, FormatAzure, GenOptions{Requests: 5000, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "azure.csv")
	os.WriteFile(path, b.Bytes(), 0o600)
	load := func(seed uint64) *Sampler {
		s, err := LoadSampler(Spec{Path: path, Format: FormatAzure}, SamplerOptions{Seed: seed, Keep: 500})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := load(1)
	if s.Len() != 500 {
		t.Fatalf("kept %d requests; want 500", s.Len())
	}
	for i := 1; i < len(s.reqs); i++ {
		if s.reqs[i].Line <= s.reqs[i-1].Line {
			t.Fatalf("kept requests out of trace order at %d", i)
		}
	}
	if s.reqs[len(s.reqs)-1].Line < 4000 {
		t.Errorf("the last kept request is line %d of 5001: not a sample of the whole trace", s.reqs[len(s.reqs)-1].Line)
	}
	if !reflect.DeepEqual(s.reqs, load(1).reqs) || reflect.DeepEqual(s.reqs, load(2).reqs) {
		t.Error("the kept sample does not follow the seed")
	}
}

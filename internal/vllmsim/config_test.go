package vllmsim

import (
	"math"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig invalid: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   string
	}{
		{"empty model", func(c *Config) { c.ModelName = "" }, `model_name: got "", want a non-empty name`},
		{"max_num_seqs", func(c *Config) { c.MaxNumSeqs = 0 }, "max_num_seqs: got 0, want >= 1"},
		{"kv below model len", func(c *Config) { c.KVCacheTokens = 1000 }, "kv_cache_tokens: got 1000, want >= max_model_len (262144)"},
		{"prefill rate", func(c *Config) { c.PrefillTokensPerSecond = 0 }, "prefill_tokens_per_second: got 0, want a finite number > 0"},
		{"decode zero", func(c *Config) { c.DecodeBase, c.DecodePerSeq = 0, 0 }, "decode_base + decode_per_seq: got 0s, want > 0"},
		{"negative per kv", func(c *Config) { c.DecodePerKVToken = -1 }, "decode_per_kv_token: got -1ns, want >= 0"},
		{"tokens per step", func(c *Config) { c.TokensPerStep = 0 }, "tokens_per_step: got 0, want 1..16"},
		{"time scale", func(c *Config) { c.TimeScale = 0 }, "time_scale: got 0, want a finite number > 0"},
		{"reasoning field", func(c *Config) { c.ReasoningField = "thoughts" }, `reasoning_field: got "thoughts", want "reasoning_content" or "reasoning"`},
		{"fault status", func(c *Config) { c.Faults.ErrorStatus, c.Faults.Rate = 200, 1 }, "faults.error_status: got 200, want 0 (off) or 400..599"},
		{"fault without rate", func(c *Config) { c.Faults.CutAfterTokens = 3 }, "faults.rate: got 0, want > 0 when a fault is configured"},
		{"stall without duration", func(c *Config) { c.Faults.StallAfterTokens, c.Faults.Rate = 3, 1 }, "faults.stall_for: got 0s, want > 0 when stall_after_tokens is set"},
		{"rate range", func(c *Config) { c.Faults.Rate = 1.5 }, "faults.rate: got 1.5, want 0..1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.mutate(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.want)
			}
			if _, err := New(c, nil); err == nil {
				t.Fatal("New accepted an invalid config")
			}
		})
	}
	// Several errors are all reported.
	c := DefaultConfig()
	c.MaxNumSeqs, c.TokensPerStep = 0, 0
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "max_num_seqs") || !strings.Contains(err.Error(), "tokens_per_step") {
		t.Fatalf("Validate() = %v, want both errors", err)
	}
}

func TestModelFunctions(t *testing.T) {
	c := DefaultConfig()
	near := func(t *testing.T, what string, got, want time.Duration, tol time.Duration) {
		t.Helper()
		if d := got - want; d < -tol || d > tol {
			t.Errorf("%s = %v, want %v ± %v", what, got, want, tol)
		}
	}
	// Figures quoted in the package documentation.
	near(t, "PrefillTime(1024)", c.PrefillTime(1024), 104300*time.Microsecond, 100*time.Microsecond)
	near(t, "PrefillTime(32768)", c.PrefillTime(32768), 1336*time.Millisecond, time.Millisecond)
	near(t, "DecodeStep(1, 1152)", c.DecodeStep(1, 1152), 6029*time.Microsecond, 2*time.Microsecond)
	near(t, "DecodeStep(32, 32×1152)", c.DecodeStep(32, 32*1152), 11572*time.Microsecond, 2*time.Microsecond)
	near(t, "DecodeStep(1, 256K)", c.DecodeStep(1, 262144), 12554*time.Microsecond, 2*time.Microsecond)
	if tps := 1 / c.ITL(1, 1024, 256).Seconds(); tps < 150 || tps > 170 {
		t.Errorf("N=1 1K decode speed = %.1f tok/s, want 150..170", tps)
	}
	eff := c.ITL(1, 1024, 256).Seconds() / c.ITL(32, 1024, 256).Seconds()
	if eff < 0.2 || eff > 0.7 {
		t.Errorf("N=32 scaling efficiency = %.2f, want well below 1", eff)
	}
	// Cached tokens shorten prefill; everything cached leaves the overhead.
	if c.PrefillTimeCached(4096, 4080)-c.PrefillOverhead >= (c.PrefillTime(4096)-c.PrefillOverhead)/10 {
		t.Errorf("PrefillTimeCached(4096, 4080) = %v, not much below PrefillTime %v", c.PrefillTimeCached(4096, 4080), c.PrefillTime(4096))
	}
	near(t, "PrefillTimeCached(P, P)", c.PrefillTimeCached(4096, 4096), c.PrefillOverhead, 0)

	// ITL with one token per step is DecodeStep at the mean context.
	for _, po := range [][2]int{{1000, 101}, {32768, 256}, {10, 2}} {
		p, o := po[0], po[1]
		want := float64(c.DecodeBase+c.DecodePerSeq) + float64(c.DecodePerKVToken)*(float64(p)+float64(o)/2)
		near(t, "ITL", c.ITL(1, p, o), time.Duration(math.Round(want)), 2*time.Nanosecond)
	}
	// Multi-token steps: 10 tokens at 3 per step after the first = 3 steps.
	m := c
	m.TokensPerStep = 3
	wantDT := m.DecodeStep(1, 101) + m.DecodeStep(1, 104) + m.DecodeStep(1, 107)
	near(t, "DecodeTime MTP", m.DecodeTime(1, 100, 10), wantDT, 0)
	// Throughput and TimeScale.
	tp := c.SteadyThroughput(8, 2000)
	if want := 8 / c.DecodeStep(8, 16000).Seconds(); math.Abs(tp-want) > 1e-9*want {
		t.Errorf("SteadyThroughput = %v, want %v", tp, want)
	}
	fast := c
	fast.TimeScale = 0.1
	near(t, "scaled DecodeStep", fast.DecodeStep(4, 5000), c.DecodeStep(4, 5000)/10, time.Nanosecond)
	near(t, "scaled PrefillTime", fast.PrefillTime(5000), c.PrefillTime(5000)/10, time.Nanosecond)
}

func TestCountTokens(t *testing.T) {
	tests := []struct {
		text string
		want int
	}{
		{"", 0},
		{"a", 1},
		{"the", 1},
		{"data", 1},
		{"model", 2},
		{"calibration", 3},
		{"Hello, world!", 6},    // Hell o , worl d !
		{"12345", 5},            // digits one each
		{"a\nb", 3},             // newline is a token
		{"  spaced   out  ", 3}, // spac ed out: spaces are free
		{"café", 1},             // letters, not bytes
		{"日本語のテキスト", 2},         // 8 letters
		{"x=1;", 4},
	}
	for _, tt := range tests {
		if got := CountTokens(tt.text); got != tt.want {
			t.Errorf("CountTokens(%q) = %d, want %d", tt.text, got, tt.want)
		}
		if ids := tokenize(nil, tt.text); len(ids) != tt.want {
			t.Errorf("len(tokenize(%q)) = %d, want %d", tt.text, len(ids), tt.want)
		}
	}
	// Ids are stable and depend on the leading space.
	a, b := tokenize(nil, "word word"), tokenize(nil, "word")
	if a[0] != b[0] || a[1] == a[0] {
		t.Errorf("ids %v / %v: want the same id for the same piece and a different one after a space", a, b)
	}
	// Not one token per word.
	if n := CountTokens("Performance evaluation of inference servers"); n == 5 {
		t.Errorf("CountTokens gives one token per word (%d); calibration would be pointless", n)
	}
}

func TestChatPromptTokens(t *testing.T) {
	c := DefaultConfig()
	msgs := []ChatMessage{{Role: "user", Content: "hello there"}}
	// <|im_start|> user \n hell o ther e <|im_end|> \n  + <|im_start|> assi stan t \n
	if got, want := c.ChatPromptTokens(msgs), 4+1+4+5; got != want {
		t.Errorf("ChatPromptTokens = %d, want %d", got, want)
	}
	c.DefaultSystemPrompt = "Be brief."
	if got, want := c.ChatPromptTokens(msgs), 4+2+CountTokens("Be brief.")+4+1+4+5; got != want {
		t.Errorf("with default system prompt: %d, want %d", got, want)
	}
}

func TestLargePromptTokenizesFast(t *testing.T) {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 10000) // ~190K tokens
	start := time.Now()
	ids := tokenize(nil, text)
	hashes := blockHashes(ids, "salt")
	// A bound against a quadratic tokenizer (minutes), not a benchmark: about 0.2 s on an idle core,
	// 0.5 s under -race beside the other tests.
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("tokenizing %d tokens took %v", len(ids), el)
	}
	if len(ids) != CountTokens(text) || len(hashes) != len(ids)/BlockSize {
		t.Errorf("tokens %d, count %d, blocks %d", len(ids), CountTokens(text), len(hashes))
	}
}

func TestOutputTextRetokenizes(t *testing.T) {
	g := newTextGen(7, 3)
	var b strings.Builder
	for range 1000 {
		b.WriteString(g.next())
	}
	if n := CountTokens(b.String()); n != 1000 {
		t.Errorf("1000 output tokens re-tokenize to %d", n)
	}
	if !strings.Contains(b.String(), ". ") || strings.HasPrefix(b.String(), " ") {
		t.Errorf("output does not look like sentences: %.80q", b.String())
	}
}

func TestConfigYAML(t *testing.T) {
	doc := `
model_name: my-model
max_model_len: 32768
max_num_seqs: 8
max_num_batched_tokens: 4096
kv_cache_tokens: 65536
enable_prefix_caching: false
prefill_overhead: 15ms
prefill_tokens_per_second: 25000
prefill_quadratic: 100us
decode_base: 5ms
decode_per_seq: 200us
decode_per_kv_token: 20ns
tokens_per_step: 2
time_scale: 0.5
eos_mean_tokens: 0
reasoning_tokens: 16
reasoning_field: reasoning
default_system_prompt: You are helpful.
role_chunk_early: false
enable_prompt_tokens_details: false
legacy_metric_names: true
seed: 42
trace_capacity: 100
faults:
  rate: 0.1
  error_status: 503
  error_event_after_tokens: 5
  cut_after_tokens: 6
  stall_after_tokens: 7
  stall_for: 2s
  omit_usage: true
  malformed_chunk_after_tokens: 8
`
	cfg := DefaultConfig()
	dec := yaml.NewDecoder(strings.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	want := Config{
		ModelName: "my-model", ModelRoot: DefaultConfig().ModelRoot, MaxModelLen: 32768, MaxNumSeqs: 8,
		MaxNumBatchedTokens: 4096, KVCacheTokens: 65536, PrefillOverhead: 15 * time.Millisecond,
		PrefillTokensPerSecond: 25000, PrefillQuadratic: 100 * time.Microsecond, DecodeBase: 5 * time.Millisecond,
		DecodePerSeq: 200 * time.Microsecond, DecodePerKVToken: 20 * time.Nanosecond, TokensPerStep: 2, TimeScale: 0.5,
		ReasoningTokens: 16, ReasoningField: "reasoning", DefaultSystemPrompt: "You are helpful.",
		LegacyMetricNames: true, Seed: 42, TraceCapacity: 100,
		Faults: Faults{Rate: 0.1, ErrorStatus: 503, ErrorEventAfterTokens: 5, CutAfterTokens: 6, StallAfterTokens: 7,
			StallFor: 2 * time.Second, OmitUsage: true, MalformedChunkAfterTokens: 8},
	}
	if cfg != want {
		t.Errorf("decoded\n%+v\nwant\n%+v", cfg, want)
	}
}

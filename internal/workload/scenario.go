package workload

import (
	"fmt"
	"time"

	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"github.com/slaprobe/slaprobe/prober"
)

// Config is a scenario's workload: section, a trace as a probe shape.
type Config struct {
	Spec `yaml:",inline"`
	// Seed seeds the draws (and the sample kept of a large trace); 0 means
	// prober.DefaultSeed(the scenario's name), so every run draws alike.
	Seed  uint64 `yaml:"seed,omitempty"`
	Order Order  `yaml:"order,omitempty"` // random (default) or sequential
	// OverContext is what a request longer than max_context becomes: clip
	// (default) or skip.
	OverContext Over `yaml:"over_context,omitempty"`
	// MaxContext is the model's context in tokens; 0 takes no limit here
	// (the server refuses what does not fit: a failed probe).
	MaxContext int `yaml:"max_context,omitempty"`
	// MinInput is the shortest prompt probed; default 64 (the probe's own
	// nonce, instruction and chat template take about 40).
	MinInput int `yaml:"min_input_tokens,omitempty"`
	// Keep bounds the requests kept of a large trace; default DefaultKeep.
	Keep int `yaml:"keep,omitempty"`
	// Sharing: false gives every probe its own salt, so no probe shares a
	// block with another (for comparison). Default true.
	Sharing *bool `yaml:"sharing,omitempty"`
	// TTFTByClass are the TTFT thresholds per length class (1k, 4k, 16k,
	// 32k, 96k); a class left out gets DefaultClassTTFT's.
	TTFTByClass map[string]model.Duration `yaml:"ttft_by_class,omitempty"`
	// Live draws from the engine's own length mix instead of a trace
	// (`workload: live` is short for `workload: {live: {}}`).
	Live *LiveConfig `yaml:"live,omitempty"`
}

// LiveConfig is workload.live: the engine's length mix of the last window.
type LiveConfig struct {
	// Window is how far back the mix reaches; default 15m.
	Window model.Duration `yaml:"window,omitempty"`
}

// UnmarshalYAML reads `live` as a live workload, and a mapping as usual.
func (c *Config) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind == yaml.ScalarNode {
		if node.Value != "live" {
			return fmt.Errorf("line %d: workload=%q; expected live, or a mapping naming a trace (trace: FILE, format: …)", node.Line, node.Value)
		}
		*c = Config{Live: &LiveConfig{}}
		return nil
	}
	type plain Config
	return node.Decode((*plain)(c))
}

// LiveBudgetInput and LiveBudgetOutput are what a live scenario's probe is
// counted at in the token budget when the scenario sets no input_tokens and
// output_tokens: the live mix is not known when the config is read.
const (
	LiveBudgetInput  = 4096
	LiveBudgetOutput = 256
)

// DefaultMinInput is Config.MinInput's default.
const DefaultMinInput = 64

// Shape is a loaded workload: the prober.Shaper of a scenario.
type Shape struct {
	cfg     Config
	sampler *Sampler
	summary Summary
	salt    string
	ttft    ClassTTFT
	live    *LiveShape // a live workload: no trace
}

// Load reads the trace of cfg for scenario name (in one pass: the requests
// kept and the summary), or readies a live workload.
func Load(name string, cfg Config) (*Shape, error) {
	if cfg.Live != nil {
		if cfg.Spec.Path != "" || cfg.Spec.Format != "" {
			return nil, fmt.Errorf("workload: live with trace=%q; expected one of them", cfg.Spec.Path)
		}
		if cfg.Live.Window < 0 {
			return nil, fmt.Errorf("workload: live.window=%s; expected a positive duration", cfg.Live.Window)
		}
		ttft, seed, minIn, err := cfg.defaults(name)
		if err != nil {
			return nil, err
		}
		live := &Live{Window: time.Duration(cfg.Live.Window), Seed: seed}
		return &Shape{cfg: cfg, ttft: ttft, live: &LiveShape{Live: live, MinInput: minIn, MaxInput: cfg.MaxContext / 2}}, nil
	}
	if err := cfg.Spec.Validate(); err != nil {
		return nil, err
	}
	switch cfg.Order {
	case "", OrderRandom, OrderSequential:
	default:
		return nil, fmt.Errorf("workload: order=%q; expected random or sequential", cfg.Order)
	}
	switch cfg.OverContext {
	case "", OverClip, OverSkip:
	default:
		return nil, fmt.Errorf("workload: over_context=%q; expected clip or skip", cfg.OverContext)
	}
	if cfg.MaxContext < 0 || cfg.MinInput < 0 || cfg.Keep < 0 {
		return nil, fmt.Errorf("workload: max_context=%d min_input_tokens=%d keep=%d; expected counts >= 0", cfg.MaxContext, cfg.MinInput, cfg.Keep)
	}
	ttft, seed, minIn, err := cfg.defaults(name)
	if err != nil {
		return nil, err
	}
	s, sum, err := LoadSamplerSummary(cfg.Spec, SamplerOptions{Seed: seed, Order: cfg.Order, MaxContext: cfg.MaxContext,
		Over: cfg.OverContext, MinInput: minIn, Keep: cfg.Keep, BlockTokens: cfg.Spec.Block()})
	if err != nil {
		return nil, err
	}
	return &Shape{cfg: cfg, sampler: s, summary: sum, salt: NewSalt(), ttft: ttft}, nil
}

// defaults resolves what a trace and a live workload share: the TTFT
// threshold of each length class (the defaults, then the config's), the
// seed (from the scenario's name when unset) and the shortest prompt.
func (cfg Config) defaults(name string) (ClassTTFT, uint64, int, error) {
	ttft := ClassTTFT{}
	for k, v := range DefaultClassTTFT {
		ttft[k] = v
	}
	for k, v := range cfg.TTFTByClass {
		ttft[k] = time.Duration(v)
	}
	if err := ttft.Validate(); err != nil {
		return nil, 0, 0, err
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = prober.DefaultSeed(name)
	}
	minIn := cfg.MinInput
	if minIn == 0 {
		minIn = DefaultMinInput
	}
	return ttft, seed, minIn, nil
}

// Next draws one probe (the same draws whatever the target): prober.Shaper.
func (s *Shape) Next(t prober.Target) (prober.SharedPrefix, string, error) {
	if s.live != nil {
		return s.live.Next(t)
	}
	d, err := s.sampler.Next()
	if err != nil {
		return prober.SharedPrefix{}, "", err
	}
	salt := s.salt
	if s.cfg.Sharing != nil && !*s.cfg.Sharing {
		salt = NewSalt()
	}
	return ProbeOf(d, salt, s.cfg.Spec.Block()), d.Class.Name, nil
}

// Config is the workload: section it was loaded from.
func (s *Shape) Config() Config { return s.cfg }

// Summary is the trace's summary.
func (s *Shape) Summary() Summary { return s.summary }

// Counts are what the draws so far became (none for a live workload).
func (s *Shape) Counts() Counts {
	if s.sampler == nil {
		return Counts{}
	}
	return s.sampler.Counts()
}

// LiveWindow is how far back a live workload's mix reaches.
func (s *Shape) LiveWindow() time.Duration {
	if s.live == nil {
		return 0
	}
	return s.live.Live.window()
}

// IsLive reports whether the shape draws from the engine's live mix.
func (s *Shape) IsLive() bool { return s.live != nil }

// TTFT are the thresholds per length class.
func (s *Shape) TTFT() ClassTTFT { return s.ttft }

// MeanTokens are the mean prompt and answer of the kept requests, as sent
// (at least 1 and 2): a scenario's InputTokens and OutputTokens for the
// token budget.
func (s *Shape) MeanTokens() (in, out int) {
	if s.sampler == nil {
		return LiveBudgetInput, LiveBudgetOutput
	}
	var si, so int64
	for _, r := range s.sampler.reqs {
		si += int64(r.Input)
		so += int64(r.Output)
	}
	n := int64(len(s.sampler.reqs))
	return max(int(si/n), 1), max(int(so/n), 2)
}

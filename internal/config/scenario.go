package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"github.com/slaprobe/slaprobe/internal/workload"
	"github.com/slaprobe/slaprobe/prober"
)

// ScenarioConfig overrides a built-in scenario (any subset of fields) or
// defines a custom one (input_tokens and output_tokens required). Fields are
// pointers so that "absent" (keep the built-in value) differs from an
// explicit value.
type ScenarioConfig struct {
	Name         string            `yaml:"name"`
	Description  string            `yaml:"description,omitempty"`
	InputTokens  *int              `yaml:"input_tokens,omitempty"`
	OutputTokens *int              `yaml:"output_tokens,omitempty"`
	Interval     *model.Duration   `yaml:"interval,omitempty"`
	Timeout      *model.Duration   `yaml:"timeout,omitempty"`
	Thresholds   *ThresholdsConfig `yaml:"thresholds,omitempty"`
	// Conversation makes a custom scenario a conversation (input_tokens is
	// then the priming turn's prompt), or tunes a built-in conversation one.
	Conversation *ConversationConfig `yaml:"conversation,omitempty"`
	// Warm is the older name of Conversation, read as it for one release
	// (deprecated: Deprecations names it): a config may set one or the
	// other, not both. Never written.
	Warm *ConversationConfig `yaml:"warm,omitempty"`
	// API probes the scenario on this API whatever the target's: chat,
	// completions, responses or messages. Empty: the target's.
	API prober.API `yaml:"api,omitempty"`
	// Workload draws each probe from a request trace (docs/workloads.md):
	// input_tokens and output_tokens are then optional (the trace's means).
	Workload *workload.Config `yaml:"workload,omitempty"`
}

// ConversationConfig is a scenario's conversation section: the follow-up
// turns, each replaying the answer before it and adding new_tokens, sent
// with the priming turn's cache_salt. A warm: section is the same thing
// under its older name.
type ConversationConfig struct {
	// Turns counts the priming turn: 2 means one follow-up. Default 2.
	Turns *int `yaml:"turns,omitempty"`
	// NewTokens each follow-up adds after the replayed answer: a count
	// (2048) or a range drawn per follow-up ("1024-4096"). Required for a
	// custom scenario.
	NewTokens *NewTokens `yaml:"new_tokens,omitempty"`
	// Tools puts tool definitions in every request and sends the new tokens
	// as a tool result. Default false.
	Tools *bool `yaml:"tools,omitempty"`
	// Seed seeds the per-turn draws of new_tokens and think_time ranges. Default: derived
	// from the scenario's name, so every run draws alike.
	Seed *uint64 `yaml:"seed,omitempty"`
	// ThinkTime is the pause before each follow-up turn, from the end of
	// the answer before it: a duration ("15s") or a range drawn per turn
	// ("5s-1m"). Default 0s: the turns go back to back.
	ThinkTime *string `yaml:"think_time,omitempty"`
	// IDHeader is a request header that carries the conversation's id on
	// every turn, for a router with header affinity. Empty: none.
	IDHeader *string `yaml:"id_header,omitempty"`
}

// NewTokens is conversation.new_tokens: a whole number, or a range LOW-HIGH
// written as a string (1024-4096).
type NewTokens prober.IntRange

// UnmarshalYAML reads 2048 or 1024-4096; the error names the key, the value
// and the forms expected.
func (n *NewTokens) UnmarshalYAML(node *yaml.Node) error {
	bad := func(why string) error {
		return fmt.Errorf("line %d: conversation.new_tokens=%q: %s", node.Line, node.Value, why)
	}
	if node.Kind != yaml.ScalarNode {
		return bad("not a scalar; expected a whole number such as 2048 or LOW-HIGH such as 1024-4096")
	}
	var count int
	if node.Tag == "!!int" && node.Decode(&count) == nil {
		// Checked by Scenario.Validate, which names the scenario.
		*n = NewTokens{Min: count, Max: count}
		return nil
	}
	r, err := prober.ParseIntRange(node.Value)
	if err != nil {
		return bad(err.Error())
	}
	*n = NewTokens(r)
	return nil
}

// MarshalYAML writes a count as a number and a range as LOW-HIGH.
func (n NewTokens) MarshalYAML() (any, error) {
	if r := prober.IntRange(n); !r.Fixed() {
		return r.String(), nil
	}
	return n.Min, nil
}

// ThresholdsConfig are SLA limits. Each one set replaces the scenario's
// value; 0 removes that limit.
type ThresholdsConfig struct {
	TTFT      *model.Duration `yaml:"ttft,omitempty"`
	E2E       *model.Duration `yaml:"e2e,omitempty"`
	ITL       *model.Duration `yaml:"itl,omitempty"`
	MinDecode *float64        `yaml:"min_decode_tokens_per_second,omitempty"`
}

// customDefaults gives a custom scenario without interval or timeout the
// same cadence as the built-ins of its size: long prompts are expensive, so
// they are probed rarely and given time to prefill.
var customDefaults = []struct {
	maxInput          int
	interval, timeout time.Duration
}{
	{2048, 30 * time.Second, time.Minute},
	{8192, time.Minute, 90 * time.Second},
	{16384, 2 * time.Minute, 2 * time.Minute},
	{32768, 5 * time.Minute, 3 * time.Minute},
	{65536, 10 * time.Minute, 5 * time.Minute},
	{1 << 62, 15 * time.Minute, 6 * time.Minute},
}

// DefaultCadence returns the interval and timeout a custom scenario with
// this many input tokens gets when the config sets none.
func DefaultCadence(inputTokens int) (interval, timeout time.Duration) {
	for _, d := range customDefaults {
		if inputTokens <= d.maxInput {
			return d.interval, d.timeout
		}
	}
	last := customDefaults[len(customDefaults)-1]
	return last.interval, last.timeout
}

// resolveScenarios applies the overrides to the built-in catalog and
// appends the custom scenarios.
func (c *Config) resolveScenarios() error {
	c.resolved = prober.Builtin()
	c.deprecations = nil
	seen := make(map[string]bool, len(c.ScenarioConfigs))
	for i, sc := range c.ScenarioConfigs {
		where := fmt.Sprintf("scenarios[%d]", i)
		if sc.Name != "" {
			where = fmt.Sprintf("scenarios[%d] (%s)", i, sc.Name)
		}
		if sc.Name == "" {
			return fmt.Errorf("%s: name is empty; expected a short identifier such as %q", where, "my_case")
		}
		if !scenarioNameRE.MatchString(sc.Name) {
			return fmt.Errorf("%s: name=%q; expected letters, digits, '_', '.' or '-'", where, sc.Name)
		}
		if seen[sc.Name] {
			return fmt.Errorf("%s: scenario %q is defined twice", where, sc.Name)
		}
		seen[sc.Name] = true

		s, builtin := prober.LookupBuiltin(sc.Name)
		var shape *workload.Shape
		if sc.Workload != nil {
			if builtin {
				return fmt.Errorf("%s: workload is set on the built-in scenario %q; expected a new name for a trace-shaped scenario", where, sc.Name)
			}
			if sc.Conversation != nil || sc.Warm != nil {
				return fmt.Errorf("%s: workload and conversation are both set; expected one (a trace's requests are single turns)", where)
			}
			var err error
			if shape, err = workload.Load(sc.Name, *sc.Workload); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			in, out := shape.MeanTokens()
			if sc.InputTokens == nil {
				sc.InputTokens = &in
			}
			if sc.OutputTokens == nil {
				sc.OutputTokens = &out
			}
		}
		if !builtin {
			if sc.InputTokens == nil || sc.OutputTokens == nil {
				return fmt.Errorf("%s: input_tokens and output_tokens are required for a custom scenario (%q is not built in; built-in names: %s)",
					where, sc.Name, strings.Join(prober.BuiltinNames(), ", "))
			}
			s = prober.Scenario{Name: sc.Name, Family: prober.FamilyCustom}
			s.Interval, s.Timeout = DefaultCadence(*sc.InputTokens)
		}
		fromWarm := sc.Warm != nil
		if fromWarm {
			if sc.Conversation != nil {
				return fmt.Errorf("%s: both warm and conversation are set; expected conversation only (warm is its older name)", where)
			}
			sc.Conversation, sc.Warm = sc.Warm, nil
			c.deprecations = append(c.deprecations, fmt.Sprintf(
				"%s: warm is deprecated, the older name of conversation; rename the key to conversation (warm is read as it for one release)", where))
		}
		if sc.Conversation != nil {
			key := "conversation" // the key as the file spells it
			if fromWarm {
				key = "warm"
			}
			switch {
			case builtin && !s.IsConversation():
				return fmt.Errorf("%s: %s is set on the cold built-in scenario %q; expected a new name for a conversation variant (built-in conversation scenarios: %s)",
					where, key, sc.Name, strings.Join(conversationBuiltinNames(), ", "))
			case !builtin && sc.Conversation.NewTokens == nil:
				return fmt.Errorf("%s: %s.new_tokens is missing; expected the tokens each follow-up turn adds, e.g. 1024", where, key)
			case !builtin:
				s.Conversation.Turns = 2
			}
		}
		sc.apply(&s)
		if shape != nil {
			s.Shape = shape
		}
		if cv := sc.Conversation; cv != nil && cv.ThinkTime != nil {
			key := "conversation"
			if fromWarm {
				key = "warm"
			}
			tt, err := ParseThinkTime(*cv.ThinkTime)
			if err != nil {
				return fmt.Errorf("%s: %s.think_time=%q: %w", where, key, *cv.ThinkTime, err)
			}
			s.Conversation.ThinkTime = tt
		}
		err := s.Validate()
		if err == nil {
			err = checkTokenBounds(s)
		}
		if err != nil {
			if fromWarm {
				return fmt.Errorf("scenarios[%d]: %w (read from warm:, the older name of conversation:)", i, err)
			}
			return fmt.Errorf("scenarios[%d]: %w", i, err)
		}
		if builtin {
			for j := range c.resolved {
				if c.resolved[j].Name == s.Name {
					c.resolved[j] = s
				}
			}
		} else {
			c.resolved = append(c.resolved, s)
		}
	}
	return nil
}

// ParseThinkTime reads conversation.think_time: a duration ("15s", "0s")
// or a range "lo-hi" ("5s-1m"), each side a Prometheus duration. The bounds
// (lo <= hi, at most prober.MaxThinkTime) are Scenario.Validate's.
func ParseThinkTime(text string) (prober.ThinkTime, error) {
	loText, hiText, isRange := strings.Cut(strings.TrimSpace(text), "-")
	lo, err := model.ParseDuration(strings.TrimSpace(loText))
	if err != nil {
		return prober.ThinkTime{}, errThinkTimeSyntax
	}
	hi := lo
	if isRange {
		if hi, err = model.ParseDuration(strings.TrimSpace(hiText)); err != nil {
			return prober.ThinkTime{}, errThinkTimeSyntax
		}
	}
	return prober.ThinkTime{Min: time.Duration(lo), Max: time.Duration(hi)}, nil
}

var errThinkTimeSyntax = errors.New(`expected a duration such as "15s", or a range drawn per turn such as "5s-1m"`)

// apply writes the fields that are set onto s.
func (sc ScenarioConfig) apply(s *prober.Scenario) {
	if sc.Description != "" {
		s.Description = sc.Description
	}
	if sc.API != "" {
		s.API = sc.API
	}
	if sc.InputTokens != nil {
		s.InputTokens = *sc.InputTokens
	}
	if sc.OutputTokens != nil {
		s.OutputTokens = *sc.OutputTokens
	}
	if sc.Interval != nil {
		s.Interval = time.Duration(*sc.Interval)
	}
	if sc.Timeout != nil {
		s.Timeout = time.Duration(*sc.Timeout)
	}
	if cv := sc.Conversation; cv != nil {
		if cv.Turns != nil {
			s.Conversation.Turns = *cv.Turns
		}
		if cv.NewTokens != nil {
			s.Conversation.NewTokens, s.Conversation.NewTokensMax = cv.NewTokens.Min, 0
			if r := prober.IntRange(*cv.NewTokens); !r.Fixed() {
				s.Conversation.NewTokensMax = r.Max
			}
		}
		if cv.Tools != nil {
			s.Conversation.Tools = *cv.Tools
		}
		if cv.Seed != nil {
			s.Conversation.Seed = *cv.Seed
		}
		if cv.IDHeader != nil {
			s.Conversation.IDHeader = *cv.IDHeader
		}
	}
	if t := sc.Thresholds; t != nil {
		if t.TTFT != nil {
			s.Thresholds.TTFT = time.Duration(*t.TTFT)
		}
		if t.E2E != nil {
			s.Thresholds.E2E = time.Duration(*t.E2E)
		}
		if t.ITL != nil {
			s.Thresholds.ITL = time.Duration(*t.ITL)
		}
		if t.MinDecode != nil {
			s.Thresholds.MinDecode = *t.MinDecode
		}
	}
}

// scenarioConfigOf writes every field of s, for printing the effective
// config. Every threshold is written, 0 meaning "no limit", so that the
// printout loads back to the same scenario.
func scenarioConfigOf(s prober.Scenario) ScenarioConfig {
	in, out := s.InputTokens, s.OutputTokens
	iv, to := model.Duration(s.Interval), model.Duration(s.Timeout)
	ttft, e2e, itl := model.Duration(s.Thresholds.TTFT), model.Duration(s.Thresholds.E2E), model.Duration(s.Thresholds.ITL)
	dec := s.Thresholds.MinDecode
	sc := ScenarioConfig{
		Name: s.Name, Description: s.Description,
		InputTokens: &in, OutputTokens: &out, Interval: &iv, Timeout: &to,
		Thresholds: &ThresholdsConfig{TTFT: &ttft, E2E: &e2e, ITL: &itl, MinDecode: &dec},
	}
	if sh, ok := s.Shape.(*workload.Shape); ok {
		wc := sh.Config()
		sc.Workload = &wc
	}
	if s.IsConversation() {
		turns, h := s.Conversation.Turns, s.Conversation.IDHeader
		nt := NewTokens(s.Conversation.NewTokenRange())
		sc.Conversation = &ConversationConfig{Turns: &turns, NewTokens: &nt}
		if h != "" {
			sc.Conversation.IDHeader = &h
		}
		if s.Conversation.Tools {
			tools := true
			sc.Conversation.Tools = &tools
		}
		if seed := s.Conversation.Seed; seed != 0 {
			sc.Conversation.Seed = &seed
		}
		if tt := s.Conversation.ThinkTime; tt != (prober.ThinkTime{}) {
			text := tt.String()
			sc.Conversation.ThinkTime = &text
		}
	}
	return sc
}

// conversationBuiltinNames lists the built-in conversation scenarios.
func conversationBuiltinNames() []string {
	var out []string
	for _, s := range prober.Builtin() {
		if s.IsConversation() {
			out = append(out, s.Name)
		}
	}
	return out
}

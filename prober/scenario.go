package prober

// This file holds the scenarios (the built-in catalog and its families) and their
// thresholds.

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Family groups scenarios by the benchmark style they come from.
type Family string

const (
	// FamilyReport holds output constant so differences come from context length.
	FamilyReport Family = "report"
	// FamilyUseCase judges capacity against user-experience thresholds.
	FamilyUseCase Family = "use_case"
	// FamilyCustom is a scenario defined in the config file.
	FamilyCustom Family = "custom"
)

// Thresholds are the SLA limits a scenario is judged by. A zero value means
// "no limit on this metric".
type Thresholds struct {
	TTFT      time.Duration // time to first token must be <= TTFT
	E2E       time.Duration // end-to-end latency must be <= E2E
	ITL       time.Duration // mean inter-token latency must be <= ITL
	MinDecode float64       // per-user decode speed must be >= MinDecode tokens/s
}

// thresholdsJSON is Thresholds in base units: the form report.json and the
// sweep state keep.
type thresholdsJSON struct {
	TTFT      float64 `json:"ttft_seconds,omitempty"`
	E2E       float64 `json:"e2e_seconds,omitempty"`
	ITL       float64 `json:"itl_seconds,omitempty"`
	MinDecode float64 `json:"min_decode_tokens_per_second,omitempty"`
}

// MarshalJSON writes the thresholds in seconds and tokens per second;
// unset ones are omitted.
func (t Thresholds) MarshalJSON() ([]byte, error) {
	return json.Marshal(thresholdsJSON{TTFT: t.TTFT.Seconds(), E2E: t.E2E.Seconds(), ITL: t.ITL.Seconds(), MinDecode: t.MinDecode})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (t *Thresholds) UnmarshalJSON(b []byte) error {
	var j thresholdsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	sec := func(v float64) time.Duration { return time.Duration(math.Round(v * float64(time.Second))) }
	*t = Thresholds{TTFT: sec(j.TTFT), E2E: sec(j.E2E), ITL: sec(j.ITL), MinDecode: j.MinDecode}
	return nil
}

// Any reports whether at least one threshold is set.
func (t Thresholds) Any() bool { return t.TTFT > 0 || t.E2E > 0 || t.ITL > 0 || t.MinDecode > 0 }

// ThresholdMetric names one threshold, as exported in the
// slaprobe_sla_threshold{metric} label. Values are in base units.
type ThresholdMetric struct {
	Metric string
	Value  float64
}

// Metrics lists the thresholds that are set, in a stable order.
func (t Thresholds) Metrics() []ThresholdMetric {
	var out []ThresholdMetric
	if t.TTFT > 0 {
		out = append(out, ThresholdMetric{"ttft_seconds", t.TTFT.Seconds()})
	}
	if t.ITL > 0 {
		out = append(out, ThresholdMetric{"itl_seconds", t.ITL.Seconds()})
	}
	if t.E2E > 0 {
		out = append(out, ThresholdMetric{"e2e_latency_seconds", t.E2E.Seconds()})
	}
	if t.MinDecode > 0 {
		out = append(out, ThresholdMetric{"decode_tokens_per_second", t.MinDecode})
	}
	return out
}

// Scenario is one synthetic workload shape.
type Scenario struct {
	Name         string
	Family       Family
	Description  string
	InputTokens  int           // prompt length as the server counts it, chat template included
	OutputTokens int           // exact number of generated tokens forced per probe
	Interval     time.Duration // mean time between probes of this scenario on one target
	Timeout      time.Duration // a probe that has not finished by then fails with reason "timeout"
	Thresholds   Thresholds
	// Conversation makes the scenario a conversation on one context
	// (Conversation.Turns >= 2): InputTokens is then the first, priming turn's
	// prompt, and each follow-up adds the answer before it and
	// Conversation.NewTokens. The zero value is a cold scenario.
	Conversation Conversation
	// API, when set, is the API this scenario is probed on, whatever the
	// target's: one target can be probed on several APIs at once.
	API API
	// Shape, when set, draws each probe's lengths and shared prompt blocks
	// (a request trace: internal/workload); InputTokens and OutputTokens are
	// then the trace's means, which the token budget counts.
	Shape Shaper
}

// APIOn is the API s is probed on when sent to t: its own, else the target's.
func (s Scenario) APIOn(t Target) API {
	if s.API != "" {
		return s.API
	}
	return t.API
}

// Conversation describes a conversation scenario: one probe is a
// conversation whose first turn primes the server's prefix cache and whose
// follow-ups, sent with the same cache_salt and prompt prefix, are the
// measurement. A warm scenario (the config's older warm: section) is a
// conversation of two turns.
type Conversation struct {
	Turns int // turns per conversation, priming turn included; 0 for cold scenarios, else 2 to MaxConversationTurns
	// NewTokens is what each follow-up adds after replaying the answer
	// before it: a fixed count, or with NewTokensMax > NewTokens a range
	// drawn per follow-up turn (see NewTokenRange).
	NewTokens    int
	NewTokensMax int // upper bound of the range; 0 (or NewTokens) for a fixed count
	// Tools puts tool definitions in every request and sends each
	// follow-up's new tokens as the result of a tool call the replayed answer
	// made (conversation.go).
	Tools bool
	// Seed seeds the per-turn draws (NewTokens and ThinkTime ranges); 0 means
	// DefaultSeed(the scenario's name).
	Seed uint64
	// ThinkTime is the pause from the end of one turn's answer to the next
	// turn's request (a tool running, a user reading): fixed, or drawn per
	// turn from a range. The zero value sends the turns back to back.
	ThinkTime ThinkTime
	// IDHeader, when set, is a request header every turn of a conversation
	// carries with the conversation's own id, for a router that keeps a
	// session on one replica by a header.
	IDHeader string
}

// ThinkTime is a conversation's pause before each follow-up turn: Min when
// Min == Max, else a uniform draw in [Min, Max], per turn, from the
// conversation's own seeded generator (Draw.ThinkTime).
type ThinkTime struct{ Min, Max time.Duration }

// MaxThinkTime bounds a think time: the longest pause of an agent's tool
// call worth modelling; a conversation holds its scheduler loop throughout.
const MaxThinkTime = 10 * time.Minute

// Fixed reports whether every turn waits the same time.
func (tt ThinkTime) Fixed() bool { return tt.Min == tt.Max }

// Mean is the expected pause per follow-up turn.
func (tt ThinkTime) Mean() time.Duration { return tt.Min + (tt.Max-tt.Min)/2 }

// String is the config's spelling: "15s", or "5s-1m" for a range; "0s" for none.
func (tt ThinkTime) String() string {
	if tt.Fixed() {
		return durationText(tt.Min)
	}
	return durationText(tt.Min) + "-" + durationText(tt.Max)
}

// durationText writes d as the config does: "90s" as "1m30s", "60s" as "1m".
func durationText(d time.Duration) string {
	t := d.String()
	if strings.HasSuffix(t, "m0s") {
		t = t[:len(t)-2]
	}
	if strings.HasSuffix(t, "h0m") {
		t = t[:len(t)-2]
	}
	return t
}

// IsConversation reports whether s is a conversation (warm-context) scenario.
func (s Scenario) IsConversation() bool { return s.Conversation.Turns > 0 }

// Turns is the number of requests one probe of s sends: 1 for a cold scenario.
func (s Scenario) Turns() int { return max(s.Conversation.Turns, 1) }

// NewTokenRange is the new tokens a follow-up adds: fixed, or the range
// each follow-up draws from.
func (c Conversation) NewTokenRange() IntRange {
	return IntRange{Min: c.NewTokens, Max: max(c.NewTokens, c.NewTokensMax)}
}

// ConversationSeed is the seed of s's per-turn draws: Conversation.Seed, else
// DefaultSeed(s.Name).
func (s Scenario) ConversationSeed() uint64 {
	if s.Conversation.Seed != 0 {
		return s.Conversation.Seed
	}
	return DefaultSeed(s.Name)
}

// TurnInputTokens is about the longest prompt of turn k (1-based):
// InputTokens for the priming turn, plus for each follow-up before it the
// replayed answer (OutputTokens) and the most new tokens it may add. The
// chat template's few tokens per message come on top; the exact length of
// each turn is derived as it is sent (Result.WantPromptTokens).
func (s Scenario) TurnInputTokens(k int) int {
	return s.InputTokens + max(k-1, 0)*(s.Conversation.NewTokenRange().Max+s.OutputTokens)
}

// ThinkTotal is the expected time one conversation of s spends thinking:
// the mean think time before each follow-up turn.
func (s Scenario) ThinkTotal() time.Duration {
	return time.Duration(max(s.Turns()-1, 0)) * s.Conversation.ThinkTime.Mean()
}

// Cycle is the expected time from the start of one probe of s to the start
// of the next on one target, turns' own latencies left out: the interval,
// counted from the end of a probe, plus the conversation's think time.
func (s Scenario) Cycle() time.Duration { return s.Interval + s.ThinkTotal() }

// MaxInputTokens is the longest prompt one probe of s sends (the last turn's).
func (s Scenario) MaxInputTokens() int { return s.TurnInputTokens(s.Turns()) }

// TokensPerProbe is the prompt plus output tokens one probe of s costs, every
// turn included (new tokens drawn from a range count at its mean).
func (s Scenario) TokensPerProbe() int {
	r := s.Conversation.NewTokenRange()
	step := (r.Min+r.Max)/2 + s.OutputTokens
	n := 0
	for k := 1; k <= s.Turns(); k++ {
		n += s.InputTokens + (k-1)*step + s.OutputTokens
	}
	return n
}

// Validate reports the first problem with s, naming the field and value.
func (s Scenario) Validate() error {
	switch {
	case s.Name == "":
		return fmt.Errorf("scenario: name is empty; expected a short identifier such as %q", "chatbot")
	case s.InputTokens < 1:
		return fmt.Errorf("scenario %q: input_tokens=%d; expected a positive token count", s.Name, s.InputTokens)
	case s.OutputTokens < 2:
		return fmt.Errorf("scenario %q: output_tokens=%d; expected at least 2 (decode speed needs two tokens)", s.Name, s.OutputTokens)
	case s.Interval <= 0:
		return fmt.Errorf("scenario %q: interval=%s; expected a positive duration", s.Name, s.Interval)
	case s.API != "" && !s.API.Valid():
		return fmt.Errorf("scenario %q: api=%q; expected %s", s.Name, s.API, APIList())
	case s.Timeout <= 0:
		return fmt.Errorf("scenario %q: timeout=%s; expected a positive duration", s.Name, s.Timeout)
	case s.Thresholds.TTFT < 0 || s.Thresholds.E2E < 0 || s.Thresholds.ITL < 0 || s.Thresholds.MinDecode < 0:
		return fmt.Errorf("scenario %q: thresholds must not be negative", s.Name)
	case s.Conversation.Turns < 0 || s.Conversation.Turns == 1 || s.Conversation.Turns > MaxConversationTurns:
		return fmt.Errorf("scenario %q: conversation.turns=%d; expected 2 to %d (the priming turn and at least one follow-up)",
			s.Name, s.Conversation.Turns, MaxConversationTurns)
	case s.IsConversation() && s.Conversation.NewTokens < 1:
		return fmt.Errorf("scenario %q: conversation.new_tokens=%d; expected a positive token count per follow-up turn", s.Name, s.Conversation.NewTokens)
	case s.Conversation.NewTokensMax != 0 && s.Conversation.NewTokensMax <= s.Conversation.NewTokens:
		return fmt.Errorf("scenario %q: conversation.new_tokens=%d-%d; expected a range LOW-HIGH with 0 < LOW < HIGH, such as 1024-4096",
			s.Name, s.Conversation.NewTokens, s.Conversation.NewTokensMax)
	case s.Conversation.Tools && s.API != "" && !apiHasTools(s.API):
		return fmt.Errorf("scenario %q: conversation.tools=true with api=%s; expected %s (a %s prompt has no tool calls)", s.Name, s.API, toolAPIList(), s.API)
	case !s.IsConversation() && (s.Conversation.Tools || s.Conversation.Seed != 0 || s.Conversation.NewTokensMax != 0):
		return fmt.Errorf("scenario %q: conversation.tools, seed or a new_tokens range with conversation.turns=0; expected conversation.turns of 2 or more", s.Name)
	case s.Conversation.IDHeader != "" && !validHeaderName(s.Conversation.IDHeader):
		return fmt.Errorf("scenario %q: conversation.id_header=%q; expected an HTTP header name such as X-Session-Id (letters, digits and !#$%%&'*+-.^_`|~)",
			s.Name, s.Conversation.IDHeader)
	case s.Conversation.IDHeader != "" && !s.IsConversation():
		return fmt.Errorf("scenario %q: conversation.id_header=%q with conversation.turns=0; expected conversation.turns of 2 or more",
			s.Name, s.Conversation.IDHeader)
	case s.Conversation.ThinkTime.Min < 0 || s.Conversation.ThinkTime.Max < s.Conversation.ThinkTime.Min || s.Conversation.ThinkTime.Max > MaxThinkTime:
		return fmt.Errorf("scenario %q: conversation.think_time=%s; expected a duration from 0s to %s, or a range lo-hi with lo <= hi (\"5s-1m\")",
			s.Name, s.Conversation.ThinkTime, durationText(MaxThinkTime))
	case !s.IsConversation() && s.Conversation.ThinkTime != (ThinkTime{}):
		return fmt.Errorf("scenario %q: conversation.think_time=%s with conversation.turns=0; expected conversation.turns of 2 or more",
			s.Name, s.Conversation.ThinkTime)
	case !s.IsConversation() && s.Conversation.NewTokens != 0:
		return fmt.Errorf("scenario %q: conversation.new_tokens=%d with conversation.turns=0; expected conversation.turns of 2 or more",
			s.Name, s.Conversation.NewTokens)
	}
	return nil
}

// validHeaderName reports whether name is an HTTP header field name (an RFC
// 9110 token) that a request may set: not Host, which net/http takes from
// the URL.
func validHeaderName(name string) bool {
	if strings.EqualFold(name, "Host") {
		return false
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return name != ""
}

// MaxConversationTurns bounds a conversation: every turn re-sends the whole
// context, so a long conversation costs production a lot of prompt tokens
// (slaprobe_prober_planned_tokens_per_hour counts every turn).
const MaxConversationTurns = 64

// DefaultScenarios are probed when the config names none.
var DefaultScenarios = []string{"chatbot", "rag", "agentic", "tool_calling"}

// ReportThresholds are the report family's thresholds: max safe queue depth is judged at TTFT <= 3 s,
// and 70 ms ITL is the memory-bandwidth ceiling line of large MoE models.
var ReportThresholds = Thresholds{TTFT: 3 * time.Second, ITL: 70 * time.Millisecond}

// builtin is the catalog. Intervals and timeouts rise with context size so
// that long, expensive probes run rarely and have time to prefill.
var builtin = []Scenario{
	{Name: "chatbot", Family: FamilyReport, Description: "short chat turn", InputTokens: 1024, OutputTokens: 256,
		Interval: 30 * time.Second, Timeout: time.Minute, Thresholds: ReportThresholds},
	{Name: "rag", Family: FamilyReport, Description: "question plus retrieved chunks", InputTokens: 4096, OutputTokens: 256,
		Interval: time.Minute, Timeout: 90 * time.Second, Thresholds: ReportThresholds},
	{Name: "agentic", Family: FamilyReport, Description: "agent step with a long scratchpad", InputTokens: 16384, OutputTokens: 256,
		Interval: 2 * time.Minute, Timeout: 2 * time.Minute, Thresholds: ReportThresholds},
	{Name: "tool_calling", Family: FamilyReport, Description: "multi-step agent with tool schemas and results", InputTokens: 32768, OutputTokens: 256,
		Interval: 5 * time.Minute, Timeout: 3 * time.Minute, Thresholds: ReportThresholds},

	{Name: "code_completion", Family: FamilyUseCase, Description: "inline code completion", InputTokens: 1024, OutputTokens: 128,
		Interval: 30 * time.Second, Timeout: time.Minute, Thresholds: Thresholds{E2E: 2 * time.Second}},
	{Name: "short_chat", Family: FamilyUseCase, Description: "chat with a short history", InputTokens: 8192, OutputTokens: 1024,
		Interval: 2 * time.Minute, Timeout: 3 * time.Minute, Thresholds: Thresholds{TTFT: 10 * time.Second, MinDecode: 10}},
	{Name: "general_chat", Family: FamilyUseCase, Description: "chat with a long history", InputTokens: 32768, OutputTokens: 1024,
		Interval: 5 * time.Minute, Timeout: 4 * time.Minute, Thresholds: Thresholds{TTFT: 8 * time.Second, MinDecode: 15}},
	{Name: "long_document", Family: FamilyUseCase, Description: "question over a long document", InputTokens: 65536, OutputTokens: 1024,
		Interval: 10 * time.Minute, Timeout: 5 * time.Minute, Thresholds: Thresholds{TTFT: 12 * time.Second, MinDecode: 15}},
	{Name: "coding_assistant", Family: FamilyUseCase, Description: "coding agent over a large repository context", InputTokens: 98304, OutputTokens: 1024,
		Interval: 15 * time.Minute, Timeout: 6 * time.Minute, Thresholds: Thresholds{TTFT: 12 * time.Second, MinDecode: 20}},

	// Warm variants: a follow-up turn on the conversation of a use-case
	// scenario. With prefix caching only the 1K new tokens need prefill, so
	// the follow-up is judged by the TTFT of a short chat turn.
	{Name: "general_chat_followup", Family: FamilyUseCase, Description: "follow-up turn (1K new tokens) on a 32K chat history",
		InputTokens: 32768, OutputTokens: 1024, Conversation: Conversation{Turns: 2, NewTokens: 1024},
		Interval: 5 * time.Minute, Timeout: 4 * time.Minute, Thresholds: Thresholds{TTFT: 2 * time.Second, MinDecode: 15}},
	{Name: "long_document_followup", Family: FamilyUseCase, Description: "follow-up question (1K new tokens) on a 64K document",
		InputTokens: 65536, OutputTokens: 1024, Conversation: Conversation{Turns: 2, NewTokens: 1024},
		Interval: 10 * time.Minute, Timeout: 5 * time.Minute, Thresholds: Thresholds{TTFT: 3 * time.Second, MinDecode: 15}},

	// Agent conversations: many turns, each re-sending the history plus what
	// the tools returned, after the time the tools took. Follow-ups prefill
	// only what is new when the cache kept the conversation, so they are
	// judged as short prompts (docs/conversations.md, "Built-in agent scenarios").
	// Intervals count from a conversation's end: with its think time a
	// coding_agent conversation comes round about every 36 min, a
	// tool_calling_agent one about every 11 min.
	// Both send tool definitions and their new tokens as tool results.
	{Name: "coding_agent", Family: FamilyUseCase, Description: "coding agent: 12 turns on a 16K task, each adding 2K of tool output after 5-60 s of tool time",
		InputTokens: 16384, OutputTokens: 256,
		Conversation: Conversation{Turns: 12, NewTokens: 2048, Tools: true, ThinkTime: ThinkTime{Min: 5 * time.Second, Max: time.Minute}},
		Interval:     30 * time.Minute, Timeout: 3 * time.Minute, Thresholds: Thresholds{TTFT: 2 * time.Second, MinDecode: 20}},
	{Name: "tool_calling_agent", Family: FamilyUseCase, Description: "tool-calling agent: 8 short turns on 4K of tool schemas, each adding a 512-token tool result after 1-10 s",
		InputTokens: 4096, OutputTokens: 128,
		Conversation: Conversation{Turns: 8, NewTokens: 512, Tools: true, ThinkTime: ThinkTime{Min: time.Second, Max: 10 * time.Second}},
		Interval:     10 * time.Minute, Timeout: 90 * time.Second, Thresholds: Thresholds{E2E: 2 * time.Second}},
}

// Builtin returns a copy of the built-in scenario catalog, report family first.
func Builtin() []Scenario {
	out := make([]Scenario, len(builtin))
	copy(out, builtin)
	return out
}

// LookupBuiltin returns the built-in scenario with the given name.
func LookupBuiltin(name string) (Scenario, bool) {
	for _, s := range builtin {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// BuiltinNames lists the built-in scenario names, sorted.
func BuiltinNames() []string {
	names := make([]string, 0, len(builtin))
	for _, s := range builtin {
		names = append(names, s.Name)
	}
	sort.Strings(names)
	return names
}

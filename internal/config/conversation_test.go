package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/prober"
)

// TestConversationScenarioConfig reads a conversation section under its name and
// under its older one, warm:, to the same scenarios.
func TestConversationScenarioConfig(t *testing.T) {
	for _, key := range []string{"conversation", "warm"} {
		t.Run(key, func(t *testing.T) { testConversationConfig(t, key) })
	}
}

func testConversationConfig(t *testing.T, key string) {
	c, err := LoadBytes([]byte(strings.ReplaceAll(`
targets:
  - url: http://vllm:8000
    scenarios: [agent_followup, general_chat_followup]
scenarios:
  - name: agent_followup
    input_tokens: 16384
    output_tokens: 256
    KEY:
      turns: 40
      new_tokens: 512
      id_header: X-Session-Id
    thresholds:
      ttft: 1s
  - name: general_chat_followup
    KEY:
      new_tokens: 2048
`, "KEY", key)))
	if err != nil {
		t.Fatal(err)
	}
	// warm: loads, deprecated: one note per section that uses it, naming
	// the old key and its replacement; conversation: none.
	wantDep := []string(nil)
	if key == "warm" {
		wantDep = []string{
			"scenarios[0] (agent_followup): warm is deprecated, the older name of conversation; rename the key to conversation (warm is read as it for one release)",
			"scenarios[1] (general_chat_followup): warm is deprecated, the older name of conversation; rename the key to conversation (warm is read as it for one release)",
		}
	}
	if got := c.Deprecations(); !reflect.DeepEqual(got, wantDep) {
		t.Errorf("Deprecations() = %q, want %q", got, wantDep)
	}
	got := c.Scenarios("vllm:8000")
	if len(got) != 2 {
		t.Fatalf("scenarios %+v", got)
	}
	custom := c.lookup("agent_followup")
	interval, timeout := DefaultCadence(16384)
	want := prober.Scenario{Name: "agent_followup", Family: prober.FamilyCustom, InputTokens: 16384, OutputTokens: 256,
		Interval: interval, Timeout: timeout, Thresholds: prober.Thresholds{TTFT: time.Second},
		Conversation: prober.Conversation{Turns: 40, NewTokens: 512, IDHeader: "X-Session-Id"}}
	if !reflect.DeepEqual(*custom, want) {
		t.Errorf("custom warm scenario:\n got %+v\nwant %+v", *custom, want)
	}
	if b := c.lookup("general_chat_followup"); b.Conversation != (prober.Conversation{Turns: 2, NewTokens: 2048}) || b.InputTokens != 32768 {
		t.Errorf("tuned built-in: %+v", *b)
	}

	// The printed effective config says conversation: and loads back to the
	// same scenarios.
	if printed := c.Redacted(); strings.Contains(printed, "warm:") || !strings.Contains(printed, "conversation:") {
		t.Errorf("printed config must write conversation:, never warm:\n%s", printed)
	}
	again, err := LoadBytes([]byte(c.Redacted()))
	if err != nil {
		t.Fatalf("reload the printed config: %v\n%s", err, c.Redacted())
	}
	if !reflect.DeepEqual(again.AllScenarios(), c.AllScenarios()) {
		t.Errorf("printed config does not load back:\n%s", c.Redacted())
	}
	if d := again.Deprecations(); len(d) != 0 {
		t.Errorf("the printed config uses deprecated keys: %q", d)
	}
}

// TestConversationScenarioSwept: a conversation scenario can be swept (its
// steps hold N conversations in flight), with the hit share its capacity
// in conversations asks for.
func TestConversationScenarioSwept(t *testing.T) {
	c, err := LoadBytes([]byte(`
targets:
  - url: http://vllm:8000
sweep:
  scenarios: [general_chat_followup]
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Sweep.Options(nil).Capacity.HitShare; got != 0.9 {
		t.Errorf("default conversation hit share %g, want 0.9", got)
	}
	_, err = LoadBytes([]byte(`
targets:
  - url: http://vllm:8000
sweep:
  capacity: {conversation_hit_share: 1.5}
`))
	want := "sweep.capacity.conversation_hit_share=1.5; expected a share in (0, 1], e.g. 0.9"
	if err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("error %v, want …%s", err, want)
	}
}

// TestConversationNewTokensRange: new_tokens takes a count or a range,
// tools and seed are read, the printed config loads back to the same
// scenario, and a bad new_tokens names the key, the value and the forms.
func TestConversationNewTokensRange(t *testing.T) {
	c, err := LoadBytes([]byte(`
targets:
  - url: http://vllm:8000
    scenarios: [coding_agent]
scenarios:
  - name: coding_agent
    input_tokens: 16384
    output_tokens: 256
    conversation:
      turns: 12
      new_tokens: 1024-4096
      tools: true
      seed: 7
`))
	if err != nil {
		t.Fatal(err)
	}
	got := c.lookup("coding_agent").Conversation
	if want := (prober.Conversation{Turns: 12, NewTokens: 1024, NewTokensMax: 4096, Tools: true, Seed: 7,
		ThinkTime: prober.ThinkTime{Min: 5 * time.Second, Max: time.Minute}}); got != want { // the built-in's think time stays
		t.Errorf("conversation %+v, want %+v", got, want)
	}
	again, err := LoadBytes([]byte(c.Redacted()))
	if err != nil {
		t.Fatalf("reload the printed config: %v\n%s", err, c.Redacted())
	}
	if !reflect.DeepEqual(again.AllScenarios(), c.AllScenarios()) {
		t.Errorf("printed config does not load back:\n%s", c.Redacted())
	}
	if d := again.Deprecations(); len(d) != 0 {
		t.Errorf("the printed config uses deprecated keys: %q", d)
	}
	if !strings.Contains(c.Redacted(), "new_tokens: 1024-4096") {
		t.Errorf("printed config lacks the range:\n%s", c.Redacted())
	}

	for _, tc := range []struct{ value, want string }{
		{"4096-1024", `line 9: conversation.new_tokens="4096-1024": range "4096-1024" is empty or reversed; expected LOW-HIGH with LOW < HIGH, such as 1024-4096`},
		{"lots", `line 9: conversation.new_tokens="lots": "lots" is not a positive count or range; expected a whole number such as 2048 or LOW-HIGH such as 1024-4096`},
		{"0-100", `line 9: conversation.new_tokens="0-100": "0-100" is not a positive count or range; expected a whole number such as 2048 or LOW-HIGH such as 1024-4096`},
		{"0", `scenario "agent": conversation.new_tokens=0; expected a positive token count per follow-up turn`},
	} {
		_, err := LoadBytes([]byte(`
targets:
  - url: http://vllm:8000
scenarios:
  - name: agent
    input_tokens: 1024
    output_tokens: 64
    conversation:
      new_tokens: ` + tc.value + "\n"))
		if err == nil || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("new_tokens: %s: error\n got %v\nwant …%s", tc.value, err, tc.want)
		}
	}
	_, err = LoadBytes([]byte(`
targets:
  - url: http://vllm:8000
scenarios:
  - name: agent
    api: completions
    input_tokens: 1024
    output_tokens: 64
    conversation: {new_tokens: 512, tools: true}
`))
	if want := `conversation.tools=true with api=completions; expected chat, responses or messages (a completions prompt has no tool calls)`; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("tools on completions: error %v, want …%s", err, want)
	}
}

// TestConversationThinkTime reads conversation.think_time as a duration or a
// range, prints it back as it loads, and rejects what is not one with an
// error naming the field, the value and the form expected.
func TestConversationThinkTime(t *testing.T) {
	const cfg = `
targets:
  - url: http://vllm:8000
scenarios:
  - name: agent
    input_tokens: 4096
    output_tokens: 256
    conversation:
      turns: 4
      new_tokens: 512
      think_time: THINK
`
	for _, tc := range []struct {
		text    string
		want    prober.ThinkTime
		wantErr string
	}{
		{"15s", prober.ThinkTime{Min: 15 * time.Second, Max: 15 * time.Second}, ""},
		{"5s-1m", prober.ThinkTime{Min: 5 * time.Second, Max: time.Minute}, ""},
		{"500ms - 2s", prober.ThinkTime{Min: 500 * time.Millisecond, Max: 2 * time.Second}, ""},
		{"0s", prober.ThinkTime{}, ""},
		{"10m", prober.ThinkTime{Min: 10 * time.Minute, Max: 10 * time.Minute}, ""},
		{"15", prober.ThinkTime{}, `line 11: scenarios[0] (agent): conversation.think_time="15": expected a duration such as "15s", or a range drawn per turn such as "5s-1m"`},
		{"5s-", prober.ThinkTime{}, `line 11: scenarios[0] (agent): conversation.think_time="5s-": expected a duration such as "15s", or a range drawn per turn such as "5s-1m"`},
		{"1m-5s", prober.ThinkTime{}, `line 5: scenarios[0]: scenario "agent": conversation.think_time=1m-5s; expected a duration from 0s to 10m, or a range lo-hi with lo <= hi ("5s-1m")`},
		{"11m", prober.ThinkTime{}, `line 5: scenarios[0]: scenario "agent": conversation.think_time=11m; expected a duration from 0s to 10m, or a range lo-hi with lo <= hi ("5s-1m")`},
	} {
		t.Run(tc.text, func(t *testing.T) {
			c, err := LoadBytes([]byte(strings.Replace(cfg, "THINK", `"`+tc.text+`"`, 1)))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error:\n got: %v\nwant: %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.lookup("agent").Conversation.ThinkTime; got != tc.want {
				t.Errorf("think time %+v, want %+v", got, tc.want)
			}
			again, err := LoadBytes([]byte(c.Redacted()))
			if err != nil {
				t.Fatalf("reload the printed config: %v\n%s", err, c.Redacted())
			}
			if got := again.lookup("agent").Conversation.ThinkTime; got != tc.want {
				t.Errorf("printed and reloaded: %+v, want %+v\n%s", got, tc.want, c.Redacted())
			}
		})
	}
}

// TestAgentScenarios: the built-in agent conversations are known to the
// config, not probed unless listed, and tunable like any conversation.
func TestAgentScenarios(t *testing.T) {
	c, err := LoadBytes([]byte(`
targets:
  - url: http://vllm:8000
  - name: agents
    url: http://vllm:8001
    scenarios: [coding_agent, tool_calling_agent]
scenarios:
  - name: coding_agent
    conversation: {think_time: 30s}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Scenarios("vllm:8000") {
		if s.Name == "coding_agent" || s.Name == "tool_calling_agent" {
			t.Errorf("%s is probed by default; it must be listed", s.Name)
		}
	}
	got := c.Scenarios("agents")
	if len(got) != 2 {
		t.Fatalf("scenarios of the agents target: %+v", got)
	}
	if cv := got[0].Conversation; cv.Turns != 12 || cv.NewTokens != 2048 || cv.ThinkTime != (prober.ThinkTime{Min: 30 * time.Second, Max: 30 * time.Second}) {
		t.Errorf("tuned coding_agent: %+v", cv)
	}
	if cv := got[1].Conversation; cv.ThinkTime != (prober.ThinkTime{Min: time.Second, Max: 10 * time.Second}) {
		t.Errorf("tool_calling_agent think time %+v", cv.ThinkTime)
	}
}

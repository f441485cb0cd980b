package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/prober"
)

// TestWarmScenarioConfig reads a conversation section under its name and
// under its older one, warm:, to the same scenarios.
func TestWarmScenarioConfig(t *testing.T) {
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
	if want := (prober.Conversation{Turns: 12, NewTokens: 1024, NewTokensMax: 4096, Tools: true, Seed: 7}); got != want {
		t.Errorf("conversation %+v, want %+v", got, want)
	}
	again, err := LoadBytes([]byte(c.Redacted()))
	if err != nil {
		t.Fatalf("reload the printed config: %v\n%s", err, c.Redacted())
	}
	if !reflect.DeepEqual(again.AllScenarios(), c.AllScenarios()) {
		t.Errorf("printed config does not load back:\n%s", c.Redacted())
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

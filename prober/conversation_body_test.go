package prober

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/test/gateway"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// TestConversationBodies: a follow-up carries the whole history in each
// API's shape, the answers replayed as sent, the new text as a user message
// or, with tools, as the result of the synthesized tool call; the tool
// definition is in the request only with tools.
func TestConversationBodies(t *testing.T) {
	steps := []convStep{{Turn: 2, Answer: "A1", New: "N2"}, {Turn: 3, Answer: "A2", New: "N3"}}
	for _, tc := range []struct {
		api   API
		tools bool
		field string // the JSON field that holds the history
		want  string // its compact JSON
		tool  string // the tools field's compact JSON, "" for none
	}{
		{APIChat, false, "messages",
			`[{"role":"user","content":"P"},{"role":"assistant","content":"A1"},{"role":"user","content":"N2"},{"role":"assistant","content":"A2"},{"role":"user","content":"N3"}]`, ""},
		{APIChat, true, "messages",
			`[{"role":"user","content":"P"},` +
				`{"role":"assistant","content":"A1","tool_calls":[{"id":"call_slaprobe_02","type":"function","function":{"name":"run_command","arguments":"{\"command\":\"step 02\"}"}}]},` +
				`{"role":"tool","content":"N2","tool_call_id":"call_slaprobe_02"},` +
				`{"role":"assistant","content":"A2","tool_calls":[{"id":"call_slaprobe_03","type":"function","function":{"name":"run_command","arguments":"{\"command\":\"step 03\"}"}}]},` +
				`{"role":"tool","content":"N3","tool_call_id":"call_slaprobe_03"}]`,
			`[{"type":"function","function":{"name":"run_command","description":"Run a shell command in the workspace and return its output.","parameters":` + string(probeToolParams) + `}}]`},
		{APICompletions, false, "prompt", `"PA1\n\nN2\n\nA2\n\nN3\n\n"`, ""},
		{APIResponses, false, "input",
			`[{"role":"user","content":"P"},{"role":"assistant","content":"A1"},{"role":"user","content":"N2"},{"role":"assistant","content":"A2"},{"role":"user","content":"N3"}]`, ""},
		{APIResponses, true, "input",
			`[{"role":"user","content":"P"},{"role":"assistant","content":"A1"},` +
				`{"type":"function_call","call_id":"call_slaprobe_02","name":"run_command","arguments":"{\"command\":\"step 02\"}"},` +
				`{"type":"function_call_output","call_id":"call_slaprobe_02","output":"N2"},` +
				`{"role":"assistant","content":"A2"},` +
				`{"type":"function_call","call_id":"call_slaprobe_03","name":"run_command","arguments":"{\"command\":\"step 03\"}"},` +
				`{"type":"function_call_output","call_id":"call_slaprobe_03","output":"N3"}]`,
			`[{"type":"function","name":"run_command","description":"Run a shell command in the workspace and return its output.","parameters":` + string(probeToolParams) + `}]`},
		{APIMessages, false, "messages",
			`[{"role":"user","content":"P"},{"role":"assistant","content":"A1"},{"role":"user","content":"N2"},{"role":"assistant","content":"A2"},{"role":"user","content":"N3"}]`, ""},
		{APIMessages, true, "messages",
			`[{"role":"user","content":"P"},` +
				`{"role":"assistant","content":[{"type":"text","text":"A1"},{"type":"tool_use","id":"call_slaprobe_02","name":"run_command","input":{"command":"step 02"}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_slaprobe_02","content":"N2"}]},` +
				`{"role":"assistant","content":[{"type":"text","text":"A2"},{"type":"tool_use","id":"call_slaprobe_03","name":"run_command","input":{"command":"step 03"}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_slaprobe_03","content":"N3"}]}]`,
			`[{"name":"run_command","description":"Run a shell command in the workspace and return its output.","input_schema":` + string(probeToolParams) + `}]`},
	} {
		t.Run(fmt.Sprintf("%s/tools=%v", tc.api, tc.tools), func(t *testing.T) {
			b, err := marshalRequest(requestSpec{API: tc.api, Model: "m", Prompt: "P", Steps: steps, Tools: tc.tools, MaxTokens: 8, MinTokens: 8, Stream: true, CacheSalt: "s"})
			if err != nil {
				t.Fatal(err)
			}
			var body map[string]json.RawMessage
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatal(err)
			}
			if got := string(body[tc.field]); got != tc.want {
				t.Errorf("%s:\n got %s\nwant %s", tc.field, got, tc.want)
			}
			if got := string(body["tools"]); got != tc.tool {
				t.Errorf("tools:\n got %s\nwant %s", got, tc.tool)
			}
			wantChoice := ""
			if tc.tools && tc.api != APIMessages {
				wantChoice = `"none"`
			}
			if got := string(body["tool_choice"]); got != wantChoice {
				t.Errorf("tool_choice %s, want %s", got, wantChoice)
			}
		})
	}
	// The priming turn (no steps) keeps the cold probe's form, tools aside.
	for _, api := range []API{APIChat, APICompletions, APIResponses, APIMessages} {
		cold, _ := marshalRequest(requestSpec{API: api, Model: "m", Prompt: "P", MaxTokens: 8})
		prime, _ := marshalRequest(requestSpec{API: api, Model: "m", Prompt: "P", MaxTokens: 8, Steps: nil})
		if string(cold) != string(prime) {
			t.Errorf("%s: priming body %s differs from the cold body %s", api, prime, cold)
		}
	}
	if _, err := marshalRequest(requestSpec{API: APICompletions, Model: "m", Prompt: "P", Tools: true}); err == nil || !strings.Contains(err.Error(), "conversation.tools") {
		t.Errorf("completions with tools: err %v, want one naming conversation.tools", err)
	}
}

// TestConversationReplaysAnswers: conversations of 5 turns on the simulated
// engine, on every API, with tools and without: every turn's prompt as the
// engine counted it is the length the prober derived for it (the turn
// before's prompt, plus its answer, plus the calibrated new message), and the
// engine's trace shows each earlier answer replayed word for word, as an
// assistant message (with the tool call and a tool result when tools are on).
func TestConversationReplaysAnswers(t *testing.T) {
	for _, api := range []API{APIChat, APICompletions, APIResponses, APIMessages} {
		for _, tools := range []bool{false, true} {
			if api == APICompletions && tools {
				continue // refused: TestConversationBodies, TestConversationToolsOnCompletions
			}
			t.Run(fmt.Sprintf("%s/tools=%v", api, tools), func(t *testing.T) {
				engines, _, target := conversationFleet(t, 1, gateway.RoundRobin, nil)
				target.API = api
				s := conversationTestScenario(5, 1024, 256)
				s.OutputTokens = 24
				s.Conversation.Tools = tools
				p := New(nil, nil)
				res := p.Probe(context.Background(), target, "", s)
				if res.Kind != KindSuccess || len(res.Earlier) != 4 {
					t.Fatalf("conversation: %s %s %v (%d earlier turns)", res.Kind, res.Reason, res.Err, len(res.Earlier))
				}
				turns := append(slices.Clone(res.Earlier), res)
				for i, r := range turns {
					tr, ok := engines[0].Trace(r.ResponseID)
					if !ok {
						t.Fatalf("turn %d: no trace of %q", i+1, r.ResponseID)
					}
					want := r.WantPromptTokens
					if i == 0 {
						want = tr.PromptTokens // calibrated to a word: PromptLengthOK judges it
					}
					if api == APICompletions && i == 1 && absInt(want-tr.PromptTokens) == 1 {
						// The first answer continues the priming prompt's last word: the
						// tokenizer may merge the two (no separator there, as on a cold probe).
						want = tr.PromptTokens
					}
					if r.PromptTokens != tr.PromptTokens || want != tr.PromptTokens || !r.PromptLengthOK {
						t.Errorf("turn %d: prober read %d and wanted %d prompt tokens (ok %v); the engine counted %d",
							i+1, r.PromptTokens, r.WantPromptTokens, r.PromptLengthOK, tr.PromptTokens)
					}
					if i < len(turns)-1 && (r.Answer == "" || r.OutputTokens != s.OutputTokens) {
						t.Errorf("turn %d: answer %q of %d tokens kept; want the %d tokens streamed", i+1, r.Answer, r.OutputTokens, s.OutputTokens)
					}
					if i == 0 {
						continue
					}
					if api == APICompletions {
						if !strings.Contains(tr.PromptHead, "[probe ") {
							t.Errorf("turn %d: prompt head %q", i+1, tr.PromptHead)
						}
						continue
					}
					var answers []string
					var calls, results int
					for _, m := range tr.Messages {
						switch m.Role {
						case "assistant":
							answers = append(answers, m.Text)
							calls += m.ToolCalls
						case "tool":
							results++
						}
					}
					var streamed []string
					for _, e := range turns[:i] {
						streamed = append(streamed, e.Answer)
					}
					if !slices.Equal(answers, streamed) {
						t.Errorf("turn %d: the engine saw assistant messages %q, want the answers streamed %q", i+1, answers, streamed)
					}
					wantCalls := 0
					if tools {
						wantCalls = i
					}
					if calls != wantCalls || results != wantCalls {
						t.Errorf("turn %d: %d tool calls and %d tool results, want %d of each", i+1, calls, results, wantCalls)
					}
				}
				// Completions: the engine's prompt is the concatenation, so its
				// count can only match (checked above) if every answer was in it.
				t.Logf("%s tools=%v: prompts %v", api, tools, promptLengths(turns))
			})
		}
	}
}

func promptLengths(rs []Result) []int {
	var out []int
	for _, r := range rs {
		out = append(out, r.PromptTokens)
	}
	return out
}

// TestConversationReasoningNotReplayed: a reasoning model streams reasoning
// before its answer, counted in completion_tokens but not replayed (chat
// templates drop it from history). Its follow-ups read shorter than the turn
// before's prompt plus its completion, by the reasoning; they pass the check
// and are not mistaken for a prompt the server cut.
func TestConversationReasoningNotReplayed(t *testing.T) {
	engines, _, target := conversationFleet(t, 1, gateway.RoundRobin, func(c *vllmsim.Config) { c.ReasoningTokens = 64 })
	s := conversationTestScenario(3, 1024, 256)
	s.OutputTokens = 96 // 64 of them reasoning: more than the check's tolerance (1 %, 13 tokens here)
	res := New(nil, nil).Probe(context.Background(), target, "", s)
	if res.Kind != KindSuccess || len(res.Earlier) != 2 {
		t.Fatalf("conversation: %s %s %v", res.Kind, res.Reason, res.Err)
	}
	for i, r := range append(slices.Clone(res.Earlier), res) {
		tr, _ := engines[0].Trace(r.ResponseID)
		if !r.PromptLengthOK || r.PromptTokens != tr.PromptTokens {
			t.Errorf("turn %d: prompt %d (engine %d), derived %d, ok %v", i+1, r.PromptTokens, tr.PromptTokens, r.WantPromptTokens, r.PromptLengthOK)
		}
		if i > 0 && r.WantPromptTokens-r.PromptTokens != 64 {
			t.Errorf("turn %d: %d tokens short of the derived %d, want the 64 reasoning tokens", i+1, r.WantPromptTokens-r.PromptTokens, r.WantPromptTokens)
		}
		if i < 2 && (!r.Reasoning || strings.Contains(r.Answer, "think")) {
			t.Errorf("turn %d: reasoning %v, answer %q", i+1, r.Reasoning, r.Answer)
		}
	}
}

// TestConversationReplayCountedAgain: the server tokenizes the replayed
// answer again as part of the follow-up's prompt, and may count it
// differently from the completion tokens it reported (a tiny model's
// 16-token answer counted 25 more on Ollama). A follow-up within the answer's
// tokens, and a twentieth of the derived length, of it (each end with its
// tolerance) is the right length; further, or 10 % off, it is not. Turn 2's
// derived length is 1024 + the answer + 256 tokens: 1304 with a 24-token
// answer (tolerance 13), 1480 with a 200-token one (a twentieth: 74).
func TestConversationReplayCountedAgain(t *testing.T) {
	promptTokens := regexp.MustCompile(`"prompt_tokens":(\d+)`)
	for _, tc := range []struct {
		name  string
		out   int // the answer's tokens
		drift int // added to the server's count of a prompt that replays an answer
		ok    bool
	}{
		{"counted as generated", 24, 0, true},
		{"counted 30 more, past the tolerance, within the answer's 24 and the tolerance", 24, 30, true},
		{"counted 30 fewer", 24, -30, true},
		{"counted 45 more: past the answer and the tolerance", 24, 45, false},
		{"counted 10 % more", 24, 130, false},
		{"a 200-token answer counted 80 more: within a twentieth and the tolerance", 200, 80, true},
		{"a 200-token answer counted 100 more: past a twentieth and the tolerance", 200, 100, false},
		{"a 200-token answer counted 10 % fewer", 200, -148, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := warmSim(t, nil) // its own target unused: the recounting one below serves e
			h := e.Handler()
			url, client := testproc.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				if !bytes.Contains(body, []byte(`"role":"assistant"`)) {
					h.ServeHTTP(w, r)
					return
				}
				h.ServeHTTP(recountWriter{ResponseWriter: w, re: promptTokens, drift: tc.drift}, r)
			}))
			s := conversationTestScenario(3, 1024, 256)
			s.OutputTokens = tc.out
			res := New(nil, nil).Probe(context.Background(), Target{Name: "sim", BaseURL: url, API: APIChat, Client: client}, "", s)
			if tc.drift < 0 && !tc.ok {
				// Too short a follow-up is a prompt the server cut.
				if res.Reason != ReasonPromptTruncated || len(res.Earlier) != 1 {
					t.Errorf("conversation: %s %s at turn %d, want turn 2 failed as %s", res.Kind, res.Reason, res.Turn, ReasonPromptTruncated)
				}
				return
			}
			if res.Kind != KindSuccess || len(res.Earlier) != 2 {
				t.Fatalf("conversation: %s %s %v", res.Kind, res.Reason, res.Err)
			}
			r := res.Earlier[1]
			if r.PromptLengthOK != tc.ok {
				t.Errorf("turn 2: %d prompt tokens, derived %d (answer %d tokens): ok %v, want %v",
					r.PromptTokens, r.WantPromptTokens, res.Earlier[0].OutputTokens, r.PromptLengthOK, tc.ok)
			}
			if d := r.PromptTokens - r.WantPromptTokens; d < tc.drift-1 || d > tc.drift+1 {
				t.Errorf("turn 2: %d prompt tokens, %+d from the derived %d; want the drift %+d", r.PromptTokens, d, r.WantPromptTokens, tc.drift)
			}
		})
	}
}

// recountWriter adds drift to every prompt_tokens the response carries.
type recountWriter struct {
	http.ResponseWriter
	re    *regexp.Regexp
	drift int
}

func (w recountWriter) Write(b []byte) (int, error) {
	out := w.re.ReplaceAllFunc(b, func(m []byte) []byte {
		n, _ := strconv.Atoi(string(w.re.FindSubmatch(m)[1]))
		return []byte(`"prompt_tokens":` + strconv.Itoa(n+w.drift))
	})
	if _, err := w.ResponseWriter.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (w recountWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

package prober

// This file holds what a conversation's follow-up sends: the whole history,
// the model's own answers replayed, and the new tokens as a user message or,
// with conversation.tools, as the result of a tool call.
//
// A follow-up of turn k carries, in order: the priming turn's prompt (nonce,
// instruction, corpus), then for each earlier follow-up j = 2…k the answer of
// turn j-1 exactly as it was streamed (its content text; reasoning is not
// replayed, as chat templates drop it from history) and the new text of
// turn j. The new text is the first words of the prompt corpus, as many as
// the calibration found for the drawn new_tokens.
//
// Per API (the same history in each API's own shape):
//   - chat: messages user, assistant, user, assistant, user…; with tools the
//     assistant message also carries tool_calls and the new text is a
//     {"role": "tool", "tool_call_id": …} message;
//   - responses: input items {"role": "user"|"assistant", "content": …}; with
//     tools a function_call item follows the answer and the new text is its
//     function_call_output;
//   - messages: user and assistant messages; with tools the assistant's
//     content is a text block (when the answer has text) and a tool_use
//     block, and the next user message is one tool_result block;
//   - completions: one prompt, the plain concatenation of the texts, each new
//     text between blank lines (no tools: conversation.tools is refused
//     there).
//
// The tool call. The probe's answer is plain text, never a real tool call,
// so the call the agent "made" is synthesized, the same for every run:
// function probeToolName with arguments {"command":"step NN"} and call id
// "call_slaprobe_NN", NN the two-digit number of the turn it feeds (02 to
// 64, always two digits so every call is the same length in tokens). The
// tool definition (probeTools) is in every request of a tools conversation,
// the priming turn's included, so the priming turn's calibrated prompt
// counts it.

import (
	"encoding/json"
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// convStep is one follow-up's addition to the history: the answer of the
// turn before it, then its new text.
type convStep struct {
	Turn   int    // the follow-up turn this step opens (2…)
	Answer string // the turn before's answer, as streamed
	New    string // the new text
}

const (
	probeToolName = "run_command"
	probeToolDesc = "Run a shell command in the workspace and return its output."
)

// probeToolParams is the JSON schema of probeToolName's arguments.
var probeToolParams = json.RawMessage(`{"type":"object","properties":{"command":{"type":"string","description":"The command to run."}},"required":["command"]}`)

// toolCallID is the id of the synthesized call whose result opens turn k.
func toolCallID(k int) string { return fmt.Sprintf("call_slaprobe_%02d", k) }

// toolCallArgs is the synthesized call's arguments (a JSON object).
func toolCallArgs(k int) string { return fmt.Sprintf(`{"command":"step %02d"}`, k) }

// chatTools is the tool definition in the chat form.
func chatTools(tools bool) []openai.Tool {
	if !tools {
		return nil
	}
	return []openai.Tool{{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
		Name: probeToolName, Description: probeToolDesc, Parameters: probeToolParams}}}
}

// chatToolChoice is "none" with tools: the definitions are in the prompt
// (vLLM keeps them there unless started with
// --exclude-tools-when-tool-choice-none), but the server parses no tool
// call out of the answer, so whatever the model generates streams as content
// and is replayed exactly as generated. The Messages request leaves
// tool_choice out (auto): not every server that serves it takes "none".
func chatToolChoice(tools bool) any {
	if !tools {
		return nil
	}
	return "none"
}

func responsesToolChoice(tools bool) string {
	if !tools {
		return ""
	}
	return "none"
}

// chatMessage is one chat message. Unlike go-openai's, it writes its
// content when empty: an assistant message replaying an empty answer (the
// step calibration's, or a reasoning model's that streamed no content) is
// {"role": "assistant", "content": ""}, which servers take; without the
// key Ollama refuses it ("invalid message content type: <nil>").
type chatMessage struct {
	Role       string            `json:"role"`
	Content    string            `json:"content"`
	ToolCalls  []openai.ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
}

// chatMessages is the history as chat messages.
func chatMessages(first string, steps []convStep, tools bool) []chatMessage {
	msgs := make([]chatMessage, 0, 1+2*len(steps))
	msgs = append(msgs, chatMessage{Role: openai.ChatMessageRoleUser, Content: first})
	for _, st := range steps {
		a := chatMessage{Role: openai.ChatMessageRoleAssistant, Content: st.Answer}
		if !tools {
			msgs = append(msgs, a, chatMessage{Role: openai.ChatMessageRoleUser, Content: st.New})
			continue
		}
		a.ToolCalls = []openai.ToolCall{{ID: toolCallID(st.Turn), Type: openai.ToolTypeFunction,
			Function: openai.FunctionCall{Name: probeToolName, Arguments: toolCallArgs(st.Turn)}}}
		msgs = append(msgs, a, chatMessage{Role: openai.ChatMessageRoleTool, Content: st.New, ToolCallID: toolCallID(st.Turn)})
	}
	return msgs
}

// completionSep frames a completions follow-up's new text, so that neither
// the answer before it nor the answer after it runs into its words.
const completionSep = "\n\n"

// completionPromptText is the history as one completions prompt: the
// priming prompt, then per step the answer, the new text between two
// completionSep.
func completionPromptText(first string, steps []convStep) string {
	if len(steps) == 0 {
		return first
	}
	var b strings.Builder
	b.WriteString(first)
	for _, st := range steps {
		b.WriteString(st.Answer)
		b.WriteString(completionSep)
		b.WriteString(st.New)
		b.WriteString(completionSep)
	}
	return b.String()
}

// Responses API input items and tool.
type (
	responsesMessageItem struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	responsesCallItem struct {
		Type      string `json:"type"` // function_call
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	responsesOutputItem struct {
		Type   string `json:"type"` // function_call_output
		CallID string `json:"call_id"`
		Output string `json:"output"`
	}
	responsesTool struct {
		Type        string          `json:"type"` // function
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
)

func responsesTools(tools bool) []responsesTool {
	if !tools {
		return nil
	}
	return []responsesTool{{Type: "function", Name: probeToolName, Description: probeToolDesc, Parameters: probeToolParams}}
}

// responsesInput is the history as Responses input: the prompt string alone
// on the priming turn (the cold probe's form), else a list of items.
func responsesInput(first string, steps []convStep, tools bool) any {
	if len(steps) == 0 {
		return first
	}
	items := make([]any, 0, 1+3*len(steps))
	items = append(items, responsesMessageItem{Role: "user", Content: first})
	for _, st := range steps {
		items = append(items, responsesMessageItem{Role: "assistant", Content: st.Answer})
		if !tools {
			items = append(items, responsesMessageItem{Role: "user", Content: st.New})
			continue
		}
		items = append(items,
			responsesCallItem{Type: "function_call", CallID: toolCallID(st.Turn), Name: probeToolName, Arguments: toolCallArgs(st.Turn)},
			responsesOutputItem{Type: "function_call_output", CallID: toolCallID(st.Turn), Output: st.New})
	}
	return items
}

// Messages API content blocks and tool.
type (
	messagesBlock struct {
		Type      string          `json:"type"`                  // text, tool_use, tool_result
		Text      string          `json:"text,omitempty"`        // text
		ID        string          `json:"id,omitempty"`          // tool_use
		Name      string          `json:"name,omitempty"`        // tool_use
		Input     json.RawMessage `json:"input,omitempty"`       // tool_use
		ToolUseID string          `json:"tool_use_id,omitempty"` // tool_result
		Content   *string         `json:"content,omitempty"`     // tool_result
	}
	messagesTool struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
)

func messagesTools(tools bool) []messagesTool {
	if !tools {
		return nil
	}
	return []messagesTool{{Name: probeToolName, Description: probeToolDesc, InputSchema: probeToolParams}}
}

// messagesHistory is the history as Messages messages.
func messagesHistory(first string, steps []convStep, tools bool) []messagesMessage {
	msgs := make([]messagesMessage, 0, 1+2*len(steps))
	msgs = append(msgs, messagesMessage{Role: "user", Content: first})
	for _, st := range steps {
		if !tools {
			msgs = append(msgs, messagesMessage{Role: "assistant", Content: st.Answer}, messagesMessage{Role: "user", Content: st.New})
			continue
		}
		var blocks []messagesBlock
		if st.Answer != "" {
			blocks = append(blocks, messagesBlock{Type: "text", Text: st.Answer})
		}
		blocks = append(blocks, messagesBlock{Type: "tool_use", ID: toolCallID(st.Turn), Name: probeToolName, Input: json.RawMessage(toolCallArgs(st.Turn))})
		out := st.New
		msgs = append(msgs, messagesMessage{Role: "assistant", Content: blocks},
			messagesMessage{Role: "user", Content: []messagesBlock{{Type: "tool_result", ToolUseID: toolCallID(st.Turn), Content: &out}}})
	}
	return msgs
}

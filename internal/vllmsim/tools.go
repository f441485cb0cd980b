package vllmsim

// This file holds the tool-calling shapes of a conversation's history, as an
// agent re-sends them: an assistant message's tool calls and the tool's
// result, in the chat form (tool_calls, role "tool"), the Responses form
// (function_call and function_call_output items) and the Messages form
// (tool_use and tool_result blocks). The typed APIs' shapes are turned into
// the chat form, so one chat template counts every API's prompt alike.
//
// The template renders each call after the assistant message's content, as
// Qwen's and Hermes' templates do:
//
//	\n<tool_call>\n{"name": NAME, "arguments": ARGS}\n</tool_call>
//
// with ARGS the call's arguments as compact JSON; a tool message is a
// message of role "tool" whose content is the result.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// chatToolCall is one call in the chat form.
type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// toolCallsText renders a message's tool_calls (chat form) as the template
// does, and counts them.
func toolCallsText(raw json.RawMessage) (string, int, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", 0, nil
	}
	var calls []chatToolCall
	if err := json.Unmarshal(raw, &calls); err != nil {
		return "", 0, fmt.Errorf("expected a list of {id, type, function: {name, arguments}}: %v", err)
	}
	var b strings.Builder
	for i, c := range calls {
		if c.Function.Name == "" {
			return "", 0, fmt.Errorf("[%d].function.name is required", i)
		}
		args := []byte(c.Function.Arguments)
		if len(bytes.TrimSpace(args)) == 0 {
			args = []byte("{}")
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, args); err != nil {
			return "", 0, fmt.Errorf("[%d].function.arguments is not JSON: %v", i, err)
		}
		name, _ := json.Marshal(c.Function.Name)
		fmt.Fprintf(&b, "\n<tool_call>\n{\"name\": %s, \"arguments\": %s}\n</tool_call>", name, compact.Bytes())
	}
	return b.String(), len(calls), nil
}

// oneToolCall is a chat-form tool_calls list of one call.
func oneToolCall(id, name, args string) json.RawMessage {
	c := chatToolCall{ID: id, Type: "function"}
	c.Function.Name, c.Function.Arguments = name, args
	b, _ := json.Marshal([]chatToolCall{c})
	return b
}

// addToolCall appends a call to the last message when it is the
// assistant's, else as a new assistant message without content.
func addToolCall(msgs []wireMessage, id, name, args string) []wireMessage {
	call := oneToolCall(id, name, args)
	if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
		last := &msgs[n-1]
		if len(bytes.TrimSpace(last.ToolCalls)) == 0 || string(bytes.TrimSpace(last.ToolCalls)) == "null" {
			last.ToolCalls = call
			return msgs
		}
		var all []json.RawMessage
		_ = json.Unmarshal(last.ToolCalls, &all)
		var one []json.RawMessage
		_ = json.Unmarshal(call, &one)
		last.ToolCalls, _ = json.Marshal(append(all, one...))
		return msgs
	}
	return append(msgs, wireMessage{Role: "assistant", ToolCalls: call})
}

// responsesItems turns a Responses input list into chat messages: message
// items (with or without "type": "message"), function_call items (a call of
// the assistant message before them) and function_call_output items (a tool
// message).
func responsesItems(in json.RawMessage) ([]wireMessage, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(in, &items); err != nil {
		return nil, badRequest("input", "input must be a string or a list of items: %v", err)
	}
	var msgs []wireMessage
	for i, raw := range items {
		var it struct {
			Type      string          `json:"type"`
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			CallID    string          `json:"call_id"`
			Name      string          `json:"name"`
			Arguments string          `json:"arguments"`
			Output    json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal(raw, &it); err != nil {
			return nil, badRequest("input", "input[%d]: %v", i, err)
		}
		switch it.Type {
		case "", "message":
			if it.Role == "" {
				return nil, badRequest("input", "input[%d].role is required", i)
			}
			msgs = append(msgs, wireMessage{Role: it.Role, Content: it.Content})
		case "function_call":
			if it.CallID == "" || it.Name == "" {
				return nil, badRequest("input", "input[%d]: a function_call needs call_id and name", i)
			}
			msgs = addToolCall(msgs, it.CallID, it.Name, it.Arguments)
		case "function_call_output":
			if it.CallID == "" {
				return nil, badRequest("input", "input[%d]: a function_call_output needs call_id", i)
			}
			msgs = append(msgs, wireMessage{Role: "tool", Content: it.Output, ToolCallID: it.CallID})
		default:
			return nil, badRequest("input", "input[%d].type=%q; expected message, function_call or function_call_output", i, it.Type)
		}
	}
	return msgs, nil
}

// anthropicMessage is a Messages API message: content a string or blocks.
type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// anthropicMessages turns Messages API messages into chat messages: text
// blocks are the content, tool_use blocks the assistant's calls, and each
// tool_result block a tool message (before the user's own text, if any).
func anthropicMessages(in []anthropicMessage) ([]wireMessage, error) {
	var msgs []wireMessage
	for i, m := range in {
		c := bytes.TrimSpace(m.Content)
		if len(c) == 0 || c[0] != '[' {
			msgs = append(msgs, wireMessage{Role: m.Role, Content: m.Content})
			continue
		}
		var blocks []struct {
			Type      string          `json:"type"`
			Text      string          `json:"text"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Input     json.RawMessage `json:"input"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(c, &blocks); err != nil {
			return nil, badRequest("messages", "messages[%d].content: %v", i, err)
		}
		var texts []string
		var calls []wireMessage // a scratch assistant message collecting the calls
		for j, b := range blocks {
			switch b.Type {
			case "text":
				texts = append(texts, b.Text)
			case "tool_use":
				if b.ID == "" || b.Name == "" {
					return nil, badRequest("messages", "messages[%d].content[%d]: a tool_use block needs id and name", i, j)
				}
				if len(calls) == 0 {
					calls = []wireMessage{{Role: "assistant"}}
				}
				calls = addToolCall(calls, b.ID, b.Name, string(b.Input))
			case "tool_result":
				if b.ToolUseID == "" {
					return nil, badRequest("messages", "messages[%d].content[%d]: a tool_result block needs tool_use_id", i, j)
				}
				msgs = append(msgs, wireMessage{Role: "tool", Content: b.Content, ToolCallID: b.ToolUseID})
			default:
				return nil, badRequest("messages", "messages[%d].content[%d].type=%q; expected text, tool_use or tool_result", i, j, b.Type)
			}
		}
		if len(texts) == 0 && len(calls) == 0 {
			continue // only tool results
		}
		text, _ := json.Marshal(strings.Join(texts, "\n"))
		w := wireMessage{Role: m.Role, Content: text}
		if len(calls) > 0 {
			w.ToolCalls = calls[0].ToolCalls
		}
		msgs = append(msgs, w)
	}
	return msgs, nil
}

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
// the calibration found for the drawn new_tokens. Each API builds the same
// history in its own shape, in its api_<name>.go (chatMessages,
// completionPromptText, responsesInput, messagesHistory).
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

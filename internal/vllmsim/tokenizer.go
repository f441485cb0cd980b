package vllmsim

import (
	"unicode"
	"unicode/utf8"
)

// The simulator's tokenizer is deterministic, allocation-light and deliberately unlike "one word,
// one token", so that a prober must calibrate against /tokenize or usage.prompt_tokens:
//
//   - a run of letters costs one token per started 4 letters ("a", "the", "data" = 1; "model" = 2;
//     "calibration" = 3);
//   - every digit is one token;
//   - every newline is one token; other whitespace is free (it marks the next token as
//     space-prefixed, which changes its id, as in BPE);
//   - every other character (punctuation, symbols) is one token.
//
// The chat template is ChatML-like: each message costs <|im_start|> + role + "\n" + content +
// <|im_end|> + "\n", that is 4 + CountTokens(role) + CountTokens(content) tokens ("user" and
// "system" role: 1 and 2 tokens; "assistant": 3). The generation prompt <|im_start|>assistant\n adds
// 5. See Config.ChatPromptTokens.

const (
	lettersPerToken = 4
	// Regular token ids are in [0, vocabSize); special tokens follow.
	vocabSize        = 151643
	tokIMStart       = 151644
	tokIMEnd         = 151645
	tokThinkStart    = 151667
	tokThinkEnd      = 151668
	tokNewlinePair   = 271 // "\n\n" inside the empty thinking block
	fnvOffset64      = 14695981039346656037
	fnvPrime64       = 1099511628211
	spacePrefixBit   = 0x9e3779b97f4a7c15
	generationPrompt = 5 // <|im_start|> assistant(3) \n
)

// tokenize appends the token ids of text to dst.
func tokenize(dst []uint32, text string) []uint32 {
	scanTokens(text, &dst, true)
	return dst
}

// scanTokens counts text's tokens and, when want is true, appends their ids to *dst.
func scanTokens(text string, dst *[]uint32, want bool) int {
	n := 0
	space := false
	var ids []uint32
	if want {
		ids = *dst
	}
	for i := 0; i < len(text); {
		c := text[i]
		j := i + 1 // end of the token starting at i
		switch {
		case c < utf8.RuneSelf && isASCIILetter(c):
			j = letterGroupEnd(text, i)
		case c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f':
			space = true
			i++
			continue
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(text[i:])
			switch {
			case unicode.IsLetter(r):
				j = letterGroupEnd(text, i)
			case unicode.IsSpace(r):
				space = true
				i += size
				continue
			default:
				j = i + size
			}
		}
		// Anything else (digits, newline, punctuation, symbols): one token per character.
		if want {
			ids = append(ids, pieceID(text[i:j], space))
		}
		n++
		space = false
		i = j
	}
	if want {
		*dst = ids
	}
	return n
}

// letterGroupEnd returns the end of the token that starts with the letter at text[i]: up to
// lettersPerToken letters (runes, ASCII or not).
func letterGroupEnd(text string, i int) int {
	j := i
	for letters := 0; letters < lettersPerToken && j < len(text); letters++ {
		if c := text[j]; c < utf8.RuneSelf {
			if !isASCIILetter(c) {
				break
			}
			j++
			continue
		}
		r, size := utf8.DecodeRuneInString(text[j:])
		if !unicode.IsLetter(r) {
			break
		}
		j += size
	}
	return j
}

func isASCIILetter(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// pieceID maps a token's text to a stable id in [0, vocabSize).
func pieceID(piece string, spacePrefixed bool) uint32 {
	h := uint64(fnvOffset64)
	for i := 0; i < len(piece); i++ {
		h ^= uint64(piece[i])
		h *= fnvPrime64
	}
	if spacePrefixed {
		h ^= spacePrefixBit
		h *= fnvPrime64
	}
	return uint32(h % vocabSize)
}

// ChatMessage is one chat message as the simulator's chat template sees it.
type ChatMessage struct {
	Role    string
	Content string
}

// chatTemplate holds what besides the messages changes the templated prompt.
type chatTemplate struct {
	systemPrompt        string // Config.DefaultSystemPrompt
	tools               string // raw JSON of the request's tools, "" if none
	addGenerationPrompt bool
	emptyThinking       bool // enable_thinking=false on a reasoning model: an empty think block
}

// apply appends the templated prompt's token ids to dst.
func (t chatTemplate) apply(dst []uint32, msgs []ChatMessage) []uint32 {
	message := func(role, content string) {
		dst = append(dst, tokIMStart)
		dst = tokenize(dst, role)
		dst = tokenize(dst, "\n")
		dst = tokenize(dst, content)
		dst = append(dst, tokIMEnd)
		dst = tokenize(dst, "\n")
	}
	hasSystem := len(msgs) > 0 && msgs[0].Role == "system"
	switch {
	case t.tools != "":
		sys := ""
		if hasSystem {
			sys = msgs[0].Content + "\n\n"
			msgs = msgs[1:]
		} else if t.systemPrompt != "" {
			sys = t.systemPrompt + "\n\n"
		}
		message("system", sys+"# Tools\n"+t.tools)
	case !hasSystem && t.systemPrompt != "":
		message("system", t.systemPrompt)
	}
	for _, m := range msgs {
		message(m.Role, m.Content)
	}
	if t.addGenerationPrompt {
		dst = append(dst, tokIMStart)
		dst = tokenize(dst, "assistant")
		dst = tokenize(dst, "\n")
		if t.emptyThinking {
			dst = append(dst, tokThinkStart, tokNewlinePair, tokThinkEnd, tokNewlinePair)
		}
	}
	return dst
}

// ChatPromptTokens is the prompt length of a chat request with these messages, no tools, the
// generation prompt added, and thinking left on: Σ(4 + CountTokens(role) + CountTokens(content)) + 5,
// plus a system message for DefaultSystemPrompt when the first message is not "system".
func (c Config) ChatPromptTokens(msgs []ChatMessage) int {
	t := chatTemplate{systemPrompt: c.DefaultSystemPrompt, addGenerationPrompt: true}
	return len(t.apply(nil, msgs))
}

package prober

// This file holds the prompt text: a per-probe nonce so no prefix cache serves it,
// and the corpus the text is drawn from.

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"sync"
)

// Prompts are plain English prose built from the vocabulary and sentence
// templates below by a fixed-seed generator, so the same body length always
// yields the same text and calibration is stable across probes and restarts.
// Each probe puts a fresh nonce at the very start of the prompt; the nonce has
// a fixed shape (four groups of four digits) so that its token count does not
// depend on its value for the tokenizers in use (digits are split into single
// digits or groups of up to three, and every group has the same width).

// promptInstruction follows the nonce and asks the model to continue the text.
// Its content does not matter for timing: ignore_eos forces the output length.
const promptInstruction = "Continue the following text in the same style, one paragraph after another.\n\n"

// nonceLen is the length of a nonce, e.g. "4821-9935-1207-6623".
const nonceLen = 19

// saltLen is the length of a cache salt (hex of 16 random bytes).
const saltLen = 32

// promptText is the full prompt: nonce first, then the instruction, then the
// first words of the corpus.
func promptText(nonce, body string) string {
	var b strings.Builder
	b.Grow(len("[probe ] ") + len(nonce) + len(promptInstruction) + len(body))
	b.WriteString("[probe ")
	b.WriteString(nonce)
	b.WriteString("] ")
	b.WriteString(promptInstruction)
	b.WriteString(body)
	return b.String()
}

// newNonce returns 16 random decimal digits in four dash-separated groups.
func newNonce() string {
	var raw [8]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails on supported platforms
	v := binary.LittleEndian.Uint64(raw[:])
	var out [nonceLen]byte
	for i := nonceLen - 1; i >= 0; i-- {
		if i == 4 || i == 9 || i == 14 {
			out[i] = '-'
			continue
		}
		out[i] = byte('0' + v%10)
		v /= 10
	}
	return string(out[:])
}

// newSalt returns a fresh cache_salt: 32 hex characters from crypto/rand.
func newSalt() string {
	var raw [saltLen / 2]byte
	_, _ = rand.Read(raw[:])
	return hex.EncodeToString(raw[:])
}

// promptCorpus is the deterministic text every prompt body is a prefix of. It grows
// on demand; bytes already generated never change, so a body of n words is
// always the same string.
var promptCorpus = &textCorpus{rng: splitmix{state: 0x5eed_1a7e_c0ffee}}

type textCorpus struct {
	mu   sync.Mutex
	rng  splitmix
	text []byte
	ends []int // ends[i] is the offset just past word i
	sent int   // sentences left in the current paragraph
}

// bodyWords returns the first n words of the corpus.
func bodyWords(n int) string {
	return bodyWordsOnly(n)
}

// fillUnits are what a calibration appends, repeated, after the corpus words when two word counts
// one apart straddle the asked token count, in the order it tries them: a unit is one token in
// most tokenizers (a byte-level BPE that never merged " ." counts it as two; then "." alone). The
// calibration counts the filled prompt and keeps a fill only when the count is exact, so a
// tokenizer that merges units costs a count or two, never a wrong length.
var fillUnits = []string{" .", ".", " ,", "\n"}

// maxFill bounds the gap, in tokens, a calibration fills: a wider one is left to the words.
const maxFill = 16

// bodyText is the first n words of the corpus followed by fill (fill units, or "").
func bodyText(n int, fill string) string {
	return bodyWordsOnly(n) + fill
}

func bodyWordsOnly(n int) string {
	if n <= 0 {
		return ""
	}
	return promptCorpus.prefix(n)
}

func (c *textCorpus) prefix(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.ends) < n {
		c.addSentence()
	}
	return string(c.text[:c.ends[n-1]])
}

// addSentence appends one sentence, starting a new paragraph every few
// sentences, and records where each word ends.
func (c *textCorpus) addSentence() {
	sep := " "
	if len(c.text) == 0 {
		sep = ""
	}
	if c.sent == 0 {
		if len(c.text) > 0 {
			sep = "\n\n"
		}
		c.sent = 3 + c.rng.intn(5)
	}
	c.sent--
	s := c.sentence()
	for i, w := range strings.Fields(s) {
		if i == 0 {
			c.text = append(c.text, sep...)
		} else {
			c.text = append(c.text, ' ')
		}
		c.text = append(c.text, w...)
		c.ends = append(c.ends, len(c.text))
	}
}

// sentence fills a random template.
func (c *textCorpus) sentence() string {
	tpl := sentenceTemplates[c.rng.intn(len(sentenceTemplates))]
	var b strings.Builder
	for i := 0; i < len(tpl); i++ {
		if tpl[i] != '{' {
			b.WriteByte(tpl[i])
			continue
		}
		j := strings.IndexByte(tpl[i:], '}')
		slot := tpl[i+1 : i+j]
		i += j
		words := promptSlots[slot]
		b.WriteString(words[c.rng.intn(len(words))])
	}
	s := b.String()
	// Capitalise the first letter.
	if s != "" && s[0] >= 'a' && s[0] <= 'z' {
		s = string(s[0]-'a'+'A') + s[1:]
	}
	return s
}

// splitmix is a tiny deterministic generator (SplitMix64); the corpus must not
// change with the Go version, so math/rand is not used.
type splitmix struct{ state uint64 }

func (s *splitmix) next() uint64 {
	s.state += 0x9e3779b97f4a7c15
	z := s.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (s *splitmix) intn(n int) int { return int(s.next() % uint64(n)) }

var sentenceTemplates = []string{
	"{subj} {verb} {obj} {place} {time}.",
	"{conn} {subj} {verb} {obj} {reason}.",
	"It was {adj} work, and {subj} {verb} {obj} {adv}.",
	"{time}, {subj} {verb} {obj} {place}.",
	"{subj} said that {obj} looked {adj} {time}.",
	"When {subj} {verb} {obj}, the whole street seemed {adj}.",
	"{subj} {verb} {obj}, then {verb} {obj} {place}.",
	"There was something {adj} about {obj} {place}.",
	"{conn} the weather turned {adj}, and {subj} {verb} {obj} {adv}.",
	"Many people still remember how {subj} {verb} {obj} {time}.",
	"{subj} kept a notebook about {obj}, which seemed {adj} to everyone {place}.",
	"Was it {adj}? Most likely it was, {reason}.",
	"Nobody asked why {subj} {verb} {obj}, but the answer was {adj}.",
	"{conn} {subj} walked {place} and {verb} {obj} {adv}.",
	"The story of {obj} is {adj}, {reason}.",
	"{subj} and {subj} {verb} {obj} together {time}.",
	"If you ask {subj} about {obj}, you will hear a {adj} account.",
	"{time}, the town learned that {subj} had found {obj} {place}.",
}

var promptSlots = map[string][]string{
	"subj": {
		"the engineer", "a small team", "the old librarian", "our neighbor", "the river pilot",
		"a curious student", "the night nurse", "the baker", "the committee", "a traveling musician",
		"the harbor master", "my grandmother", "the young architect", "the station manager",
		"a quiet farmer", "the mayor", "two apprentices", "the school teacher", "a retired sailor",
		"the shopkeeper", "the surveyor", "a local painter", "the ferry captain", "the gardener",
	},
	"verb": {
		"repaired", "described", "carried", "noticed", "measured", "painted", "borrowed", "studied",
		"arranged", "delivered", "photographed", "explained", "recorded", "questioned", "planted",
		"cleaned", "sketched", "collected", "inspected", "rebuilt", "discovered", "counted",
		"organized", "returned",
	},
	"obj": {
		"the wooden bridge", "a list of names", "the broken clock", "several maps", "the morning report",
		"an unusual letter", "the garden wall", "a basket of apples", "the long corridor",
		"the village records", "a set of old tools", "the lighthouse lamp", "the winter supplies",
		"a faded photograph", "the town square", "the narrow staircase", "a box of seeds",
		"the railway timetable", "the stone fountain", "a pile of newspapers", "the market stalls",
		"the church bells", "a handwritten recipe", "the fishing nets",
	},
	"place": {
		"near the harbor", "behind the market", "across the valley", "in the northern district",
		"at the edge of town", "inside the old mill", "along the coast", "beside the railway station",
		"on the hill above the river", "in the public library", "under the bridge", "by the lake",
		"in the back room", "at the crossroads", "outside the bakery", "in the upper village",
	},
	"time": {
		"early that morning", "before the storm arrived", "after the festival", "during the long winter",
		"late in the afternoon", "on the following day", "at the end of the season", "every spring",
		"just after sunrise", "in the middle of the night", "last summer", "a few weeks later",
		"before anyone woke up", "on market day",
	},
	"adj": {
		"quiet", "careful", "bright", "patient", "unusual", "steady", "narrow", "gentle", "practical",
		"remarkable", "ordinary", "difficult", "surprising", "peaceful", "tiring", "honest", "useful",
		"strange", "pleasant", "serious",
	},
	"adv": {
		"slowly", "carefully", "quietly", "without hurry", "with great care", "in silence", "cheerfully",
		"step by step", "as usual", "more than once", "with some help", "before lunch",
	},
	"conn": {
		"Meanwhile,", "Later,", "For a while,", "In the end,", "At first,", "Even so,", "By then,",
		"Afterwards,", "Of course,", "Once again,", "Sometimes", "Eventually",
	},
	"reason": {
		"because the road was closed", "since nobody else had the time", "so that the others could rest",
		"although the weather was poor", "because it mattered to the town", "as the season was changing",
		"while the children watched", "because the old plans were lost", "even though it was late",
		"since the workshop was empty",
	},
}

package vllmsim

// Output text: natural-looking sentences of short words. Every output token is one word of at most
// four letters (with its leading space), a comma or a full stop, so the simulator's own tokenizer
// gives the output text exactly completion_tokens tokens.

var outputWords = [...]string{
	"the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on",
	"not", "this", "are", "at", "from", "have", "or", "one", "had", "but", "what", "all", "were",
	"when", "we", "can", "an", "your", "each", "how", "up", "out", "them", "then", "many", "some",
	"so", "into", "has", "more", "two", "like", "see", "time", "make", "than", "been", "who", "its",
	"now", "find", "long", "down", "day", "get", "come", "made", "may", "part", "data", "load",
	"fast", "slow", "user", "wait", "plan", "work", "test", "keep", "good", "less", "much", "very",
	"also", "just", "only", "over", "such", "well", "most", "even", "new", "want", "any", "give",
	"last", "next", "real", "same", "sure", "true", "form", "line", "view", "turn", "move", "live",
	"show", "hold", "run", "path", "node", "cost", "rate", "step", "task", "tool", "code", "file",
	"page", "text", "word", "rule", "case", "idea", "note", "fact", "GPU", "far", "near", "safe",
}

// splitmix is a tiny deterministic PRNG (SplitMix64).
type splitmix uint64

func (s *splitmix) next() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// textGen produces a request's output tokens in order.
type textGen struct {
	rng       splitmix
	count     int // tokens produced
	sentence  int // words left in the current sentence
	capital   bool
	lastPunct bool
}

func newTextGen(seed, requestSeq uint64) *textGen {
	g := &textGen{rng: splitmix(seed*0x2545f4914f6cdd1d ^ requestSeq), capital: true}
	g.sentence = g.sentenceLen()
	return g
}

func (g *textGen) sentenceLen() int { return 6 + int(g.rng.next()%12) }

// next returns the next token's text.
func (g *textGen) next() string {
	defer func() { g.count++ }()
	if g.sentence == 0 {
		g.sentence = g.sentenceLen()
		g.capital, g.lastPunct = true, true
		return "."
	}
	if !g.lastPunct && !g.capital && g.sentence > 2 && g.rng.next()%9 == 0 {
		g.lastPunct = true
		return ","
	}
	g.sentence--
	w := outputWords[g.rng.next()%uint64(len(outputWords))]
	if g.capital && w[0] >= 'a' && w[0] <= 'z' {
		w = string(w[0]-'a'+'A') + w[1:]
	}
	g.capital, g.lastPunct = false, false
	if g.count == 0 {
		return w
	}
	return " " + w
}

// tokenID returns the id the simulator's tokenizer gives one output token's text.
func tokenID(piece string) uint32 {
	if len(piece) > 1 && piece[0] == ' ' {
		return pieceID(piece[1:], true)
	}
	return pieceID(piece, false)
}

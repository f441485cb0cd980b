package prober

// This file holds the seeded draws of a conversation's per-turn values (a
// follow-up's new tokens, the think time before it): a range in the config
// ("1024-4096", "5s-1m") is drawn per turn, reproducibly.

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// IntRange is a count that is fixed (Min == Max) or drawn uniformly from
// [Min, Max] per use.
type IntRange struct{ Min, Max int }

// Fixed reports whether r is one value.
func (r IntRange) Fixed() bool { return r.Max <= r.Min }

// String writes r as the config reads it: "2048" or "1024-4096".
func (r IntRange) String() string {
	if r.Fixed() {
		return strconv.Itoa(r.Min)
	}
	return fmt.Sprintf("%d-%d", r.Min, r.Max)
}

// ParseIntRange reads "N" or "LO-HI" (both positive, LO < HI; spaces around
// the dash allowed). The error says what was expected.
func ParseIntRange(s string) (IntRange, error) {
	s = strings.TrimSpace(s)
	lo, hi, isRange := strings.Cut(s, "-")
	a, errA := strconv.Atoi(strings.TrimSpace(lo))
	if !isRange {
		if errA != nil || a < 1 {
			return IntRange{}, fmt.Errorf("%q is not a positive count or range; expected a whole number such as 2048 or LOW-HIGH such as 1024-4096", s)
		}
		return IntRange{a, a}, nil
	}
	b, errB := strconv.Atoi(strings.TrimSpace(hi))
	switch {
	case errA != nil || errB != nil || a < 1 || b < 1:
		return IntRange{}, fmt.Errorf("%q is not a positive count or range; expected a whole number such as 2048 or LOW-HIGH such as 1024-4096", s)
	case b <= a:
		return IntRange{}, fmt.Errorf("range %q is empty or reversed; expected LOW-HIGH with LOW < HIGH, such as 1024-4096", s)
	}
	return IntRange{a, b}, nil
}

// Draw is a seeded generator of per-turn values (math/rand/v2's PCG). One
// Draw serves one conversation; it is not safe for concurrent use.
//
// Reproducibility: NewDraw(seed, n) gives the same sequence for the same
// seed and stream n on every run and platform, so conversation n of a run
// draws the same values whatever the other conversations do.
type Draw struct{ r *rand.Rand }

// NewDraw returns the draws of stream n of seed.
func NewDraw(seed, n uint64) *Draw { return &Draw{r: rand.New(rand.NewPCG(seed, n))} }

// Int draws from r: r.Min when r is fixed (no draw is consumed).
func (d *Draw) Int(r IntRange) int {
	if r.Fixed() {
		return r.Min
	}
	return r.Min + d.r.IntN(r.Max-r.Min+1)
}

// Duration draws uniformly from [lo, hi]: lo when hi <= lo (no draw is
// consumed).
func (d *Draw) Duration(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(d.r.Int64N(int64(hi-lo)+1))
}

// thinkSeedSalt moves the think times' draws to a generator of their own, so
// drawing one kind of value never shifts the other's sequence.
const thinkSeedSalt uint64 = 0x7468696e6b74696d // "thinktim"

// conversationDraws returns conversation n's generators of seed: its new
// tokens' and its think times'.
func conversationDraws(seed, n uint64) (newTokens, think *Draw) {
	return NewDraw(seed, n), NewDraw(seed^thinkSeedSalt, n)
}

// ThinkTime draws the think time before the next follow-up from tt.
func (d *Draw) ThinkTime(tt ThinkTime) time.Duration { return d.Duration(tt.Min, tt.Max) }

// DefaultSeed is the seed of a scenario without conversation.seed: the
// FNV-1a hash of its name, so two runs of one config draw alike and two
// scenarios draw apart.
func DefaultSeed(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

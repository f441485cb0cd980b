package prober

// This file holds the seeded draws of a conversation's per-turn values (its
// think times): one generator per conversation, reproducible from its id.

import (
	"hash/fnv"
	"math/rand/v2"
	"time"
)

// Draw streams: each kind of per-turn value a conversation draws has its
// own PCG stream, so a new kind of draw never shifts the values of another.
const (
	drawStreamThinkTime uint64 = 0x7468696e6b74696d // "thinktim"
)

// conversationRand is the generator of one kind of draw (stream) of the
// conversation with the given id: PCG seeded with the FNV-1a 64-bit hash of
// the id and the stream. The same id always gives the same values, so a
// conversation's draws can be recomputed from the id its turns carry
// (Result.ConversationID, and the id_header when one is configured).
func conversationRand(id string, stream uint64) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(id)) // a hash.Hash never fails to write
	return rand.New(rand.NewPCG(h.Sum64(), stream))
}

// drawUniform returns lo when hi <= lo (a fixed value: nothing is drawn),
// else a uniform draw in [lo, hi], both ends included.
func drawUniform[T ~int | ~int64](r *rand.Rand, lo, hi T) T {
	if hi <= lo {
		return lo
	}
	return lo + T(r.Int64N(int64(hi-lo)+1))
}

// drawThinkTime is the think time before the next follow-up turn.
func drawThinkTime(r *rand.Rand, tt ThinkTime) time.Duration {
	return drawUniform(r, tt.Min, tt.Max)
}

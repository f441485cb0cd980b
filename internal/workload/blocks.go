package workload

import (
	"crypto/rand"
	"encoding/hex"
)

// NewSalt returns a fresh per-instance salt: 32 hex characters from
// crypto/rand. Probes under one salt share prompt blocks with one another;
// under different salts (or with a real user) never.
func NewSalt() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// BlockKey is the key of the prompt block a trace's hash id stands for under
// salt (the prompt text is derived from it, prober.SharedPrefix): the same
// id and salt always give the same key; another salt, another key.
func BlockKey(salt string, id uint64) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(salt); i++ {
		h ^= uint64(salt[i])
		h *= 1099511628211
	}
	return mix64(h ^ mix64(id+0x9e3779b97f4a7c15))
}

// mix64 is SplitMix64's finaliser.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

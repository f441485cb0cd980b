//go:build race

package compare

// raceEnabled: the race detector slows the seeded models tenfold.
const raceEnabled = true

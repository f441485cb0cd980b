//go:build race

package sweep

// raceEnabled: the race detector slows the client several-fold, so timing
// assertions against the simulated engine are loosened.
const raceEnabled = true

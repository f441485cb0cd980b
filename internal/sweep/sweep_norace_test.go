//go:build !race

package sweep

// raceEnabled: see sweep_race_test.go.
const raceEnabled = false

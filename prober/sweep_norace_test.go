//go:build !race

package prober

// raceEnabled: see sweep_race_test.go.
const raceEnabled = false

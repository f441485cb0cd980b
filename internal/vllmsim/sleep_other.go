//go:build !linux

package vllmsim

func newSleeper() sleeper { return timerSleeper{} }

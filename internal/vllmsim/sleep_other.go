//go:build !linux

package vllmsim

import "time"

func preciseSleep(d time.Duration) { time.Sleep(d) }

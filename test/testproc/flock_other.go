//go:build !unix

package testproc

import (
	"os"
	"time"
)

// flock is a no-op where there is no flock: tests then share the cores.
func flock(*os.File, bool) error { return nil }

// processCPU is not read where there is no getrusage.
func processCPU() (time.Duration, bool) { return 0, false }

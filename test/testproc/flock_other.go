//go:build !unix

package testproc

import (
	"os"
	"time"
)

// flock is a no-op where there is no flock: tests then share the cores.
func flock(*os.File, bool) error { return nil }

// ProcessCPU is not read where there is no getrusage.
func ProcessCPU() (time.Duration, bool) { return 0, false }

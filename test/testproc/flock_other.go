//go:build !unix

package testproc

import "os"

// flock is a no-op where there is no flock: tests then share the cores.
func flock(*os.File, bool) error { return nil }

package main

// Fills the version of a build without the Makefile's -ldflags (go build,
// go run) from the Go build information, before newApp reads it.
import _ "github.com/slaprobe/slaprobe/internal/buildinfo"

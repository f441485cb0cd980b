//go:build tools

// Package tools pins Ollama, the real inference engine (llama.cpp on CPU) the tests run, and
// gen2brain/malgo, whose module ships the miniaudio.h header that Ollama's module zip leaves out
// but its cgo build includes. A module of its own, so that neither touches the main go.mod.
package tools

import (
	_ "github.com/gen2brain/malgo"
	_ "github.com/ollama/ollama"
)

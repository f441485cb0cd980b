//go:build tools

// Package tools pins third-party programs the tests run, outside the main module.
package tools

import _ "github.com/llm-d/llm-d-inference-sim/cmd/llm-d-inference-sim"

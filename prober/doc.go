// Package prober measures one probe: a synthetic streaming request shaped
// like a real workload, timed where its bytes arrive (TTFT, inter-token
// latency, decode speed, end-to-end), with the engine's own timing when it
// reports one. It also holds what a probe needs around it: targets,
// scenarios and their thresholds, prompt calibration, results and failure
// reasons, and the scheduler that probes every target on its intervals,
// with its gates and holds.
//
// One file per API, api_<name>.go, holds its request and the decoding of its
// stream's events, and registers it (api.go); stream.go reads and times the
// SSE lines for all of them. Loading a target with many probes at once (a
// sweep) is package internal/sweep, which imports this one.
package prober

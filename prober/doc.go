// Package prober measures one probe: a synthetic streaming request shaped
// like a real workload, timed where its bytes arrive (TTFT, inter-token
// latency, decode speed, end-to-end), with the engine's own timing when it
// reports one. It also holds what a probe needs around it: targets,
// scenarios and their thresholds, prompt calibration, results and failure
// reasons, and the scheduler that probes every target on its intervals,
// with its gates and holds.
//
// One file per API decodes a stream: stream.go (chat and completions),
// api_responses.go and api_messages.go. Loading a target with many probes at
// once (a sweep) is package internal/sweep, which imports this one.
package prober

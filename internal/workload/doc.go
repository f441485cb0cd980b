// Package workload reads request traces (what a fleet really served: when
// each request came, how long its prompt and answer were, and which prompt
// blocks it shared with earlier requests) and turns them into probe shapes.
//
// The formats (docs/workloads.md names each publisher's description):
//
//   - mooncake: JSON lines {"timestamp": ms, "input_length", "output_length",
//     "hash_ids": [ids of 512-token prompt blocks]} (kvcache-ai/Mooncake,
//     FAST25-release);
//   - azure: CSV TIMESTAMP,ContextTokens,GeneratedTokens (the Azure LLM
//     inference traces 2023 and 2024, Azure/AzurePublicDataset);
//   - burstgpt: CSV Timestamp,Model,Request tokens,Response tokens,Total
//     tokens,Log Type, filterable by Model and Log Type (HPMLL/BurstGPT);
//   - csv and jsonl: any other trace, with its columns named in Spec.Columns.
//
// A trace is read as a stream (Reader.Next), one request at a time, in
// memory bounded by the longest line; Summarize reads a whole trace into a
// Summary of bounded size (requests, time span, rate, length percentiles,
// shared-prefix share). Generate writes synthetic traces in each format, for
// tests: nothing in the repository is taken from the published traces.
//
// The files: format.go (Spec, formats, errors), reader.go (the streaming
// readers), summary.go (Summarize, the length histogram), generate.go (the
// synthetic traces), sample.go (drawing probes from a trace), blocks.go
// (prompt blocks from hash ids), class.go (length classes), probe.go (a
// draw as a probe; the replay's sender), scenario.go (a scenario's
// workload: section, Shape), replay.go (the trace replayed at speed-ups, the
// headroom), headroom.go (slaprobe headroom's run, report and metrics file),
// live.go (the engine's live length mix, workload: live).
package workload

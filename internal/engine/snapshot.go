// Package engine reads an inference engine's own Prometheus metrics
// (vLLM and SGLang names, old and new) into one engine-neutral snapshot.
package engine

import "time"

// Snapshot is one scrape of an engine's /metrics, summed over its label
// sets (engines, model names). Has* fields say whether a family was present.
type Snapshot struct {
	Time   time.Time
	Flavor string // "vllm", "sglang" or "" when unknown

	Running, Waiting float64 // requests running / waiting in the queue
	HasQueue         bool
	KVCacheUsage     float64 // 0..1
	HasKVCache       bool

	GenerationTokens float64 // counter: output tokens generated
	PromptTokens     float64 // counter: prompt tokens processed
	HasTokens        bool

	QueueTimeSum, QueueTimeCount float64 // histogram sum/count of queue time, seconds
	HasQueueTime                 bool

	PrefixCacheQueries, PrefixCacheHits float64 // counters, tokens
	HasPrefixCache                      bool
}

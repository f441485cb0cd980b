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

	// Fields below were added after the first contract; all are optional.

	// Server-side TTFT and inter-token latency histograms (sum/count, seconds).
	// ITL falls back to the older time_per_output_token name.
	TTFTSum, TTFTCount float64
	HasTTFT            bool
	ITLSum, ITLCount   float64
	HasITL             bool

	// RequestsFinished is the count of the end-to-end latency histogram: a
	// counter of finished requests. With PromptTokens it gives the mean prompt
	// length of the real traffic.
	RequestsFinished    float64
	HasRequestsFinished bool

	// CacheHitRate is SGLang's prefix cache hit-rate gauge (0..1); vLLM
	// reports PrefixCacheQueries/Hits counters instead.
	CacheHitRate    float64
	HasCacheHitRate bool

	// Speculative decoding counters (vLLM): draft tokens proposed and
	// accepted; their ratio is the acceptance rate.
	SpecDraftTokens, SpecAcceptedTokens float64
	HasSpecDecode                       bool

	// Series is the number of label sets summed into Running (engines ×
	// models); 0 when the family was absent.
	Series int
}

// QueueDepth is the number of requests in the engine: running plus waiting.
func (s Snapshot) QueueDepth() float64 { return s.Running + s.Waiting }

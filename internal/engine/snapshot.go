// Package engine reads an inference engine's own Prometheus metrics
// (vLLM and SGLang names, old and new, and llama.cpp server's) into one
// engine-neutral snapshot.
package engine

import "time"

// Snapshot is one scrape of an engine's /metrics, summed over its label
// sets (engines, model names). Has* fields say whether a family was present.
type Snapshot struct {
	Time   time.Time
	Flavor string // "vllm", "sglang", "llamacpp" or "" when unknown

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

	// Fields below explain a slow tail (issue "the engine signals that
	// explain a slow tail"); all are optional.

	// WaitingCapacity and WaitingDeferred split Waiting by why a request
	// waits (vllm:num_requests_waiting_by_reason): for scheduling capacity,
	// or for a transient constraint (LoRA budget, KV transfer, blocked).
	WaitingCapacity, WaitingDeferred float64
	HasWaitingByReason               bool

	// Preemptions counts requests preempted (vLLM) or retracted (SGLang)
	// for want of KV cache: a counter.
	Preemptions    float64
	HasPreemptions bool

	// Prompt tokens by where their KV came from (counters): computed here,
	// found in the prefix cache, or received from another instance (vLLM's
	// external_kv_transfer). HasPromptKVTransfer is false where the engine
	// does not split the transfer out.
	PromptComputed, PromptCacheHit, PromptKVTransfer float64
	HasPromptBySource, HasPromptKVTransfer           bool

	// CacheTokensByTier is SGLang's cached prompt tokens by cache tier
	// (cache_source: device, host, storage); nil when absent.
	CacheTokensByTier map[string]float64

	// Sleeping is true when the engine reports it is asleep
	// (vllm:engine_sleep_state{sleep_state="awake"} is 0).
	Sleeping, HasSleepState bool

	// AdmissionRejections counts requests refused at admission
	// (vllm:admission_rejections_total, summed over reasons).
	AdmissionRejections    float64
	HasAdmissionRejections bool

	// KVTransferFailures counts failed KV transfers of disaggregated
	// prefill (vllm:nixl_num_failed_transfers_total).
	KVTransferFailures    float64
	HasKVTransferFailures bool

	// SpecAcceptRate is SGLang's speculative acceptance gauge (accepted /
	// draft tokens, 0..1), averaged over label sets.
	SpecAcceptRate    float64
	HasSpecAcceptRate bool

	// Hists holds the engine's own histograms; nil when it exports none,
	// and on snapshots a Watcher keeps only for rates.
	Hists *Histograms

	// Notes say what was present but not read, and why (a histogram with
	// too many buckets, label sets with different bounds). A Watcher logs
	// each distinct note once.
	Notes []string
}

// DepthWaiting is the waiting count that the queue-depth signals use: the
// requests waiting for scheduling capacity where the engine splits waits
// by reason, else all waiting requests. A request deferred for a LoRA
// budget or a KV transfer does not compete with a probe for a batch slot.
func (s Snapshot) DepthWaiting() float64 {
	if s.HasWaitingByReason {
		return s.WaitingCapacity
	}
	return s.Waiting
}

// QueueDepth is the number of requests in the engine: running plus waiting.
func (s Snapshot) QueueDepth() float64 { return s.Running + s.Waiting }

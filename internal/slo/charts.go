package slo

// Chart names: the data-chart attribute of every figure in report.html (and
// its element id, prefixed "chart-"). Grafana panels mirror the same list.
const (
	ChartHeadline            = "headline"
	ChartDecodeVsConcurrency = "decode-vs-concurrency"
	ChartITLVsConcurrency    = "itl-vs-concurrency"
	ChartScalingEfficiency   = "scaling-efficiency"
	ChartDecodeRange         = "decode-range"
	ChartTTFTRange           = "ttft-range"
	ChartTTFTVsQueueDepth    = "ttft-vs-queue-depth"
	ChartITLVsQueueDepth     = "itl-vs-queue-depth"
	ChartDecodeVsQueueDepth  = "decode-vs-queue-depth"
	ChartMaxSafeQueue        = "max-safe-queue"
	ChartSystemThroughput    = "system-throughput"
	ChartTokensPerHour       = "tokens-per-hour"
	ChartUseCaseTable        = "use-case-capacity"
	// ChartCapacity is one figure per use case; its id is
	// "chart-capacity-<scenario slug>".
	ChartCapacity         = "capacity"
	ChartQueueWait        = "queue-wait-vs-context"
	ChartPrefillVsContext = "prefill-vs-context"
	ChartPower            = "power-vs-context"
	// ChartConversations is one figure per conversation scenario; its id is
	// "chart-conversations-<scenario slug>".
	ChartConversations = "conversations"
	// ChartConversationCapacity is the table of the capacity in
	// conversations, ChartConversationSteps that of the conversation steps'
	// follow-ups.
	ChartConversationCapacity = "conversation-capacity"
	ChartConversationSteps    = "conversation-steps"
	// ChartCapacityOn is the table of capacities on the rules of
	// Config.CapacityOn; present when the report has any.
	ChartCapacityOn = "capacity-on"
)

// Charts lists every data-chart value report.html always contains (one
// capacity figure per use case comes on top).
var Charts = []string{
	ChartHeadline, ChartUseCaseTable,
	ChartDecodeVsConcurrency, ChartITLVsConcurrency, ChartScalingEfficiency, ChartDecodeRange, ChartTTFTRange,
	ChartTTFTVsQueueDepth, ChartITLVsQueueDepth, ChartDecodeVsQueueDepth, ChartMaxSafeQueue,
	ChartSystemThroughput, ChartTokensPerHour,
	ChartQueueWait, ChartPrefillVsContext, ChartPower,
}

// ChartHeadroom is the figure of a headroom report (slaprobe headroom):
// good share against speed-up, with the rule's line and the headroom.
const ChartHeadroom = "traffic-headroom"

package dashgen

import "fmt"

// The engine families slaprobe re-exports from the engine's own /metrics (collector/engine.go,
// docs/live-signals.md), one series per target unless a label is named. Their names are the
// contract of the collector; they are written once here so the queries below share them.
const (
	engWaitingByReason = "slaprobe_engine_requests_waiting_by_reason"              // gauge {reason="capacity"|"deferred"}
	engPreemptions     = "slaprobe_engine_preemptions_total"                       // counter: vLLM preemptions, SGLang retractions
	engPromptBySource  = "slaprobe_engine_prompt_tokens_by_source_total"           // counter {source="computed"|"cache_hit"|"kv_transfer"}
	engPhase           = "slaprobe_engine_request_phase_seconds"                   // histogram {phase="queue"|"prefill"|"decode"}, all traffic
	engTTFT            = "slaprobe_engine_ttft_seconds"                            // histogram, the engine's own, all traffic
	engITL             = "slaprobe_engine_inter_token_latency_seconds"             // histogram, the engine's own, all traffic
	engSleeping        = "slaprobe_engine_sleeping"                                // gauge: 1 asleep
	engRejections      = "slaprobe_engine_admission_rejections_total"              // counter
	engKVTransfer      = "slaprobe_engine_kv_transfer_seconds"                     // histogram
	engKVFailures      = "slaprobe_engine_kv_transfer_failures_total"              // counter
	engSpecDraft       = "slaprobe_engine_spec_decode_draft_tokens_total"          // counter
	engSpecAccepted    = "slaprobe_engine_spec_decode_accepted_tokens_total"       // counter
	engSpecRatio       = "slaprobe_engine_spec_decode_acceptance_ratio"            // gauge (SGLang)
	probeSpecRatio     = "slaprobe_spec_decode_acceptance_ratio"                   // histogram per probe
	engTiming          = "slaprobe_engine_queue_seconds"                           // per probe (tracing or the response)
	engTimingPrefill   = "slaprobe_engine_prefill_seconds"                         // per probe
	probeOutside       = "slaprobe_ttft_outside_engine_seconds"                    // per probe
	probeIntervalRule  = "target_scenario:slaprobe_probe_interval_seconds:mean_1d" // recording rule
)

// engineRate is the per-second rate of an engine counter, summed per target and the labels in by.
func engineRate(metric, by string, extra ...string) string {
	return fmt.Sprintf("sum by (%s) (rate(%s[$__rate_interval]))", by, sel(metric, append([]string{mTarget}, extra...)...))
}

// engineQuantile is the q-quantile of an engine histogram per target (and by), over window.
func engineQuantile(q, metric, by, window string, extra ...string) string {
	return fmt.Sprintf("histogram_quantile(%s, sum by (%s, le) (rate(%s[%s])))",
		q, by, sel(metric+"_bucket", append([]string{mTarget}, extra...)...), window)
}

// engineMean is the mean of an engine histogram per target (and by), over window.
func engineMean(metric, by, window string) string {
	return fmt.Sprintf("sum by (%s) (rate(%s[%s]))\n/\nsum by (%s) (rate(%s[%s]))",
		by, sel(metric+"_sum", mTarget), window, by, sel(metric+"_count", mTarget), window)
}

// probeMean is the mean of a per-probe histogram over window, per target and scenario.
func probeMean(metric, window string) string {
	return fmt.Sprintf("sum by (target, scenario) (rate(%s[%s]))\n/\nsum by (target, scenario) (rate(%s[%s]))",
		probeSel(metric+"_sum"), window, probeSel(metric+"_count"), window)
}

// tailRow is the "Why the tail" row: the engine's own account of what makes probes slow, beside
// what the probes measured. Each engine signal is there only where the engine exports it (see the
// engines table in docs/engines.md): a panel of an engine without it stays empty.
func tailRow(b *board) {
	b.row("Why the tail: the engine's own signals")

	// Queue: why requests wait, beside the TTFT they get.
	waiting := timeseries("Waiting requests by reason",
		"Requests waiting in the engine's queue, by why (vllm:num_requests_waiting_by_reason): capacity (no room "+
			"in the batch or the KV cache: more load than the engine serves; TTFT grows with it) or deferred "+
			"(a transient constraint: a LoRA adapter budget, a KV transfer still arriving, a blocked request). "+
			"Capacity waits beside a rising probe TTFT say the engine is full; deferred ones point at the constraint.",
		"short", nil,
		rangeQ(fmt.Sprintf("sum by (target, reason) (%s)", sel(engWaitingByReason, mTarget)), "{{reason}} {{target}}"),
	)
	// Stacked: the reasons add up to the engine's waiting requests.
	waiting.FieldConfig.Defaults.Custom.Stacking = &Stacking{Group: "A", Mode: "normal"}
	waiting.FieldConfig.Defaults.Custom.FillOpacity = 30
	b.add(12, 8, waiting)
	b.add(12, 8, timeseries("Probe TTFT p95 and SLA",
		"p95 TTFT of the probes over 15 min, per scenario, with the configured threshold dashed: read beside the "+
			"waiting requests on the left.",
		"s", bandsTTFT,
		rangeQ(orRule("target_scenario:slaprobe_ttft_seconds:p95_15m", histQuantile("0.95", "slaprobe_ttft_seconds", ruleBy, probeWindow)), "p95 "+legendTS),
		rangeQ(threshold("ttft_seconds"), "SLA {{scenario}}"),
	).thresholdLines())

	// Preemptions: running requests stalled to free KV cache, beside the ITL they cost.
	b.add(12, 8, timeseries("Preemptions per probe interval",
		"Preemptions (vLLM: a running request evicted from the KV cache and recomputed later; SGLang: a "+
			"retraction) the engine made, at the current rate, during one probe interval of each scenario: above "+
			"1, most probes share the engine with a preemption. Each one stalls a running request, which shows in "+
			"the probes' ITL on the right. Needs the recording rules (the mean probe interval).",
		"short", nil,
		rangeQ(fmt.Sprintf("%s\n* on (target) group_right ()\nmax by (target, scenario) (%s)",
			engineRate(engPreemptions, "target"), probeSel(probeIntervalRule)), "{{target}} {{scenario}}"),
	))
	b.add(12, 8, itlLines(timeseries("Probe ITL p95 and SLA",
		"p95 of the probes' mean inter-token latency over 15 min, with the configured threshold dashed. "+itlLinesText,
		"s", bandsITL,
		rangeQ(orRule("target_scenario:slaprobe_itl_seconds:p95_15m", histQuantile("0.95", "slaprobe_itl_seconds", ruleBy, probeWindow)), "p95 "+legendTS),
		rangeQ(threshold("itl_seconds"), "SLA {{scenario}}"),
		rangeQ(lineITLInstant, "line: instant"),
		rangeQ(lineITLCeiling, "line: MoE ceiling"),
	).thresholdLines()))

	// The prompt: computed, from the cache, or transferred.
	share := timeseries("Prompt tokens by source: the fleet's cache hit rate",
		"Share of all prompt tokens the engine computed, found in its prefix cache (cache_hit: the real hit "+
			"rate of the traffic, not the probes', which are cold on purpose) or received from another engine "+
			"(kv_transfer, disaggregated prefill). From vllm:prompt_tokens_by_source, which counts each prompt "+
			"token once (the older prefix_cache_queries/hits counted a waiting request again at every retry), or "+
			"SGLang's cached tokens by tier. A falling cache_hit share means more prefill per request: TTFT rises.",
		"percentunit", nil,
		rangeQ(fmt.Sprintf("%s\n/ on (target) group_left ()\n%s", engineRate(engPromptBySource, "target, source"), engineRate(engPromptBySource, "target")),
			"{{source}} {{target}}"),
	)
	share.FieldConfig.Defaults.Max = num(1)
	b.add(8, 8, share)

	// Where time goes: all traffic (the engine's histograms) beside the probes (their split).
	b.add(8, 8, timeseries("Phase split of all traffic (engine)",
		"Mean time a request of ALL traffic spent waiting in the queue, in prefill and in decode, from the engine's "+
			"own histograms (vllm:request_queue_time_seconds, _prefill_time_, _decode_time_), over 15 min. No engine "+
			"flag needed. Beside the probes' own split on the right: a queue that grows for both is load; one that "+
			"grows for the probes only is their scenario.",
		"s", nil,
		rangeQ(engineMean(engPhase, "target, phase", probeWindow), "{{phase}} {{target}}"),
	))
	b.add(8, 8, timeseries("Probes' TTFT split",
		"Mean TTFT of the probes over 15 min cut where it went: outside the engine (network, gateway, API "+
			"server), in the engine's queue, in prefill. Needs the engine's per-request timing (vLLM "+
			"--enable-per-request-metrics with the target's per_request_metrics, or its traces; docs/tracing.md).",
		"s", nil,
		rangeQ(probeMean(probeOutside, probeWindow), "outside {{target}} {{scenario}}"),
		rangeQ(probeMean(engTiming, probeWindow), "queue {{target}} {{scenario}}"),
		rangeQ(probeMean(engTimingPrefill, probeWindow), "prefill {{target}} {{scenario}}"),
	))

	// The engine's own latency of all traffic beside the client's.
	b.add(12, 8, timeseries("TTFT p95: the engine's, all traffic, vs the probes'",
		"Solid: p95 TTFT of every request as the engine measured it (vllm:time_to_first_token_seconds; from "+
			"arrival at the engine to its first token). Dotted: the probes' p95, from the client. A client TTFT "+
			"far above the engine's points outside the engine; both high, at the engine's queue or prefill.",
		"s", bandsTTFT,
		rangeQ(engineQuantile("0.95", engTTFT, "target", probeWindow), "engine {{target}}"),
		rangeQ(orRule("target_scenario:slaprobe_ttft_seconds:p95_15m", histQuantile("0.95", "slaprobe_ttft_seconds", ruleBy, probeWindow)), "probes "+legendTS),
	).dotted("^probes .*"))
	b.add(12, 8, timeseries("ITL p95: the engine's, all traffic, vs the probes'",
		"Solid: p95 inter-token latency of every request as the engine measured it "+
			"(vllm:inter_token_latency_seconds). Dotted: the p95 of the probes' mean ITL. A client ITL far above "+
			"the engine's points at a proxy that buffers the stream.",
		"s", bandsITL,
		rangeQ(engineQuantile("0.95", engITL, "target", probeWindow), "engine {{target}}"),
		rangeQ(orRule("target_scenario:slaprobe_itl_seconds:p95_15m", histQuantile("0.95", "slaprobe_itl_seconds", ruleBy, probeWindow)), "probes "+legendTS),
	).dotted("^probes .*"))

	// Speculative decoding: how many drafted tokens the engine keeps.
	acc := timeseries("Speculative decoding acceptance",
		"Share of drafted tokens the target model accepted. Solid: all traffic, from the engine's counters "+
			"(accepted ÷ draft tokens; vLLM, llama.cpp), or SGLang's spec_accept_rate gauge. Dotted: the median "+
			"acceptance of the probes, from each response (vLLM per-request metrics, llama.cpp timings). "+
			"Acceptance that falls makes decoding slower per token: read beside the decode speed.",
		"percentunit", nil,
		rangeQ(fmt.Sprintf("(\n%s\n/\n%s\n)\nor\nmax by (target) (%s)",
			engineRate(engSpecAccepted, "target"), engineRate(engSpecDraft, "target"), sel(engSpecRatio, mTarget)), "engine {{target}}"),
		rangeQ(histQuantile("0.5", probeSpecRatio, "target, scenario, api", probeWindow), "probes "+legendTS),
	).dotted("^probes .*")
	acc.FieldConfig.Defaults.Max = num(1)
	b.add(8, 8, acc)

	// Sleep and admission: probes that fail for a reason the operator chose or configured.
	b.add(8, 8, timeseries("Sleep state and admission rejections",
		"Dotted: 1 while the engine sleeps (vllm:engine_sleep_state; its weights offloaded or discarded): probes "+
			"fail on purpose and the probe-failure alerts stay quiet. Solid: requests/s the engine refused at "+
			"admission (its queue limits; answered 503), where it exports them.",
		"short", nil,
		rangeQ(fmt.Sprintf("max by (target) (%s)", sel(engSleeping, mTarget)), "asleep {{target}}"),
		rangeQ(engineRate(engRejections, "target"), "rejected/s {{target}}"),
	).dotted("^asleep .*").unitOf("^rejected/s .*", "reqps"))

	// Disaggregated prefill: present only where the engine transfers KV cache between instances.
	b.add(8, 8, timeseries("KV transfer (disaggregated prefill)",
		"Only with a KV connector (vLLM's NIXL): p95 time of a KV-cache transfer from the prefill to the decode "+
			"instance, and failed transfers per second (the request then recomputes its prompt). Empty elsewhere.",
		"s", nil,
		rangeQ(engineQuantile("0.95", engKVTransfer, "target", probeWindow), "transfer p95 {{target}}"),
		rangeQ(engineRate(engKVFailures, "target"), "failures/s {{target}}"),
	).unitOf("^failures/s .*", "short"))
}

// unitOf sets the unit of the series whose display name matches re: a second quantity on one chart.
func (p *Panel) unitOf(re, unit string) *Panel {
	p.FieldConfig.Overrides = append(p.FieldConfig.Overrides, Override{
		Matcher:    Matcher{ID: "byRegexp", Options: re},
		Properties: []Property{{ID: "unit", Value: unit}},
	})
	return p
}

package alertgen

import "fmt"

// Alerts on the engine's own signals (slaprobe_engine_*, collector/engine.go): the cause behind a
// probe SLA that breaks, or a change in the traffic that will break it. Each joins a signal of the
// engine, per target, with what the probes measured, per scenario, so it names both.

// asleep is true for a target whose engine slept at any scrape of the window: vLLM's sleep mode
// (vllm:engine_sleep_state) offloads or discards the weights on purpose, and the engine refuses
// requests until woken. Probe failures then are explained, not a page.
func asleep(window string) string {
	return fmt.Sprintf("max by (job, instance, target) (max_over_time(slaprobe_engine_sleeping[%s])) == 1", window)
}

// unlessAsleep appends "unless the target's engine slept in window" to expr (which ends in a newline).
func unlessAsleep(expr, window string) string {
	return expr + "unless on (job, instance, target)\n" + asleep(window) + "\n"
}

// overThreshold is a probe latency rule above its scenario's SLA threshold, as the other alerts join it.
func overThreshold(rule, metric string) string {
	return fmt.Sprintf(`(
  %s
  > on (job, instance, scenario) group_left ()
  max by (job, instance, scenario) (slaprobe_sla_threshold{metric=%q})
)`, rule, metric)
}

// cacheHitRate is the share of the engine's prompt tokens served from its prefix cache over window.
func cacheHitRate(window, offset string) string {
	return fmt.Sprintf(`sum by (job, instance, target) (rate(slaprobe_engine_prompt_tokens_by_source_total{source="cache_hit"}[%s]%s))
/
sum by (job, instance, target) (rate(slaprobe_engine_prompt_tokens_by_source_total[%s]%s))`, window, offset, window, offset)
}

// specAcceptance is the engine's speculative-decoding acceptance over window: accepted ÷ draft tokens.
func specAcceptance(window, offset string) string {
	return fmt.Sprintf(`sum by (job, instance, target) (rate(slaprobe_engine_spec_decode_accepted_tokens_total[%s]%s))
/
sum by (job, instance, target) (rate(slaprobe_engine_spec_decode_draft_tokens_total[%s]%s))`, window, offset, window, offset)
}

func engineAlerts() []Rule {
	return []Rule{
		commentedAlert(`---------------------------------------------------------------------------------------------
Why the tail: the engine's own signals beside the probes (docs/live-signals.md).

The probes' p95 ITL is over its threshold while the engine keeps preempting running requests
(vLLM preemptions, SGLang retractions): the KV cache is too small for the batch, and every
preempted request stalls, then recomputes its prompt. Preemptions in each of the last 10 minutes'
5-minute windows; without the engine's counter this stays quiet.`,
			"SlaprobeEnginePreempting", "warning", "10m", overThreshold("target_scenario:slaprobe_itl_seconds:p95_15m", "itl_seconds")+`
and on (job, instance, target)
(sum by (job, instance, target) (rate(slaprobe_engine_preemptions_total[5m])) > 0)
`,
			`{{ $labels.target }} preempts requests while ITL of {{ $labels.scenario }} breaks its SLA.`,
			`p95 ITL of scenario {{ $labels.scenario }} on target {{ $labels.target }} (model {{ $labels.model }}) is {{ $value | humanizeDuration }}, over its threshold, and the engine has preempted running requests for 10 minutes{{ with printf "sum(rate(slaprobe_engine_preemptions_total{job=%q,instance=%q,target=%q}[5m]))" $labels.job $labels.instance $labels.target | query }} ({{ . | first | value | printf "%.2f" }}/s){{ end }}: its KV cache is too small for the batch it runs. Lower max_num_seqs, give the engine more KV cache, or scale out.`),

		commentedAlert(`The probes' p95 TTFT is over its threshold while requests wait for capacity (vLLM's
num_requests_waiting_by_reason{reason="capacity"} above 0 at every scrape of 5 minutes, for 10
minutes): the engine is full, the queue is load, not a deferred request (a LoRA budget, a KV
transfer) nor anything outside the engine.`,
			"SlaprobeEngineQueueCapacity", "warning", "10m", overThreshold("target_scenario:slaprobe_ttft_seconds:p95_15m", "ttft_seconds")+`
and on (job, instance, target)
(max by (job, instance, target) (min_over_time(slaprobe_engine_requests_waiting_by_reason{reason="capacity"}[5m])) > 0)
`,
			`Requests queue for capacity on {{ $labels.target }} while TTFT of {{ $labels.scenario }} breaks its SLA.`,
			`p95 TTFT of scenario {{ $labels.scenario }} on target {{ $labels.target }} (model {{ $labels.model }}) is {{ $value | humanizeDuration }}, over its threshold, and requests have waited for scheduling capacity at every scrape for 10 minutes{{ with printf "max(slaprobe_engine_requests_waiting_by_reason{job=%q,instance=%q,target=%q,reason=\"capacity\"})" $labels.job $labels.instance $labels.target | query }} ({{ . | first | value | printf "%.0f" }} now){{ end }}: the engine serves more load than it can. Scale out or shed load.`),

		commentedAlert(`The engine refuses requests at admission (its queue limits; clients get 503) in each of the last
10 minutes' 5-minute windows: users see errors the probes may not (a probe is one request now and
then). vllm:admission_rejections_total is pending upstream; engines without it stay quiet.`,
			"SlaprobeEngineAdmissionRejections", "warning", "10m", `sum by (job, instance, target) (rate(slaprobe_engine_admission_rejections_total[5m])) > 0
`,
			`{{ $labels.target }} refuses requests at admission.`,
			`The engine of target {{ $labels.target }} has refused {{ $value | printf "%.2f" }} requests/s at admission for 10 minutes: its waiting queue is at its limit (max queued requests or tokens), and those users got 503. Scale out, or raise the limit if TTFT allows.`),

		commentedAlert(`The fleet's prefix-cache hit rate (prompt tokens served from the cache ÷ all prompt tokens,
from vllm:prompt_tokens_by_source) over 30 minutes fell under half of the day before, which was at
least 20 %: more prompts are prefilled in full, so TTFT will rise with the same load. Information,
not a page: a change of traffic (new users, new system prompts) does it as surely as a fault.`,
			"SlaprobeEngineCacheHitRateCollapsed", "info", "30m", `(
`+indent(cacheHitRate("30m", ""), 2)+`
)
< 0.5 *
(
`+indent(cacheHitRate("1d", " offset 30m"), 2)+`
)
and on (job, instance, target)
(
`+indent(cacheHitRate("1d", " offset 30m"), 2)+`
)
>= 0.2
`,
			`The prefix-cache hit rate of {{ $labels.target }} collapsed.`,
			`Over the last 30 minutes {{ $value | humanizePercentage }} of the prompt tokens of target {{ $labels.target }} came from its prefix cache, under half of the day before: more prompts are computed in full and TTFT rises with the same load. Traffic that changed, a router that stopped keeping sessions on one replica, or a cache that is too small.`),

		commentedAlert(`Speculative decoding accepts under half the share of drafted tokens it accepted the day before
(which was at least 30 %), over 30 minutes: decoding falls back towards one token per step. The
draft model no longer fits the traffic (other languages, other tasks), or a deployment changed it.`,
			"SlaprobeEngineSpecDecodeAcceptanceCollapsed", "info", "30m", `(
`+indent(specAcceptance("30m", ""), 2)+`
)
< 0.5 *
(
`+indent(specAcceptance("1d", " offset 30m"), 2)+`
)
and on (job, instance, target)
(
`+indent(specAcceptance("1d", " offset 30m"), 2)+`
)
>= 0.3
`,
			`Speculative decoding on {{ $labels.target }} accepts far fewer drafts.`,
			`Over the last 30 minutes the engine of target {{ $labels.target }} accepted {{ $value | humanizePercentage }} of its drafted tokens, under half of the day before: each decode step yields fewer tokens, so ITL rises. Look at the traffic's mix and at the draft model or MTP settings.`),
	}
}

package alertgen

import (
	"fmt"
	"strconv"
	"strings"
)

// Rules that do not depend on Params. Comments say why each is built the way it is.

func latencyRecordingRules() []Rule {
	return []Rule{
		{Record: "target_scenario:slaprobe_ttft_seconds:p95_15m", Expr: `histogram_quantile(0.95, sum by (job, instance, target, model, scenario, api, le) (rate(slaprobe_ttft_seconds_bucket[15m])))
or
histogram_quantile(0.95, sum by (job, instance, target, model, scenario, api) (rate(slaprobe_ttft_seconds[15m])))
`},
		{Record: "target_scenario:slaprobe_itl_seconds:p95_15m", Expr: `histogram_quantile(0.95, sum by (job, instance, target, model, scenario, api, le) (rate(slaprobe_itl_seconds_bucket[15m])))
or
histogram_quantile(0.95, sum by (job, instance, target, model, scenario, api) (rate(slaprobe_itl_seconds[15m])))
`},
		{Record: "target_scenario:slaprobe_e2e_latency_seconds:p95_15m", Expr: `histogram_quantile(0.95, sum by (job, instance, target, model, scenario, api, le) (rate(slaprobe_e2e_latency_seconds_bucket[15m])))
or
histogram_quantile(0.95, sum by (job, instance, target, model, scenario, api) (rate(slaprobe_e2e_latency_seconds[15m])))
`},
		{Record: "target_scenario:slaprobe_decode_tokens_per_second:p10_15m", Expr: `histogram_quantile(0.10, sum by (job, instance, target, model, scenario, api, le) (rate(slaprobe_decode_tokens_per_second_bucket[15m])))
or
histogram_quantile(0.10, sum by (job, instance, target, model, scenario, api) (rate(slaprobe_decode_tokens_per_second[15m])))
`},
	}
}

func probeRecordingRules() []Rule {
	return []Rule{
		// A short answer (the server ended it early) is an answer: only errors count against it.
		{Record: "target_scenario:slaprobe_probe_success:ratio_1h", Expr: `sum by (job, instance, target, model, scenario, api) (rate(slaprobe_probes_total{result!="error"}[1h]))
/
sum by (job, instance, target, model, scenario, api) (rate(slaprobe_probes_total[1h]))
`},
		{Record: "target_scenario:slaprobe_probe_interval_seconds:mean_1d", Expr: `(
  max_over_time(slaprobe_probe_last_timestamp_seconds[1d])
  -
  min_over_time(slaprobe_probe_last_timestamp_seconds[1d])
)
/
(changes(slaprobe_probe_last_timestamp_seconds[1d]) > 0)
`},
		{Record: "target_scenario:slaprobe_probe_last_timestamp_seconds:success", Expr: `slaprobe_probe_last_timestamp_seconds and slaprobe_probe_success == 1
`},
		// The share of TTFT spent outside the engine, over the probes whose engine reported its queue
		// and prefill (docs/tracing.md): sum of outside ÷ sum of outside + queue + prefill.
		{Record: "target_scenario:slaprobe_ttft_outside_engine:ratio_15m", Expr: `(
  sum by (job, instance, target, model, scenario, api) (rate(slaprobe_ttft_outside_engine_seconds_sum[15m]))
  /
  (
    sum by (job, instance, target, model, scenario, api) (rate(slaprobe_ttft_outside_engine_seconds_sum[15m]))
    + sum by (job, instance, target, model, scenario, api) (rate(slaprobe_engine_queue_seconds_sum[15m]))
    + sum by (job, instance, target, model, scenario, api) (rate(slaprobe_engine_prefill_seconds_sum[15m]))
  )
)
or
(
  histogram_sum(sum by (job, instance, target, model, scenario, api) (rate(slaprobe_ttft_outside_engine_seconds[15m])))
  /
  (
    histogram_sum(sum by (job, instance, target, model, scenario, api) (rate(slaprobe_ttft_outside_engine_seconds[15m])))
    + histogram_sum(sum by (job, instance, target, model, scenario, api) (rate(slaprobe_engine_queue_seconds[15m])))
    + histogram_sum(sum by (job, instance, target, model, scenario, api) (rate(slaprobe_engine_prefill_seconds[15m])))
  )
)
`},
		{Record: "target_scenario:slaprobe_live_max_safe_queue_depth:measured", Expr: `slaprobe_live_max_safe_queue_depth
and slaprobe_live_max_safe_queue_depth_lower_bound == 0
and slaprobe_live_max_safe_queue_depth_samples >= 20
`},
	}
}

func otherAlerts() []Rule {
	return []Rule{
		commentedAlert(`---------------------------------------------------------------------------------------------
Probe outcomes.

The last probe failed and no probe has succeeded for three probe intervals: about three failures
in a row. Without a success in the last day, the oldest probe of the day stands in for it. An
engine that slept in the last 10 minutes (vLLM sleep mode, slaprobe_engine_sleeping) refuses
probes on purpose: no page.`,
			"SlaprobeProbesFailing", "critical", "1m", unlessAsleep(`slaprobe_probe_success == 0
and on (job, instance, target, model, scenario, api)
(
  time()
  -
  (
    max_over_time(target_scenario:slaprobe_probe_last_timestamp_seconds:success[1d])
    or
    min_over_time(slaprobe_probe_last_timestamp_seconds[1d])
  )
)
> on (job, instance, target, model, scenario, api)
3 * target_scenario:slaprobe_probe_interval_seconds:mean_1d
unless on (job, instance, target, model, scenario, api)
slaprobe_scenario_context_needed_tokens
`, "10m"),
			`Probes of {{ $labels.scenario }} on {{ $labels.target }} keep failing.`,
			`Every probe of scenario {{ $labels.scenario }} on target {{ $labels.target }} (model {{ $labels.model }}) for at least three probe intervals has failed. slaprobe_probe_errors_total{reason} says why.`),
		alert("SlaprobeProbeSuccessRateLow", "warning", "15m", unlessAsleep(`target_scenario:slaprobe_probe_success:ratio_1h < 0.9
unless on (job, instance, target, model, scenario, api)
slaprobe_scenario_context_needed_tokens
`, "1h"),
			`Under 90 % of probes of {{ $labels.scenario }} on {{ $labels.target }} succeed.`,
			`Only {{ $value | humanizePercentage }} of the probes of scenario {{ $labels.scenario }} on target {{ $labels.target }} (model {{ $labels.model }}) succeeded over the last hour.`),
		commentedAlert(`No probe started for three measured intervals, or for a day when no interval is measured any
more. The gauge is a probe's start time, set when the probe ends: three intervals leave room for
a probe that runs until its timeout. Disabled scenarios are not probed on purpose, and a target
being swept has its probes held on purpose (slaprobe_sweep_probes_held).`,
			"SlaprobeProbesStale", "warning", "5m", `(
  (time() - slaprobe_probe_last_timestamp_seconds)
  > on (job, instance, target, model, scenario, api)
  3 * target_scenario:slaprobe_probe_interval_seconds:mean_1d
  or
  (time() - slaprobe_probe_last_timestamp_seconds) > 86400
)
unless on (job, instance, target, model, scenario, api)
slaprobe_scenario_enabled == 0
unless on (job, instance, target)
slaprobe_sweep_probes_held == 1
`,
			`No probe of {{ $labels.scenario }} on {{ $labels.target }} for {{ $value | humanizeDuration }}.`,
			`The last probe of scenario {{ $labels.scenario }} on target {{ $labels.target }} started {{ $value | humanizeDuration }} ago, more than three times its usual interval. The scheduler is stuck or probes hang; slaprobe itself is up.`),
		alert("SlaprobeDown", "critical", "5m", `up{job="slaprobe"} == 0 or absent(up{job="slaprobe"})
`,
			`Prometheus cannot scrape slaprobe{{ with $labels.instance }} at {{ . }}{{ end }}.`,
			`slaprobe{{ with $labels.instance }} at {{ . }}{{ end }} has not been scraped for 5 minutes: no probe metrics arrive, so no SLA alert can fire.`),
		commentedAlert(`---------------------------------------------------------------------------------------------
Measurement quality: the probes run, but measure the wrong thing.`,
			"SlaprobePrefixCacheHits", "warning", "15m", `sum by (job, instance, target, model, scenario, api) (rate(slaprobe_probe_cache_hits_total[1h]))
/
sum by (job, instance, target, model, scenario, api) (rate(slaprobe_probes_total{result="success"}[1h]))
> 0.1
`,
			`Probes of {{ $labels.scenario }} on {{ $labels.target }} hit the prefix cache.`,
			`{{ $value | humanizePercentage }} of the successful probes of scenario {{ $labels.scenario }} on target {{ $labels.target }} in the last hour were partly served from the prefix cache. Their TTFT, E2E and prefill speed are not recorded, so the TTFT and E2E alerts see fewer probes, or none.`),
		alert("SlaprobePromptLengthMismatch", "warning", "15m", `sum by (job, instance, target, model, scenario, api) (rate(slaprobe_probe_prompt_length_mismatches_total[1h]))
/
sum by (job, instance, target, model, scenario, api) (rate(slaprobe_probes_total[1h]))
> 0.1
`,
			`Probe prompts of {{ $labels.scenario }} on {{ $labels.target }} have the wrong length.`,
			`{{ $value | humanizePercentage }} of the probes of scenario {{ $labels.scenario }} on target {{ $labels.target }} (model {{ $labels.model }}) in the last hour had a prompt length, as the server counted it, outside the scenario's tolerance, although slaprobe recalibrates after each one. Their latencies are not comparable with the SLA.`),
		alert("SlaprobeScenarioDisabled", "warning", "15m", `slaprobe_scenario_enabled == 0
`,
			`Scenario {{ $labels.scenario }} is not probed on {{ $labels.target }}.`,
			`slaprobe has disabled scenario {{ $labels.scenario }} on target {{ $labels.target }} (model {{ $labels.model }}), e.g. because its prompt does not fit the model's max_model_len. Its SLA is not being checked.`),
		commentedAlert(`A scenario whose prompt the server cuts to its context window fails at every probe; this says
why and what to set, instead of SlaprobeProbesFailing, which leaves such a scenario out.`,
			"SlaprobeScenarioDoesNotFit", "warning", "15m", `slaprobe_scenario_context_needed_tokens > 0
`,
			`Scenario {{ $labels.scenario }} does not fit the context window of {{ $labels.target }}.`,
			`Target {{ $labels.target }} (model {{ $labels.model }}) cuts the prompt of scenario {{ $labels.scenario }} to its context window and answers anyway, so the scenario cannot be measured: give the server a context of at least {{ $value }} tokens (prompt plus output), or leave the scenario out on this target.`),
		alert("SlaprobeConfigReloadFailed", "warning", "10m", `slaprobe_config_last_reload_successful == 0
`,
			`slaprobe at {{ $labels.instance }} failed to reload its config.`,
			`The last config reload of slaprobe at {{ $labels.instance }} failed; it keeps probing with the previous config, and will not start with the file as it is.`),
		commentedAlert(`---------------------------------------------------------------------------------------------
Capacity: the server still meets the SLA, but with less headroom.`,
			"SlaprobeSweepCapacityDropped", "warning", "5m", `slaprobe_capacity_max_safe_concurrency
< 0.75 * max_over_time(slaprobe_capacity_max_safe_concurrency[7d])
and on (job, instance, target, model, scenario, mode)
(
    label_replace(
      slaprobe_sweep_change_ratio{metric="max_safe_queue"} < 0
      and on (job, instance, target, model, scenario, metric) slaprobe_sweep_change_significant == 1,
      "mode", "burst", "", "")
  or
    label_replace(
      slaprobe_sweep_change_ratio{metric="use_case_capacity"} < 0
      and on (job, instance, target, model, scenario, metric) slaprobe_sweep_change_significant == 1,
      "mode", "closed_loop", "", "")
)
`,
			`Swept capacity of {{ $labels.target }} ({{ $labels.scenario }}, {{ $labels.mode }}) dropped.`,
			`The last {{ $labels.mode }} sweep of scenario {{ $labels.scenario }} on target {{ $labels.target }} (model {{ $labels.model }}) found a max safe concurrency of {{ $value }}, less than three quarters of the best in the last 7 days, and a significant drop from the sweep before it (past a measured N).`),
		alert("SlaprobeSweepRegression", "warning", "5m", `(
    slaprobe_sweep_change_ratio{metric=~"ttft|itl|e2e"} > 0
  or
    slaprobe_sweep_change_ratio{metric=~"decode|prefill"} < 0
)
and on (job, instance, target, model, scenario, metric) slaprobe_sweep_change_significant == 1
`,
			`The last sweep of {{ $labels.target }} ({{ $labels.scenario }}) got significantly worse in {{ $labels.metric }}.`,
			`Against the previous sweep of target {{ $labels.target }} (model {{ $labels.model }}), the median {{ $labels.metric }} of scenario {{ $labels.scenario }} changed by {{ $value | humanizePercentage }} at its worst closed-loop step: the change is at least 5% and its bootstrap interval excludes zero at the comparison's family level (95% for all the figures of the comparison together, so two sweeps of an unchanged server give any significant change at most 5% of the time). The daemon's /sweep/{{ $labels.target }}/report.html shows every change.`),
		alert("SlaprobeLiveMaxSafeQueueDepthDropped", "warning", "30m", `target_scenario:slaprobe_live_max_safe_queue_depth:measured
< 0.75 * quantile_over_time(0.5, target_scenario:slaprobe_live_max_safe_queue_depth:measured[1d])
`,
			`Live max safe queue depth of {{ $labels.target }} ({{ $labels.scenario }}) dropped.`,
			`From production traffic, TTFT of scenario {{ $labels.scenario }} on target {{ $labels.target }} (model {{ $labels.model }}) now crosses its threshold at a queue depth of {{ $value | printf "%.1f" }}, less than three quarters of the day's median.`),
	}
}

// alert builds an alerting rule with the annotations every alert has.
func alert(name, severity, forDur, expr, summary, description string) Rule {
	return Rule{
		Alert:  name,
		Expr:   expr,
		For:    forDur,
		Labels: map[string]string{"severity": severity},
		Annotations: map[string]string{
			"summary":     summary,
			"description": description,
			"runbook_url": RunbookBase + "#" + strings.ToLower(name),
		},
	}
}

// commentedAlert is alert with a comment above it in the rule file.
func commentedAlert(comment, name, severity, forDur, expr, summary, description string) Rule {
	r := alert(name, severity, forDur, expr, summary, description)
	r.Comment = comment
	return r
}

// newAlerts cover the engine, the GPUs, live capacity, sweeps and slaprobe's own metrics.
func newAlerts() []Rule {
	return []Rule{
		commentedAlert(`---------------------------------------------------------------------------------------------
slaprobe itself and what it reads.

slaprobe is scraped (up == 1) but exports none of its own metrics: another program answers on its
port, or metric relabelling drops them. Or no probe has been counted for 15 minutes although slaprobe
is up: no target is configured. Either way no SLA alert can fire.`,
			"SlaprobeMetricsAbsent", "critical", "10m", `(
  up{job="slaprobe"} == 1
  unless on (job, instance)
  slaprobe_build_info{job="slaprobe"}
)
or
(
  count by (job, instance) (up{job="slaprobe"} == 1)
  unless on (job, instance)
  count by (job, instance) (slaprobe_probes_total{job="slaprobe"})
)
`,
			`slaprobe{{ with $labels.instance }} at {{ . }}{{ end }} is scraped but exports no probe metrics.`,
			`Prometheus scrapes slaprobe{{ with $labels.instance }} at {{ . }}{{ end }}, but slaprobe_build_info or every slaprobe_probes_total series is missing: something else answers on the port, metric relabelling drops the series, or no target is configured. No SLA alert can fire for it.`),

		commentedAlert(`The scenario's p95 TTFT is over its threshold and most of the time is spent outside the engine:
not in its queue, not in prefill, but in the network, a gateway or proxy, or the API server's
parsing and tokenization. Needs the engine's own timing (vLLM --enable-per-request-metrics, or its
traces sent to slaprobe's OTLP receiver); without it the ratio is absent and this stays quiet.`,
			"SlaprobeTTFTOutsideEngine", "warning", "10m", `target_scenario:slaprobe_ttft_outside_engine:ratio_15m > 0.5
and on (job, instance, target, model, scenario, api)
(
  target_scenario:slaprobe_ttft_seconds:p95_15m
  > on (job, instance, scenario) group_left ()
  max by (job, instance, scenario) (slaprobe_sla_threshold{metric="ttft_seconds"})
)
`,
			`TTFT of {{ $labels.target }} ({{ $labels.scenario }}) breaches its SLA outside the engine.`,
			`p95 TTFT of scenario {{ $labels.scenario }} on target {{ $labels.target }} (model {{ $labels.model }}) is over its threshold, and {{ $value | humanizePercentage }} of the probes' TTFT over 15 minutes was spent outside the engine (the engine's own queue and prefill are the rest): look at the gateway, proxy, network or API server in front of the engine, not at the engine.`),

		commentedAlert(`slaprobe cannot read the engine's own /metrics: live signals (queue depth, live capacity,
scaling efficiency) stop, and sweeps that require engine metrics pause. Probes still run.`,
			"SlaprobeEngineMetricsDown", "warning", "10m", `slaprobe_engine_up == 0
`,
			`slaprobe cannot read the engine metrics of {{ $labels.target }}.`,
			`The last scrapes of target {{ $labels.target }}'s own /metrics by slaprobe{{ with $labels.instance }} at {{ . }}{{ end }} failed or held no vLLM or SGLang metrics, for 10 minutes. Live queue depth, live max safe queue depth and live scaling efficiency are not updated; sweeps that require engine metrics pause. slaprobe_engine_scrape_errors_total counts the failures.`),

		commentedAlert(`NVML worked in the last day and stopped: a driver upgrade, a container restarted without the
GPU runtime. A host that never had NVML (no GPU) stays quiet.`,
			"SlaprobeNVMLDown", "warning", "10m", `slaprobe_nvml_up == 0
and on (job, instance)
max_over_time(slaprobe_nvml_up[1d]) == 1
`,
			`slaprobe{{ with $labels.instance }} at {{ . }}{{ end }} lost access to the GPUs (NVML).`,
			`slaprobe{{ with $labels.instance }} at {{ . }}{{ end }} read GPU power and energy through NVML during the last day but cannot now: power, energy per token and cost metrics have stopped.`),

		commentedAlert(`A GPU drawing within 5 % of its enforced power limit for 15 minutes is power-throttled: clocks,
and so decode speed, drop under load.`,
			"SlaprobeGPUAtPowerLimit", "warning", "15m", `avg_over_time(slaprobe_gpu_power_watts[5m])
>= on (job, instance, gpu, uuid) group_left ()
0.95 * slaprobe_gpu_power_limit_watts
`,
			`GPU {{ $labels.gpu }} on {{ $labels.instance }} runs at its power limit.`,
			`GPU {{ $labels.gpu }} ({{ $labels.name }}, {{ $labels.uuid }}) seen by slaprobe at {{ $labels.instance }} has averaged {{ $value | printf "%.0f" }} W, within 5 % of its power limit, for 15 minutes: it is throttling its clocks.`),

		commentedAlert(`---------------------------------------------------------------------------------------------
Live capacity, from production traffic.

Under 50 % live scaling efficiency (the reports' "poor" band) for 30 minutes: each user gets much
less than a single stream's decode speed. The series exists only while requests run.`,
			"SlaprobeLiveScalingEfficiencyLow", "warning", "30m", `avg_over_time(slaprobe_live_scaling_efficiency_ratio[10m]) < 0.5
`,
			`Live scaling efficiency of {{ $labels.target }} is under 50 %.`,
			`Target {{ $labels.target }} (model {{ $labels.model }}) turns its running requests into only {{ $value | humanizePercentage }} of the output a single stream would get per request, for 30 minutes: the batch is so large that every user decodes slowly.`),

		commentedAlert(`The engine's queue (running + waiting requests) is within 20 % of the live max safe queue depth
of a scenario, where probe TTFT crosses its threshold: the next burst breaks that scenario's SLA.
Only measured depths count (not a lower bound, at least 20 probes behind it).`,
			"SlaprobeLiveQueueNearMaxSafe", "warning", "10m", `(
  max_over_time(slaprobe_engine_requests_running[5m])
  + on (job, instance, target)
  max_over_time(slaprobe_engine_requests_waiting[5m])
)
>= on (job, instance, target) group_right ()
0.8 * target_scenario:slaprobe_live_max_safe_queue_depth:measured
`,
			`The queue of {{ $labels.target }} is near the max safe depth of {{ $labels.scenario }}.`,
			`Target {{ $labels.target }} (model {{ $labels.model }}) has had {{ $value | printf "%.0f" }} requests running or waiting, within 20 % of the queue depth at which TTFT of scenario {{ $labels.scenario }} crosses its threshold, for 10 minutes. Scale out or shed load before the queue grows further.`),

		commentedAlert(`---------------------------------------------------------------------------------------------
Sweeps.

The latest sweep of a target stopped before the end (paused too long, window closed, shutdown);
the exported capacity is from an older sweep, or partial.`,
			"SlaprobeSweepFailed", "warning", "5m", `slaprobe_sweep_last_attempt_success == 0
unless on (job, instance)
slaprobe_sweep_running == 1
`,
			`The last sweep of {{ $labels.target }} did not finish.`,
			`The most recent sweep of target {{ $labels.target }} by slaprobe{{ with $labels.instance }} at {{ . }}{{ end }} stopped before its end (paused too long, its window closed, or slaprobe shut down). slaprobe_sweep_paused and slaprobe's log say why; capacity metrics are from the steps it finished or an older sweep.`),

		commentedAlert(`The schedule (sweep.schedule) was due to start a sweep over an hour ago and none has started:
a sweep still runs past the next due time (sweeps take longer than the schedule allows), or the sweep
job stopped. slaprobe_sweep_next_scheduled_timestamp_seconds is absent when sweeps are off or run only
on demand.`,
			"SlaprobeSweepOverdue", "warning", "15m", `time() - slaprobe_sweep_next_scheduled_timestamp_seconds > 3600
`,
			`The sweep schedule of slaprobe{{ with $labels.instance }} at {{ . }}{{ end }} is {{ $value | humanizeDuration }} behind.`,
			`slaprobe{{ with $labels.instance }} at {{ . }}{{ end }} was due to start a scheduled sweep {{ $value | humanizeDuration }} ago (sweep.schedule) and none has started: an earlier sweep still runs past the next due time, so sweeps take longer than the schedule allows, or the sweep job stopped. The capacity metrics are getting old.`),
	}
}

// conversationAlerts cover conversation scenarios (docs/conversations.md).
func conversationAlerts(p Params) []Rule {
	return []Rule{
		commentedAlert(`---------------------------------------------------------------------------------------------
Conversation scenarios (scenarios with conversation:, e.g. general_chat_followup).

A conversation probe is a cold priming turn, then follow-ups that repeat its prompt (same
cache_salt, same nonce) plus new tokens. Per follow-up slaprobe exports the share of the prompt the
server reported as cached (slaprobe_conversation_cache_hit_ratio, absent when the server reports no
cached_tokens) and the TTFT saved against the priming turn as a share of that turn's TTFT
(slaprobe_conversation_ttft_saved_ratio). Both are gauges holding the last follow-up, so the alert also
requires follow-ups in the window (the gauges of a target that stopped answering are stale).
general_chat_followup runs every 5 min and long_document_followup every 10 min: 20 min holds two to
four follow-ups, and every one must miss. A server that never hit does not fire: nothing changed.`,
			"SlaprobePrefixCachingNotWorking", "warning", "10m", `(
  (
    max_over_time(slaprobe_conversation_cache_hit_ratio[20m]) < 0.1
    and on (job, instance, target, model, scenario, api)
    max_over_time(slaprobe_conversation_cache_hit_ratio[1d] offset 20m) >= 0.5
  )
  or
  (
    max_over_time(slaprobe_conversation_ttft_saved_ratio[20m]) < 0.2
    and on (job, instance, target, model, scenario, api)
    max_over_time(slaprobe_conversation_ttft_saved_ratio[1d] offset 20m) >= 0.5
  )
)
and on (job, instance, target, model, scenario, api)
sum by (job, instance, target, model, scenario, api) (increase(slaprobe_conversation_turns_total[20m])) > 0
`,
			`Prefix caching is not working on {{ $labels.target }} ({{ $labels.scenario }}).`,
			`Conversation follow-up turns of scenario {{ $labels.scenario }} on target {{ $labels.target }} (model {{ $labels.model }}) were served from the prefix cache in the day before, but in the last 20 minutes the best cached share of a follow-up's prompt was {{ with printf "max_over_time(slaprobe_conversation_cache_hit_ratio{job=%q,instance=%q,target=%q,model=%q,scenario=%q}[20m])" $labels.job $labels.instance $labels.target $labels.model $labels.scenario | query }}{{ . | first | value | humanizePercentage }}{{ else }}not reported{{ end }} and the best TTFT saving against the cold priming turn was {{ with printf "max_over_time(slaprobe_conversation_ttft_saved_ratio{job=%q,instance=%q,target=%q,model=%q,scenario=%q}[20m])" $labels.job $labels.instance $labels.target $labels.model $labels.scenario | query }}{{ . | first | value | humanizePercentage }}{{ else }}unknown{{ end }}: a follow-up turn costs users about what a cold prompt of the whole conversation costs.`),
		conversationCacheLost(p.ConversationCache),
	}
}

// conversationCacheLost fires when agents' conversations lose their prefix cache: a share of the
// follow-ups whose class is known miss (docs/alerts.md#slaprobeconversationcachelost).
func conversationCacheLost(c ConversationCacheLost) Rule {
	by := "job, instance, target, model, scenario, api"
	w := dur(c.Window)
	known := fmt.Sprintf(`sum by (%s) (increase(slaprobe_conversation_turns_total{cache!="unknown"}[%s]))`, by, w)
	share := func(class string) string {
		return fmt.Sprintf(`sum by (%s) (increase(slaprobe_conversation_turns_total{cache=%q}[%s]))`, by, class, w)
	}
	tokens := func(name string) string {
		return fmt.Sprintf(`sum by (%s) (increase(slaprobe_conversation_%s_tokens_total{source="reported"}[%s]))`, by, name, w)
	}
	// q renders the share num/den of the alert's series in the description, or "none".
	sel := `job=%q,instance=%q,target=%q,model=%q,scenario=%q`
	args := `$labels.job $labels.instance $labels.target $labels.model $labels.scenario`
	q := func(num, den, none string) string {
		return fmt.Sprintf(`{{ with printf "sum(increase(%s[%s])) / sum(increase(%s[%s]))" %s %s | query }}{{ . | first | value | humanizePercentage }}{{ else }}%s{{ end }}`,
			num, w, den, w, args, args, none)
	}
	class := func(c string) string {
		return q(`slaprobe_conversation_turns_total{`+sel+`,cache=\"`+c+`\"}`, `slaprobe_conversation_turns_total{`+sel+`,cache!=\"unknown\"}`, "none")
	}
	recomputed := q(`slaprobe_conversation_recomputed_tokens_total{`+sel+`,source=\"reported\"}`,
		`slaprobe_conversation_history_tokens_total{`+sel+`,source=\"reported\"}`, "an unknown share")
	forDur := dur(c.For)
	if c.For == 0 {
		forDur = ""
	}
	rs, ms := strconv.FormatFloat(c.RecomputedShare, 'g', -1, 64), strconv.FormatFloat(c.MissShare, 'g', -1, 64)
	return commentedAlert(fmt.Sprintf(`Conversation scenarios lose their prefix cache: over %[1]s the follow-up turns prefilled again,
beyond their new tokens, more than %[2]s of what the engine had already seen of the conversation
(slaprobe_conversation_recomputed_tokens_total / slaprobe_conversation_history_tokens_total, counted
where the server reports cached tokens), or more than %[4]s of the follow-ups whose cache class is known
were misses (under 10 %% cached: the only class a TTFT-inferred share tells apart, as it may read a hit
up to 0.1 low, its stated error). Round-robin over two replicas recomputes about 12 %% on a 12-turn coding_agent while
missing only its first follow-up (9 %%); affinity recomputes under 1 %%. At least %[3]d known
follow-ups in the window, so one miss on a quiet probe never fires (1/%[3]d <= %[4]s). The window,
shares, floor and for are alertgen.Params.ConversationCache.`, w, rs, c.MinFollowUps, ms),
		"SlaprobeConversationCacheLost", "warning", forDur, fmt.Sprintf(`(
  (
    %s
    /
    %s
  ) > %s
  or
  (
    %s
    /
    %s
  ) > %s
)
and on (%s)
%s >= %d
`, tokens("recomputed"), tokens("history"), rs, share("miss"), known, ms, by, known, c.MinFollowUps),
		`Conversations of {{ $labels.scenario }} on {{ $labels.target }} lose their prefix cache.`,
		fmt.Sprintf(`Follow-up turns of conversation scenario {{ $labels.scenario }} on target {{ $labels.target }} (model {{ $labels.model }}) in the last %s prefilled again %s of what the engine had already seen of the conversation, beyond their new tokens (more than %s fires; unknown where the server reports no cached tokens), and %s of them were cache misses (more than %s fires); hits %s, partial %s. A high recomputed share with few misses points at a router without affinity (each follow-up lands on a replica that saw the conversation turns before), misses on every follow-up at prefix caching off, misses that rise with load and a full KV cache at a cache too small for the load.`,
			w, recomputed, pctOf(c.RecomputedShare), class("miss"), pctOf(c.MissShare), class("hit"), class("partial")))
}

// pctOf prints a share as a percentage: 0.25 is "25 %".
func pctOf(v float64) string { return strconv.FormatFloat(v*100, 'g', -1, 64) + " %" }

package dashgen

import "fmt"

// warmRow adds the warm-context row (docs/warm.md): cold against warm TTFT per scenario, that is per
// context size, the share of follow-up prompts served from the prefix cache, and the state of
// SlaprobePrefixCachingNotWorking. Its series exist only for scenarios with `warm:`.
func warmRow(b *board) {
	b.row("Warm context: prefix caching")
	prime := probeSel("slaprobe_warm_prime_ttft_seconds")
	b.add(12, 8, timeseries("Cold vs warm TTFT",
		"Per warm scenario (one context size each): TTFT of the last priming turn, a cold prompt of the whole "+
			"context (dashed), and of the last follow-up turn, which repeats that context plus new tokens with "+
			"the same cache_salt. With prefix caching the follow-up costs about what its new tokens cost.",
		"s", nil, "",
		rangeQ(prime, "cold "+legendTS),
		rangeQ(prime+" - "+probeSel("slaprobe_warm_ttft_saved_seconds"), "warm "+legendTS),
	).dotted("^cold .*"))
	hit := timeseries("Cache-hit share and TTFT saved",
		"Solid: share of the last follow-up's prompt the server reported as cached (cached_tokens / "+
			"prompt_tokens; absent when it reports none). Dashed: TTFT the follow-up saved, as a share of the "+
			"cold priming turn's. The alert fires when both had been high and every follow-up for 20 min "+
			"shows a share under 10 % or a saving under 20 %.",
		"percentunit", nil, "",
		rangeQ(probeSel("slaprobe_warm_cache_hit_ratio"), "cached "+legendTS),
		rangeQ(probeSel("slaprobe_warm_ttft_saved_ratio"), "saved "+legendTS),
	).dotted("^saved .*")
	hit.FieldConfig.Defaults.Max = num(1)
	b.add(12, 8, hit)
	b.add(12, 4, stat("Follow-ups that missed the cache (range)",
		"Follow-up turns reported with no cached token, over all follow-ups in the time range. A miss is a "+
			"result, not a failed probe; behind a router it can mean the follow-up reached another replica "+
			"(docs/runbook-warm.md).",
		"percentunit", steps(colorExcellent, 0.5, colorPoor),
		instantQ(fmt.Sprintf("sum by (target, scenario) (increase(%s[$__range]))\n/\nsum by (target, scenario) (increase(%s[$__range]))",
			probeSel("slaprobe_warm_cache_misses_total"), probeSel("slaprobe_warm_followups_total")), legendTS)))
	b.add(12, 4, stat("Prefix caching alert",
		"SlaprobePrefixCachingNotWorking (alerts/slaprobe-warm.rules.yml): firing or pending per target and "+
			"scenario; empty while it is quiet.",
		"", nil,
		instantQ(sel("ALERTS", `alertname="SlaprobePrefixCachingNotWorking"`, mTarget), "{{alertstate}} {{target}} {{scenario}}")).
		mapValues(map[string]MappingValue{"1": {Text: "active", Color: colorPoor, Index: 0}}))
}

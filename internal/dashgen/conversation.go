package dashgen

import (
	"fmt"

	"github.com/prometheus/common/model"

	"github.com/slaprobe/slaprobe/internal/alertgen"
)

// conversationRow adds the row of conversation scenarios (`conversation:`; docs/conversations.md):
// how their follow-ups fared with the prefix cache (hit, partial, miss, unknown) over time, the share of what the engine had already seen that its cache served, the conversations'
// waiting time, follow-up against priming TTFT, and the state of the two alerts on the cache
// (SlaprobeConversationCacheLost, SlaprobePrefixCachingNotWorking). Its series exist only for
// conversation scenarios.
func conversationRow(b *board) {
	b.row("Agent conversations: prefix cache and routing")
	const byClass = "target, scenario, api, cache"
	classes := timeseries("Follow-ups by cache class",
		"Successful follow-up turns of conversation scenarios per 15 min, stacked by how much of what the "+
			"engine had already seen of the conversation (the turn before's prompt and answer) its cache served, "+
			"as the server reports it or, where it does not, inferred from the turn's TTFT: hit (at "+
			"least 90 %), partial, miss (under 10 %), unknown (neither). Misses "+
			"from the first follow-up on, with partials, point at a router without affinity; misses that come "+
			"with load at a KV cache too small; misses everywhere at prefix caching off (docs/alerts.md).",
		"short", nil,
		rangeQ(fmt.Sprintf("sum by (%s) (increase(%s[%s]))", byClass, probeSel("slaprobe_conversation_turns_total"), probeWindow),
			"{{cache}} "+legendTS))
	c := classes.FieldConfig.Defaults.Custom
	c.FillOpacity, c.Stacking = 60, &Stacking{Group: "A", Mode: "normal"}
	for _, cc := range []struct{ class, color string }{
		{"hit", colorExcellent}, {"partial", colorAcceptable}, {"miss", colorPoor}, {"unknown", colorClassUnknown},
	} {
		classes.FieldConfig.Overrides = append(classes.FieldConfig.Overrides, Override{
			Matcher:    Matcher{ID: "byRegexp", Options: "^" + cc.class + " .*"},
			Properties: []Property{{ID: "color", Value: FieldColor{Mode: "fixed", FixedColor: cc.color}}},
		})
	}
	b.add(12, 8, classes)

	cached := timeseries("Cached share of what the engine had seen",
		"Quantiles over 15 min of slaprobe_conversation_cached_ratio: per follow-up, the share of the turn "+
			"before's prompt that the engine served from its cache (only servers that report cached tokens). "+
			"p50 near 1 is a conversation that keeps its cache; p10 falling shows the follow-ups that lose it. "+
			"Round-robin over two replicas sits near 0.8 (the replica saw the conversation two turns before).",
		"percentunit", nil,
		rangeQ(histQuantile("0.5", "slaprobe_conversation_cached_ratio", ruleBy, probeWindow), "p50 "+legendTS),
		rangeQ(histQuantile("0.10", "slaprobe_conversation_cached_ratio", ruleBy, probeWindow), "p10 "+legendTS),
	).dotted("^p10 .*")
	cached.FieldConfig.Defaults.Max = num(1)
	b.add(12, 8, cached)

	const convWindow = "1h" // one conversation per probe interval (5 min or more): 15 min would hold three
	b.add(12, 8, timeseries("Conversation waiting time",
		"p50 and p95 over the last hour of slaprobe_conversation_seconds: each whole conversation's waiting "+
			"time, the sum of its turns' E2E (think time excluded), for conversations whose every turn "+
			"succeeded. A conversation that loses its cache waits a cold prefill per miss.",
		"s", nil,
		rangeQ(histQuantile("0.5", "slaprobe_conversation_seconds", ruleBy, convWindow), "p50 "+legendTS),
		rangeQ(histQuantile("0.95", "slaprobe_conversation_seconds", ruleBy, convWindow), "p95 "+legendTS),
	).dotted("^p95 .*"))

	prime := probeSel("slaprobe_conversation_prime_ttft_seconds")
	convOnly := "\nand on (" + ruleBy + ")\n" + prime
	b.add(12, 8, timeseries("Follow-up vs priming TTFT",
		"Per conversation scenario: TTFT of the last priming turn, a cold prompt of the conversation's first "+
			"turn (dotted), and p50 and p95 over 15 min of its follow-up turns (slaprobe_ttft_seconds of a "+
			"conversation scenario holds only follow-ups), which repeat the conversation so far plus new "+
			"tokens. With the cache kept, a follow-up costs about what its new tokens cost; a follow-up near "+
			"or above the priming line found nothing cached.",
		"s", nil,
		rangeQ(prime, "priming "+legendTS),
		rangeQ("(\n"+histQuantile("0.5", "slaprobe_ttft_seconds", ruleBy, probeWindow)+"\n)"+convOnly, "follow-up p50 "+legendTS),
		rangeQ("(\n"+histQuantile("0.95", "slaprobe_ttft_seconds", ruleBy, probeWindow)+"\n)"+convOnly, "follow-up p95 "+legendTS),
	).dotted("^priming .*"))

	hit := timeseries("Cache-hit share and TTFT saved",
		"Solid: share of the last follow-up's prompt the server reported as cached (cached_tokens / "+
			"prompt_tokens; absent when it reports none). Dashed: TTFT the follow-up saved, as a share of the "+
			"cold priming turn's. SlaprobePrefixCachingNotWorking fires when both had been high and every "+
			"follow-up for 20 min shows a share under 10 % or a saving under 20 %.",
		"percentunit", nil,
		rangeQ(probeSel("slaprobe_conversation_cache_hit_ratio"), "cached "+legendTS),
		rangeQ(probeSel("slaprobe_conversation_ttft_saved_ratio"), "saved "+legendTS),
	).dotted("^saved .*")
	hit.FieldConfig.Defaults.Max = num(1)
	b.add(12, 8, hit)

	lost := alertgen.Default().ConversationCache
	known := fmt.Sprintf("sum by (target, scenario, api) (increase(%s[$__range]))", probeSel("slaprobe_conversation_turns_total", `cache!="unknown"`))
	b.add(6, 8, stat("Follow-ups that missed (range)",
		fmt.Sprintf("Follow-up turns classed miss over those whose class is known (hit, partial or miss) in "+
			"the time range. SlaprobeConversationCacheLost fires at more than %.0f %% over %s (red from "+
			"there), or when follow-ups recompute more than %.0f %% of the history they could have reused "+
			"(slaprobe_conversation_recomputed_tokens_total over slaprobe_conversation_history_tokens_total, "+
			"reported counts), which a router without affinity does while most follow-ups still read partial "+
			"or hit. A miss is a result, not a failed probe.", lost.MissShare*100, model.Duration(lost.Window), lost.RecomputedShare*100),
		"percentunit", steps(colorExcellent, lost.MissShare, colorPoor),
		instantQ(fmt.Sprintf("sum by (target, scenario, api) (increase(%s[$__range]))\n/\n%s",
			probeSel("slaprobe_conversation_turns_total", `cache="miss"`), known), legendTS)))
	b.add(6, 8, stat("Conversation cache alerts",
		"SlaprobeConversationCacheLost and SlaprobePrefixCachingNotWorking (alerts/slaprobe.rules.yml, "+
			"generated by internal/alertgen; runbooks in docs/alerts.md): firing or pending per target and "+
			"scenario; empty while they are quiet.",
		"", nil,
		instantQ(sel("ALERTS", `alertname=~"SlaprobeConversationCacheLost|SlaprobePrefixCachingNotWorking"`, mTarget),
			"{{alertname}} {{alertstate}} {{target}} {{scenario}}")).
		mapValues(map[string]MappingValue{"1": {Text: "active", Color: colorPoor, Index: 0}}))
}

// colorClassUnknown is the follow-ups whose cache class is unknown: grey, neither good nor bad.
const colorClassUnknown = "#8c959f"

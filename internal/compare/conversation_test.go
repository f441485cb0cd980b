package compare

import (
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/prober"
)

// conversationRun is the report of a conversation sweep over N = 1…6 whose
// follow-ups all hit the cache up to N=keeps and then hit only every fifth
// time; a miss costs 10× the TTFT of a hit. The capacity in conversations
// comes from the sweep's own rule.
func conversationRun(keeps int) *report.Report {
	t0 := time.Date(2026, 11, 26, 15, 0, 0, 0, time.UTC)
	s := sweep.ScenarioResult{
		ScenarioSpec: sweep.ScenarioSpec{Name: "coding_agent", Family: prober.FamilyCustom, InputTokens: 384, OutputTokens: 32, Turns: 4, NewTokens: 32, Thresholds: prober.Thresholds{TTFT: time.Second}},
	}
	for n := 1; n <= 6; n++ {
		const followUps = 60
		var cached, ttft, good, prime []float64
		hit := 0
		for i := range followUps {
			share, v := 1.0, 0.010+0.0001*float64(i%7)
			if n > keeps && i%5 != 0 {
				share, v = 0, 0.100+0.001*float64(i%7)
			}
			if share == 1 {
				hit++
			}
			cached, ttft, good = append(cached, share), append(ttft, v), append(good, 1)
		}
		for i := range followUps / 3 {
			prime = append(prime, 0.120+0.001*float64(i%5))
		}
		hs := float64(hit) / followUps
		s.ClosedLoop = append(s.ClosedLoop, sweep.StepResult{Scenario: s.Name, Mode: sweep.ModeClosedLoop, Concurrency: n,
			Started: t0, Finished: t0.Add(2 * time.Second), WindowSeconds: 1.2, Requests: followUps, Succeeded: followUps, SuccessRatio: 1,
			Good: followUps, GoodShare: 1, TTFT: sweep.Summarize(ttft), SystemThroughput: 100 * float64(n),
			Samples: sweep.Samples{TTFT: ttft, Good: good, CachedShare: cached, PrimingTTFT: prime},
			Conversation: &sweep.ConversationStep{Conversations: followUps / 3, FollowUps: followUps, Hit: hit, Miss: followUps - hit,
				HitShare: &hs, CachedShare: sweep.Summarize(cached).Mean, PrimingTTFT: sweep.Summarize(prime).Dist()}})
	}
	opts := sweep.DefaultCapacityOptions()
	c := sweep.ConversationCapacityOf(s.ClosedLoop, s.Thresholds, opts)
	s.ConversationCapacity = &c
	res := &sweep.Result{Target: "sim", Model: "m", Started: t0, Finished: t0.Add(time.Minute),
		Settings: sweep.Settings{ClosedLoop: []int{1, 2, 3, 4, 5, 6}, StepSeconds: 1.2, MaxSafeTTFTSeconds: 3,
			CapacityStat: sweep.StatMean, CapacityMinSuccess: 0.95, ConversationHitShare: opts.HitShare},
		Scenarios: []sweep.ScenarioResult{s}}
	rep := report.FromSweep(res, report.Meta{Model: "m"}, 0, false)
	rep.SchemaVersion = report.SchemaVersion
	return rep
}

// TestCompareConversations: compare judges a conversation sweep's
// follow-up TTFT, cached share, priming TTFT and capacity in conversations
// like any figure: a server whose cache now holds 2 conversations instead
// of 4 is worse on the capacity and, at N=3 and 4, on the cached share and
// the follow-ups' TTFT; the priming turns, one per conversation, are too
// few for a verdict by the small-sample rules.
func TestCompareConversations(t *testing.T) {
	base, cur := conversationRun(4), conversationRun(2)
	if got := base.Capacity.Conversations[0].Value; got != 4 {
		t.Fatalf("base capacity in conversations %d; want 4", got)
	}
	c := Compare(base, cur, Options{}).Comparison
	cc := c.CapacityOf(report.CapacityConversations, "coding_agent")
	if cc == nil || cc.Base.Value != 4 || cc.New.Value != 2 || cc.Verdict != report.VerdictWorse {
		t.Fatalf("capacity in conversations = %+v; want 4 → 2, worse", cc)
	}
	for _, n := range []int{3, 4} {
		sc := c.Step("coding_agent", sweep.ModeClosedLoop, n)
		if sc == nil {
			t.Fatalf("N=%d not compared", n)
		}
		for metric, want := range map[string]string{report.MetricCachedShare: report.VerdictWorse, report.MetricTTFT: report.VerdictWorse} {
			m := sc.Metric(metric)
			if m == nil || m.Verdict != want {
				t.Errorf("N=%d %s = %+v; want %s", n, metric, m, want)
			}
		}
		// One priming turn per conversation: 20 per step, 4 slices, too few
		// for the report's level; the small-sample rule says how many
		// would do.
		if m := sc.Metric(report.MetricPrimingTTFT); m == nil || m.Verdict != report.VerdictUnknown || m.NeededPerRun <= 4 || m.Change != 0 {
			t.Errorf("N=%d priming TTFT = %+v; want unchanged, no verdict, more slices needed", n, m)
		}
	}
	// Below both capacities nothing changed.
	if m := c.Step("coding_agent", sweep.ModeClosedLoop, 2).Metric(report.MetricCachedShare); m == nil || m.Significant() {
		t.Errorf("N=2 cached share = %+v; want compared, no change", m)
	}
	// A run against itself: no change anywhere.
	same := Compare(base, conversationRun(4), Options{}).Comparison
	if cc := same.CapacityOf(report.CapacityConversations, "coding_agent"); cc == nil || cc.Verdict != report.VerdictNoChange {
		t.Errorf("same run: capacity in conversations = %+v; want no change", cc)
	}
	for _, f := range same.Findings() {
		t.Errorf("same run: finding %+v", f)
	}
	// Judged against another hit share, the capacities get no verdict.
	other := conversationRun(2)
	other.Capacity.Conversations[0].HitShare = 0.8
	if cc := Compare(base, other, Options{}).Comparison.CapacityOf(report.CapacityConversations, "coding_agent"); cc == nil ||
		cc.Verdict != report.VerdictUnknown || cc.Note == "" {
		t.Errorf("other hit share: capacity in conversations = %+v; want no verdict, with a note", cc)
	}
}

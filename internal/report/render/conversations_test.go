package render

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/prober"
	"github.com/slaprobe/slaprobe/test/browser"
)

// conversationSweep is a sweep of one conversation scenario shaped like
// the eviction proof's run on the simulated engine (internal/sweep,
// TestSweepSimConversationEviction: a KV cache for 4 conversations):
// follow-ups hit up to N=4, then miss and slow to the cold priming turn's
// TTFT. Its capacity in conversations comes from the sweep's own rule.
func conversationSweep() *sweep.Result {
	t0 := time.Date(2026, 11, 26, 15, 0, 0, 0, time.UTC)
	type row struct {
		n, convs, hit, partial, miss int
		followMS, p95MS, primeMS     float64
	}
	rows := []row{
		{1, 12, 36, 0, 0, 3.8, 5.9, 24.4}, {2, 18, 54, 0, 0, 5.4, 7.3, 37.1}, {3, 21, 63, 0, 0, 8.5, 12.7, 56.5},
		{4, 24, 72, 0, 0, 8.3, 13.9, 60.0}, {5, 14, 8, 28, 6, 55.3, 102, 82.9}, {6, 12, 2, 2, 32, 106.1, 182.5, 114.7},
		{8, 8, 1, 0, 23, 189.3, 222.5, 199.0},
	}
	s := sweep.ScenarioResult{
		ScenarioSpec: sweep.ScenarioSpec{Name: "coding_agent", Family: prober.FamilyCustom, InputTokens: 384, OutputTokens: 32, Turns: 4, NewTokens: 32, Thresholds: prober.Thresholds{TTFT: time.Second}},
	}
	for _, r := range rows {
		f := r.hit + r.partial + r.miss
		share := float64(r.hit) / float64(f)
		cached := make([]float64, 0, f)
		for i := range f {
			switch {
			case i < r.hit:
				cached = append(cached, 1)
			case i < r.hit+r.partial:
				cached = append(cached, 0.5)
			default:
				cached = append(cached, 0)
			}
		}
		ttft := sweep.Summary{Count: f, Mean: r.followMS / 1e3, P50: r.followMS / 1e3 * 0.9, P95: r.p95MS / 1e3}
		s.ClosedLoop = append(s.ClosedLoop, sweep.StepResult{Scenario: s.Name, Mode: sweep.ModeClosedLoop, Concurrency: r.n,
			Started: t0, Finished: t0.Add(2 * time.Second), WindowSeconds: 1.2,
			Requests: f, Succeeded: f, SuccessRatio: 1, TTFT: ttft, E2E: sweep.Summary{Count: f, Mean: 0.05},
			SystemThroughput: 300 * float64(r.n), Samples: sweep.Samples{TTFT: []float64{ttft.Mean}, CachedShare: cached},
			Conversation: &sweep.ConversationStep{Conversations: r.convs, FollowUps: f, Hit: r.hit, Partial: r.partial, Miss: r.miss,
				HitShare: &share, CachedShare: sweep.Summarize(cached).Mean, PrimingTTFT: sweep.Dist{Mean: r.primeMS / 1e3}}})
	}
	opts := sweep.DefaultCapacityOptions()
	c := sweep.ConversationCapacityOf(s.ClosedLoop, s.Thresholds, opts)
	s.ConversationCapacity = &c
	return &sweep.Result{Target: "sim", Model: "slaprobe-sim", Started: t0, Finished: t0.Add(20 * time.Second),
		Settings: sweep.Settings{ClosedLoop: []int{1, 2, 3, 4, 5, 6, 8}, StepSeconds: 1.2, WarmupSeconds: 0.4,
			MaxSafeTTFTSeconds: 3, CapacityStat: sweep.StatMean, CapacityMinSuccess: 0.95, ConversationHitShare: opts.HitShare},
		Scenarios: []sweep.ScenarioResult{s}}
}

func conversationReport(t *testing.T) *report.Report {
	t.Helper()
	rep := report.FromSweep(conversationSweep(), report.Meta{Model: "slaprobe-sim", TargetURL: "http://127.0.0.1:8000"}, 0, false)
	if err := rep.Validate(); err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestConversationReport: the capacity in conversations reaches
// report.json, the headline, the Markdown's sentence and table, and the
// HTML's conversations section with one chart per conversation scenario.
func TestConversationReport(t *testing.T) {
	rep := conversationReport(t)
	cc := rep.Capacity.Conversations
	// Hit share 1.0 at N=4, 0.19 at N=5: the 90 % line is crossed at
	// 4 + 0.1/0.81 ≈ 4.12, so 4 (a measured step); TTFT (1 s) never binds.
	if len(cc) != 1 || cc[0].Value != 4 || cc[0].Approximate || cc[0].AtLeast || cc[0].LimitedBy != report.LimitCache ||
		cc[0].HitShare != 0.9 || len(cc[0].Between) != 2 || cc[0].Between[0] != 4 || cc[0].Between[1] != 5 {
		t.Fatalf("capacity in conversations = %+v; want 4 limited by the cache, between N=4 and 5", cc)
	}
	if len(cc[0].Limits) != 2 || cc[0].Limits[0].Kind != report.LimitTTFT || !cc[0].Limits[0].AtLeast || cc[0].Limits[1].Kind != report.LimitCache {
		t.Errorf("limits = %+v; want ttft (every N within) and cache", cc[0].Limits)
	}
	st := rep.Scenarios[0].ClosedLoop[4]
	if rep.Scenarios[0].Turns != 4 || st.Conversation == nil || st.Conversation.Miss != 6 || st.Conversation.PrimingTTFT.Mean != 0.0829 ||
		st.Samples == nil || len(st.Samples.CachedShare) != 42 {
		t.Errorf("N=5 step = %+v (conversation %+v)", st, st.Conversation)
	}
	h := report.ComputeHeadline(rep)
	if len(h.Conversations) != 1 || h.Conversations[0].Value != 4 || h.Conversations[0].Unit != "conversations" {
		t.Errorf("headline conversations = %+v", h.Conversations)
	}
	if h.BestTTFT != nil {
		t.Errorf("best TTFT %+v read from cache-hit follow-ups; want none from a conversation scenario", h.BestTTFT)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"conversations":[{"scenario":"coding_agent"`, `"hit_share":0.9`, `"priming_ttft_seconds"`, `"cached_share":[1,`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("report.json lacks %s", want)
		}
	}
	var md bytes.Buffer
	if err := RenderMarkdown(&md, rep); err != nil {
		t.Fatal(err)
	}
	sentence := "This server carries 4 concurrent coding_agent conversations (follow-up TTFT mean ≤ 1 s, ≥ 90% of follow-ups hit the prefix cache); " +
		"beyond that the share of follow-ups that hit the prefix cache crosses its limit, between the steps N=4 and N=5."
	for _, want := range []string{"## Capacity in concurrent conversations", sentence, "| coding_agent | 5 | 14 | 55 ms | 50 ms | 102 ms | 83 ms | 8 / 28 / 6 / 0 | 19.0% | 52.4% |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md.String())
		}
	}
	page := renderHTML(t, rep)
	for _, want := range []string{`data-chart="conversations"`, `id="chart-conversations-coding-agent"`, `data-chart="conversation-capacity"`,
		`data-chart="conversation-steps"`, "Concurrent conversations", "follow-ups hitting the cache (right axis)"} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %s", want)
		}
	}
}

// A cold report has no conversations section.
func TestNoConversationSectionWhenCold(t *testing.T) {
	page := renderHTML(t, Sample())
	if strings.Contains(page, `data-chart="conversations"`) || strings.Contains(page, "How many conversations?") {
		t.Error("a report without conversation scenarios shows a conversations section")
	}
}

// TestChromiumConversations renders the conversation report in headless
// Chromium: the chart is in the DOM, nothing reached the console, and the
// screenshot has content (SLAPROBE_REPORT_SHOT_DIR keeps it).
func TestChromiumConversations(t *testing.T) {
	bin := chromium(t)
	page := writeSample(t, conversationReport(t))
	dom, stderr := runChromium(t, bin, page, "--dump-dom")
	if errs := browser.Console(stderr); len(errs) > 0 {
		t.Errorf("console output while loading report.html:\n%s", strings.Join(errs, "\n"))
	}
	if !strings.Contains(dom, `id="chart-conversations-coding-agent"`) || !strings.Contains(dom, "This server carries 4 concurrent coding_agent conversations") {
		t.Error("conversation chart or sentence missing from the rendered DOM")
	}
	shot := filepath.Join(t.TempDir(), "shot.png")
	_, stderr = runChromium(t, bin, page, "--screenshot="+shot, "--window-size=1400,5000")
	if errs := browser.Console(stderr); len(errs) > 0 {
		t.Errorf("console output while taking the screenshot:\n%s", strings.Join(errs, "\n"))
	}
	checkScreenshot(t, shot, 1400, 5000)
	if dir := os.Getenv("SLAPROBE_REPORT_SHOT_DIR"); dir != "" {
		b, _ := os.ReadFile(shot)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "conversations-1400x5000.png"), b, 0o644)
		os.WriteFile(filepath.Join(dir, "conversations.html"), func() []byte { b, _ := os.ReadFile(page); return b }(), 0o644)
	}
}

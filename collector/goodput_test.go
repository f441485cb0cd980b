package collector

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slaprobe/slaprobe/prober"
)

// slaprobe_probes_good_total counts the probes that meet every threshold
// of their scenario at once, by result, from zero; a probe that breaks one
// threshold, or fails, counts in probes_total only.
func TestProbesGood(t *testing.T) {
	_, m := newTestMetrics(t)
	// success(): TTFT 200 ms, ITL 10 ms, decode 100 tokens/s, E2E 2.75 s.
	m.SetThresholds([]prober.Scenario{{Name: "chatbot", Thresholds: prober.Thresholds{
		TTFT: 200 * time.Millisecond, ITL: 10 * time.Millisecond, E2E: 3 * time.Second, MinDecode: 100}}})
	m.SetScenarioEnabled("a", "m", "chatbot", "chat", true)
	good := func(result string) float64 {
		return testutil.ToFloat64(m.good.WithLabelValues("a", "m", "chatbot", "chat", result))
	}
	if n := testutil.CollectAndCount(m.good); n != 2 {
		t.Fatalf("%d good series after enabling the scenario, want 2 (success, short_output) at zero", n)
	}

	ok := success()
	slowFirst := success() // TTFT 10 % over
	slowFirst.FirstToken = slowFirst.FirstToken.Add(20 * time.Millisecond)
	slowFirst.LastToken = slowFirst.LastToken.Add(20 * time.Millisecond)
	slowStream := success() // ITL 11 ms: decode 91 tokens/s
	slowStream.LastToken = slowStream.FirstToken.Add(255 * 11 * time.Millisecond)
	short := success()
	short.Kind, short.OutputTokens = prober.KindShortOutput, 100
	short.LastToken = short.FirstToken.Add(99 * 10 * time.Millisecond)
	failed := success()
	failed.Kind, failed.Reason = prober.KindError, prober.ReasonTimeout
	for _, r := range []prober.Result{ok, slowFirst, slowStream, short, failed, ok} {
		m.Observe(&r)
	}
	if got := good("success"); got != 2 {
		t.Errorf("good success probes = %v, want 2", got)
	}
	if got := good("short_output"); got != 1 {
		t.Errorf("good short answers = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(m.good); n != 2 {
		t.Errorf("%d good series, want 2: a failed probe is never good", n)
	}
	if got := testutil.ToFloat64(m.probes.WithLabelValues("a", "m", "chatbot", "chat", "success")); got != 4 {
		t.Errorf("probes_total{result=success} = %v, want 4", got)
	}

	// New thresholds judge the next probes.
	m.SetThresholds([]prober.Scenario{{Name: "chatbot", Thresholds: prober.Thresholds{TTFT: time.Second}}})
	m.Observe(&slowStream)
	if got := good("success"); got != 3 {
		t.Errorf("after raising the thresholds, good success probes = %v, want 3", got)
	}

	m.ForgetTarget("a")
	if n := testutil.CollectAndCount(m.good); n != 0 {
		t.Errorf("%d good series after ForgetTarget, want 0", n)
	}
}

// A warm conversation counts its follow-up as the probe histograms do; its
// priming turn is not a probe of probes_total, nor a good one.
func TestProbesGoodWarm(t *testing.T) {
	_, m := newTestMetrics(t)
	m.SetThresholds([]prober.Scenario{{Name: "general_chat_followup", Thresholds: prober.Thresholds{TTFT: 300 * time.Millisecond}}})
	r := warmConversation() // priming TTFT 1.4 s, follow-up 200 ms
	m.Observe(&r)
	lv := []string{"a", "m", "general_chat_followup", "chat", "success"}
	if got := testutil.ToFloat64(m.good.WithLabelValues(lv...)); got != 1 {
		t.Errorf("good = %v, want 1 (the follow-up)", got)
	}
	if got := testutil.ToFloat64(m.probes.WithLabelValues(lv...)); got != 1 {
		t.Errorf("probes_total = %v, want 1 (the follow-up)", got)
	}
}

package status

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/prober"
)

// TestRecorderBounds: the log lines of targets the config does not name
// (addresses /probe was asked for) are not kept, and what is kept stays
// within its count, age and length bounds.
func TestRecorderBounds(t *testing.T) {
	now := time.Now() // slog stamps the lines with the real clock
	r := NewRecorder(0, func() time.Time { return now })
	log := slog.New(r.Handler(slog.DiscardHandler))

	// Before the config is known, every target's lines are kept, for at
	// most maxLogTargets targets.
	for i := range maxLogTargets + 500 {
		log.Info("calibrated prompt", "target", fmt.Sprint("t", i))
	}
	if n := len(r.targetLogs); n != maxLogTargets {
		t.Errorf("%d targets' log lines kept, want at most %d", n, maxLogTargets)
	}
	if len(r.TargetLogs("t0")) != 0 || len(r.TargetLogs(fmt.Sprint("t", maxLogTargets+499))) != 1 {
		t.Error("the oldest target's lines were not the ones dropped")
	}

	// Once the config names its targets, no other target's line is kept.
	r.Forget(map[string]bool{"vllm": true})
	if n := len(r.targetLogs); n != 0 {
		t.Errorf("after Forget, %d other targets' log lines remain", n)
	}
	for i := range 1000 {
		log.Info("probe failed", "target", "http://10.0.0.1:8000/"+strings.Repeat("x", 1900)+fmt.Sprint(i))
	}
	if n := len(r.targetLogs); n != 0 {
		t.Errorf("%d lines of targets /probe was asked for were kept", n)
	}
	log.Info("cannot list models", "target", "vllm", "err", strings.Repeat("e", 10000))
	ls := r.TargetLogs("vllm")
	if len(ls) != 1 || len(ls[0].Text) > maxLogLineBytes+len("…") {
		t.Errorf("a configured target's long line: %d lines, %d bytes", len(ls), len(ls[0].Text))
	}
	now = now.Add(maxLogAge + time.Minute)
	if ls := r.TargetLogs("vllm"); len(ls) != 0 {
		t.Errorf("a line older than %s is still shown", maxLogAge)
	}

	// Series: at most maxSeries, the least recently active dropped.
	for i := range maxSeries + 10 {
		now = now.Add(time.Millisecond)
		r.BeforeProbe(context.Background(), prober.Target{Name: "vllm"}, prober.Scenario{Name: fmt.Sprint("s", i), Timeout: time.Second})
	}
	if n := len(r.series); n != maxSeries {
		t.Errorf("%d series kept, want %d", n, maxSeries)
	}
	if _, inFlight := r.Probes("vllm", "s0"); len(inFlight) != 0 {
		t.Error("the least recently active series was kept")
	}
}

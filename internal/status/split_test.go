package status

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/prober"
)

// TestSplitAtQuantiles builds the "where TTFT goes" bars from probes whose
// engine reported queue and prefill: 20 probes with TTFT 100..290 ms, all
// of whose growth is queue, so the p95 bar is mostly queue and the p50 one
// mostly prefill; outside is 10 ms throughout.
func TestSplitAtQuantiles(t *testing.T) {
	c := newClock()
	r := NewRecorder(0, c.now)
	for i := range 20 {
		res := okResult("a", "chatbot", c.now())
		res.TraceID = fmt.Sprintf("%032x", i+1)
		ttft := time.Duration(100+10*i) * time.Millisecond
		res.FirstToken = res.Start.Add(ttft)
		res.Engine = prober.EngineTiming{Source: prober.TimingResponse,
			Queue: ttft - 90*time.Millisecond, HasQueue: true, Prefill: 80 * time.Millisecond, HasPrefill: true}
		probe(r, c, res)
	}
	// One more whose engine said nothing: counted, not split.
	none := okResult("a", "chatbot", c.now())
	none.Engine.Source = prober.TimingNone
	probe(r, c, none)

	done, _ := r.Probes("a", "chatbot")
	v := buildSplit(done, c.now().Add(-time.Hour))
	if v == nil || v.None || len(v.Rows) != 2 {
		t.Fatalf("split = %+v, want two bars", v)
	}
	if !strings.Contains(v.Sources, "21 probes") || !strings.Contains(v.Sources, "from the response 20") || !strings.Contains(v.Sources, "not reported 1") {
		t.Errorf("sources = %q", v.Sources)
	}
	p50, p95 := v.Rows[0], v.Rows[1]
	if p50.Label != "p50" || p95.Label != "p95" {
		t.Fatalf("labels %q %q", p50.Label, p95.Label)
	}
	if p50.Outside != "10.0 ms" || p95.Outside != "10.0 ms" {
		t.Errorf("outside = %q / %q, want 10.0 ms in both", p50.Outside, p95.Outside)
	}
	if p95.QueueW <= p50.QueueW || p95.QueueW+p95.OutsideW+p95.PrefillW < 99.9 {
		t.Errorf("p95 bar %+v should be the widest (100 %%) and hold more queue than p50 %+v", p95, p50)
	}

	// A trace join settles a probe's timing after it ended.
	late := okResult("a", "chatbot", c.now())
	late.TraceID = "00000000000000000000000000000abc"
	late.Engine.Source = prober.TimingNone
	probe(r, c, late)
	late.Engine = prober.EngineTiming{Source: prober.TimingTrace, Queue: time.Millisecond, HasQueue: true, Prefill: 150 * time.Millisecond, HasPrefill: true}
	r.EngineTimed(&late)
	done, _ = r.Probes("a", "chatbot")
	got := done[len(done)-1]
	if !got.HasSplit || got.Engine.Source != prober.TimingTrace || got.Split.Outside != 49*time.Millisecond {
		t.Errorf("after EngineTimed: source %q split %+v (%v), want trace with 49 ms outside", got.Engine.Source, got.Split, got.HasSplit)
	}
	if s := probeSplit(&got); !strings.Contains(s, "outside 49.0 ms") || !strings.Contains(s, "(trace)") {
		t.Errorf("probe split text = %q", s)
	}
}

// TestSplitNotReported: an engine that reports nothing gets a hint, not a
// bar of zeros.
func TestSplitNotReported(t *testing.T) {
	c := newClock()
	r := NewRecorder(0, c.now)
	res := okResult("a", "chatbot", c.now())
	res.Engine.Source = prober.TimingNone
	probe(r, c, res)
	done, _ := r.Probes("a", "chatbot")
	v := buildSplit(done, c.now().Add(-time.Hour))
	if v == nil || !v.None || len(v.Rows) != 0 {
		t.Fatalf("split = %+v, want None", v)
	}
	if s := probeSplit(&done[0]); s != "engine timing not reported" {
		t.Errorf("probe split text = %q", s)
	}
}

// TestSplitDropped: a probe whose engine timing was dropped as implausible
// says so, and has no split.
func TestSplitDropped(t *testing.T) {
	c := newClock()
	r := NewRecorder(0, c.now)
	res := okResult("a", "chatbot", c.now())
	res.Engine = prober.EngineTiming{Source: prober.TimingNone, Dropped: prober.TimingDrop{From: prober.TimingTrace, Reason: prober.ImplausibleExceedsTTFT}}
	probe(r, c, res)
	done, _ := r.Probes("a", "chatbot")
	if done[0].HasSplit {
		t.Error("a dropped timing has a split")
	}
	if s := probeSplit(&done[0]); s != "engine timing from the trace dropped as implausible (exceeds_ttft)" {
		t.Errorf("probe split text = %q", s)
	}
}

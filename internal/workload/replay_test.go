package workload

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/prober"
)

func TestParseSpeedups(t *testing.T) {
	got, err := ParseSpeedups("×0.5, 1x,2,4")
	if err != nil || !reflect.DeepEqual(got, []float64{0.5, 1, 2, 4}) {
		t.Errorf("ParseSpeedups = %v, %v", got, err)
	}
	for _, bad := range []string{"", "1,1", "2,1", "0,1", "fast"} {
		if _, err := ParseSpeedups(bad); err == nil {
			t.Errorf("ParseSpeedups(%q) accepted", bad)
		}
	}
}

func TestReplayRejects(t *testing.T) {
	reqs := []Request{{At: 0, Input: 10, Output: 2}, {At: time.Second, Input: 10, Output: 2}}
	send := func(context.Context, Request) prober.Result { return prober.Result{} }
	all := func(*prober.Result) bool { return true }
	for _, tc := range []struct {
		reqs []Request
		o    ReplayOptions
		want string
	}{
		{reqs, ReplayOptions{Rule: "p99 ttft <= 2s"}, "judged by goodput only"},
		{reqs, ReplayOptions{Rule: "goodput >= 150%"}, "share of good requests"},
		{reqs, ReplayOptions{Speedups: []float64{2, 1}}, "ascending"},
		{reqs[:1], ReplayOptions{}, "at least two requests"},
		{[]Request{reqs[0], reqs[0]}, ReplayOptions{}, "span some time"},
	} {
		if _, err := Replay(context.Background(), tc.reqs, send, all, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one saying %q", tc.o, err, tc.want)
		}
	}
}

// TestReplayJudges: with a send that answers good below a fixed speed-up, the headroom is the
// interpolated crossing, and every step sends every request.
func TestReplayJudges(t *testing.T) {
	reqs := make([]Request, 20)
	for i := range reqs {
		reqs[i] = Request{At: time.Duration(i) * time.Millisecond, Input: 100, Output: 2, Line: i + 1}
	}
	var speed float64
	h, err := Replay(context.Background(), reqs,
		func(context.Context, Request) prober.Result { return prober.Result{Kind: prober.KindSuccess} },
		func(*prober.Result) bool { return speed < 3 },
		ReplayOptions{Speedups: []float64{1, 2, 4}, Refine: -1, Prepare: func(_ context.Context, step int) error {
			speed = []float64{1, 2, 4}[step]
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	// Goodput 1 at ×2 and 0 at ×4: the line crosses 95 % at 2 + 0.05·2 = 2.1.
	if h.Bound != "within" || h.Multiple < 2.09 || h.Multiple > 2.11 || len(h.Steps) != 3 || h.Steps[2].Requests != 20 {
		t.Errorf("headroom %+v; want 2.1× within, three steps of 20 requests", h)
	}
	if h.BaseRate < 999 || h.BaseRate > 1001 {
		t.Errorf("base rate %.1f; the trace sends 1000 requests/s", h.BaseRate)
	}
}

package bench

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/slaprobe/slaprobe/internal/config"
)

func TestOverridesApply(t *testing.T) {
	ptr := func(s string) *string { return &s }
	d := func(v time.Duration) *time.Duration { return &v }
	n := func(v int) *int { return &v }
	def := config.DefaultSweepConfig()
	for _, tc := range []struct {
		name   string
		o      Overrides
		check  func(config.SweepConfig) bool
		errHas string
	}{
		{"nothing given keeps the file", Overrides{}, func(sc config.SweepConfig) bool { return reflect.DeepEqual(sc, def) }, ""},
		{"ladders", Overrides{ClosedLoop: ptr("1,2"), Burst: ptr("none")}, func(sc config.SweepConfig) bool {
			return reflect.DeepEqual(sc.ClosedLoop.Concurrency, []int{1, 2}) && len(sc.Burst.Concurrency) == 0
		}, ""},
		{"durations and numbers", Overrides{StepDuration: d(5 * time.Second), DrainTimeout: d(time.Minute), BurstRepeat: n(3), MaxConcurrency: n(8)},
			func(sc config.SweepConfig) bool {
				return sc.ClosedLoop.Duration == model.Duration(5*time.Second) && sc.Drain.Timeout == model.Duration(time.Minute) &&
					sc.Burst.Repeat == 3 && sc.MaxConcurrency == 8 && sc.ClosedLoop.Warmup == def.ClosedLoop.Warmup
			}, ""},
		{"bad ladder names its flag", Overrides{Burst: ptr("1,x")}, nil, `--burst: "x" is not a positive integer`},
		{"capacity rules", Overrides{CapacityOn: &[]string{"goodput >= 90%", "p99 ttft <= 2s"}}, func(sc config.SweepConfig) bool {
			return reflect.DeepEqual(sc.CapacityOn, []string{"goodput >= 90%", "p99 ttft <= 2s"})
		}, ""},
		{"conversation hit share", Overrides{ConversationHitShare: func(v float64) *float64 { return &v }(0.8)}, func(sc config.SweepConfig) bool {
			return sc.Capacity.ConversationHitShare == 0.8 && def.Capacity.ConversationHitShare == 0.9
		}, ""},
		{"a bad hit share names its flag", Overrides{ConversationHitShare: func(v float64) *float64 { return &v }(0)}, nil,
			"--capacity.conversation-hit-share=0: expected a share in (0, 1]"},
		{"a bad capacity rule names its flag", Overrides{CapacityOn: &[]string{"goodput >= 95%", "p99 ttft <= soon"}}, nil, `--capacity.on[1]: rule "p99 ttft <= soon"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := config.DefaultSweepConfig()
			err := tc.o.Apply(&sc)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err = %v, want %q", err, tc.errHas)
				}
				return
			}
			if err != nil || !tc.check(sc) {
				t.Errorf("Apply: err %v, sweep %+v", err, sc)
			}
		})
	}
	if got := SplitList([]string{"chatbot, rag", "", "agentic,"}); !reflect.DeepEqual(got, []string{"chatbot", "rag", "agentic"}) {
		t.Errorf("SplitList = %v", got)
	}
}

package promql

import (
	"slices"
	"testing"
)

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`slaprobe_up`, []string{"slaprobe_up"}},
		{`histogram_quantile(0.95, sum by (job, le) (rate(a_bucket{scenario=~"$scenario", x="rate(b)"}[$__rate_interval])))`, []string{"a_bucket"}},
		{"a\n/ on (job, instance, scenario) group_left ()\nb{metric=\"c\"}", []string{"a", "b"}},
		{`label_replace(max by (concurrency) (x:y:z), "bound", "best", "", "") or time() - last_ts`, []string{"last_ts", "x:y:z"}},
		{`sum without (gpu) (rate(e_total[5m:1m] offset 1h)) > bool 3 and 1e3 * g`, []string{"e_total", "g"}},
		{`max(a) == bool max(b) unless on () c # comment d`, []string{"a", "b", "c"}},
		{`label_join(x, "series", " ", "scenario", "mode")`, []string{"x"}},
	} {
		if got := MetricNames(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("MetricNames(%q) = %v, want %v", tc.expr, got, tc.want)
		}
	}
}

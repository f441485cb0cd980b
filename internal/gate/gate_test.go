package gate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
)

func TestParseRules(t *testing.T) {
	for _, tc := range []struct {
		args    []string // one --fail-on each
		want    string   // the rules, as String gives them
		wantErr string
	}{
		{args: []string{"any"}, want: "any"},
		{args: []string{"ANY, capacity"}, want: "any,capacity"},
		{args: []string{"metric:ttft", "metric:E2E,any"}, want: "metric:ttft,metric:e2e,any"},
		{args: []string{"metric:ttft", "metric:ttft"}, want: "metric:ttft"},
		{args: []string{"goodput:5"}, want: "goodput:5"},
		{args: []string{"goodput:2.5%"}, want: "goodput:2.5"},
		{args: []string{"goodput:0"}, want: "goodput:0"},
		{args: []string{"headroom:10%", "capacity"}, want: "headroom:10,capacity"},
		{args: []string{"headroom"}, wantErr: `"headroom": headroom needs the tolerated drop in percent`},
		{args: []string{"headroom:101"}, wantErr: `headroom needs`},
		{args: []string{"latency"}, wantErr: `"latency": unknown kind; expected any, capacity, metric:<ttft|itl|decode|e2e|prefill>, goodput:<percentage points, 0 to 100>, or headroom:<`},
		{args: []string{"metric:tpot"}, wantErr: `"metric:tpot": no metric "tpot" a comparison gives a verdict`},
		{args: []string{"metric:system_throughput"}, wantErr: `no metric "system_throughput"`},
		{args: []string{"metric"}, wantErr: `"metric": no metric ""`},
		{args: []string{"goodput"}, wantErr: `"goodput": goodput needs the tolerated drop in percentage points`},
		{args: []string{"goodput:lots"}, wantErr: `"goodput:lots": goodput needs`},
		{args: []string{"goodput:-1"}, wantErr: `goodput needs`},
		{args: []string{"goodput:101"}, wantErr: `goodput needs`},
		{args: []string{"any:1"}, wantErr: `"any:1": any takes no argument`},
		{args: []string{"capacity:5"}, wantErr: `capacity takes no argument`},
		{args: []string{"any,"}, wantErr: `"": empty`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var rs Rules
			var err error
			for _, a := range tc.args {
				if err = rs.Set(a); err != nil {
					break
				}
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := rs.String(); got != tc.want {
				t.Errorf("rules %q, want %q", got, tc.want)
			}
		})
	}
}

// TestFlags checks that kingpin rejects a bad kind or policy before the
// command runs (exit 2), naming the flag, the value and what was expected.
func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    string
		unknown Policy
		wantErr []string
	}{
		{args: nil, want: "", unknown: UnknownFail},
		{args: []string{"--fail-on=any", "--fail-on=metric:itl", "--fail-on-unknown=pass"}, want: "any,metric:itl", unknown: UnknownPass},
		{args: []string{"--fail-on=slow"}, wantErr: []string{`--fail-on="slow": unknown kind; expected any, capacity`}},
		{args: []string{"--fail-on=any", "--fail-on=metric:x"}, wantErr: []string{`--fail-on="metric:x": no metric "x"`}},
		{args: []string{"--fail-on-unknown=maybe"}, wantErr: []string{`--fail-on-unknown="maybe": expected fail`, "or pass"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			app := kingpin.New("t", "")
			var o Options
			app.Flag("fail-on", "").SetValue(&o.Rules)
			app.Flag("fail-on-unknown", "").Default(UnknownFail).SetValue(&o.Unknown)
			_, err := app.Parse(tc.args)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatal("no error")
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.Rules.String() != tc.want || o.Unknown != tc.unknown {
				t.Errorf("rules %q unknown %q; want %q %q", o.Rules.String(), o.Unknown, tc.want, tc.unknown)
			}
		})
	}
}

func f(v float64) *float64 { return &v }

// comparison is a small comparison: chat closed loop N=1 with ttft 20 %
// worse, itl no change, decode without a verdict (too few), system
// throughput (never judged); a burst N=8 in the base only; the max safe
// queue depth down; goodput share down 8 points when goodput is set.
func comparison(goodput bool) *report.Comparison {
	c := &report.Comparison{Confidence: true, Method: report.CompareMethod{Level: 0.95, FigureLevel: 0.99, PracticalFloor: 0.05}}
	metrics := []report.MetricChange{
		{Metric: report.MetricTTFT, Base: 0.1, New: 0.12, Change: 0.2, Low: f(0.15), High: f(0.25), BaseSamples: 40, NewSamples: 40, Verdict: report.VerdictWorse},
		{Metric: report.MetricITL, Base: 0.01, New: 0.0101, Change: 0.01, Low: f(-0.02), High: f(0.03), Verdict: report.VerdictNoChange},
		{Metric: report.MetricDecode, Base: 90, New: 91, Verdict: report.VerdictUnknown, Note: "too few requests for a verdict", NeededPerRun: 9},
		{Metric: report.MetricSystemThroughput, Base: 90, New: 80, Change: -0.11, Verdict: report.VerdictUnknown},
	}
	if goodput {
		metrics = append(metrics, report.MetricChange{Metric: MetricGoodputShare, Base: 0.95, New: 0.87, Change: -0.084, Low: f(-0.12), High: f(-0.06), Verdict: report.VerdictWorse})
	}
	c.Steps = []report.StepChange{
		{Scenario: "chat", Mode: sweep.ModeClosedLoop, Concurrency: 1, Presence: report.InBoth, Metrics: metrics},
		{Scenario: "chat", Mode: sweep.ModeBurst, Concurrency: 8, Presence: report.OnlyInBase},
		{Scenario: "chat", Mode: sweep.ModeBurst, Concurrency: 16, Presence: report.OnlyInNew},
	}
	c.Capacity = []report.CapacityChange{
		{Kind: report.CapacityMaxSafeQueue, Scenario: "chat", Presence: report.InBoth, Base: &sweep.Bound{Value: 16}, New: &sweep.Bound{Value: 8},
			Change: -0.5, Verdict: report.VerdictWorse, Resolution: "base 16, new 8"},
		{Kind: report.CapacityUseCase, Scenario: "chat", Presence: report.InBoth, Base: &sweep.Bound{Value: 4}, New: &sweep.Bound{Value: 4},
			Verdict: report.VerdictNoChange},
	}
	return c
}

func TestEvaluate(t *testing.T) {
	better := comparison(false)
	better.Steps[0].Metrics[0].Verdict = report.VerdictBetter
	better.Capacity[0].Verdict = report.VerdictBetter
	better.Steps = better.Steps[:1]
	judged := comparison(false)
	judged.Steps = judged.Steps[:1]
	for _, tc := range []struct {
		name      string
		c         *report.Comparison
		rules     string
		unknown   string
		code      int
		reasons   []string // figures
		noVerdict []string
	}{
		{name: "any", c: comparison(false), rules: "any", code: ExitRegression,
			reasons:   []string{"chat closed_loop N=1 ttft", "chat max_safe_queue"},
			noVerdict: []string{"chat closed_loop N=1 decode", "chat burst N=8"}},
		{name: "metric:ttft", c: comparison(false), rules: "metric:ttft", code: ExitRegression, reasons: []string{"chat closed_loop N=1 ttft"},
			noVerdict: []string{"chat burst N=8"}},
		{name: "metric:itl: no change, every figure judged", c: judged, rules: "metric:itl", code: 0},
		{name: "metric:itl: a step in the base only fails closed", c: comparison(false), rules: "metric:itl", code: ExitNoVerdict,
			noVerdict: []string{"chat burst N=8"}},
		{name: "metric:decode fails closed", c: comparison(false), rules: "metric:decode", code: ExitNoVerdict,
			noVerdict: []string{"chat closed_loop N=1 decode", "chat burst N=8"}},
		{name: "metric:decode passes open", c: comparison(false), rules: "metric:decode", unknown: UnknownPass, code: 0,
			noVerdict: []string{"chat closed_loop N=1 decode", "chat burst N=8"}},
		{name: "capacity", c: comparison(false), rules: "capacity", code: ExitRegression, reasons: []string{"chat max_safe_queue"}},
		{name: "improvements pass", c: better, rules: "metric:ttft,capacity", code: 0},
		{name: "goodput without a figure fails closed", c: comparison(false), rules: "goodput:5", code: ExitNoVerdict, noVerdict: []string{"goodput share"}},
		{name: "goodput without a figure passes open", c: comparison(false), rules: "goodput:5", unknown: UnknownPass, code: 0, noVerdict: []string{"goodput share"}},
		{name: "goodput down 8 points, 5 tolerated", c: comparison(true), rules: "goodput:5", code: ExitRegression, reasons: []string{"chat closed_loop N=1 good_share"}},
		{name: "goodput down 8 points, 10 tolerated", c: comparison(true), rules: "goodput:10", code: 0},
		{name: "no confidence", c: &report.Comparison{Steps: []report.StepChange{{Scenario: "chat", Mode: sweep.ModeClosedLoop, Concurrency: 1, Presence: report.InBoth,
			Metrics: []report.MetricChange{{Metric: report.MetricTTFT, Base: 1, New: 2, Change: 1, Verdict: report.VerdictUnknown, Note: "no raw samples"}}}}},
			rules: "any", code: ExitNoVerdict, noVerdict: []string{"chat closed_loop N=1 ttft"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rs Rules
			if err := rs.Set(tc.rules); err != nil {
				t.Fatal(err)
			}
			res := Evaluate(tc.c, rs, tc.unknown)
			if res.ExitCode != tc.code {
				t.Errorf("exit code %d, want %d (%s)", res.ExitCode, tc.code, res.Summary)
			}
			if want := map[bool]string{true: "pass", false: "fail"}[tc.code == 0]; res.Result != want {
				t.Errorf("result %q, want %q", res.Result, want)
			}
			figures := func(fs []Figure) []string {
				var out []string
				for _, f := range fs {
					out = append(out, f.Figure)
				}
				return out
			}
			if got := figures(res.Reasons); !slices.Equal(got, tc.reasons) {
				t.Errorf("reasons %q, want %q", got, tc.reasons)
			}
			if got := figures(res.NoVerdict); !slices.Equal(got, tc.noVerdict) {
				t.Errorf("no verdict %q, want %q", got, tc.noVerdict)
			}
		})
	}
}

// TestVerdictFile checks the JSON a pipeline reads: a reason carries the
// rule, figure, base, new, change and interval; a figure without a verdict
// says why and how many values per run would give one; and the text says
// which figures had no verdict.
func TestVerdictFile(t *testing.T) {
	var rs Rules
	if err := rs.Set("metric:ttft,metric:decode"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "verdict.json")
	var text strings.Builder
	code, err := Options{Rules: rs, Unknown: UnknownFail, VerdictFile: path}.Apply(comparison(false), &text)
	if err != nil || code != ExitRegression {
		t.Fatalf("code %d, err %v", code, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got Result
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Result != "fail" || got.ExitCode != ExitRegression || !slices.Equal(got.FailOn, []string{"metric:ttft", "metric:decode"}) || got.FailOnUnknown != "fail" {
		t.Errorf("head = %+v", got)
	}
	if len(got.Reasons) != 1 {
		t.Fatalf("reasons %+v", got.Reasons)
	}
	r := got.Reasons[0]
	if r.Metric != "ttft" || *r.Base != 0.1 || *r.New != 0.12 || *r.Change != 0.2 || *r.Low != 0.15 || *r.High != 0.25 || r.FigureLevel != 0.99 ||
		!slices.Equal(r.Rules, []string{"metric:ttft"}) || !strings.Contains(r.Why, "significantly worse: +20.0%, interval [+15.0%, +25.0%] excludes zero at 99%") {
		t.Errorf("reason = %s", b)
	}
	if len(got.NoVerdict) != 2 || got.NoVerdict[0].NeededPerRun != 9 || !strings.Contains(got.NoVerdict[0].Why, "too few requests") {
		t.Errorf("no verdict = %+v", got.NoVerdict)
	}
	for _, w := range []string{"gate failed: 1 significant regression(s) named by --fail-on=metric:ttft,metric:decode",
		"chat closed_loop N=1 ttft [metric:ttft]: significantly worse", "figures without a verdict (2):", "chat closed_loop N=1 decode [metric:decode]: no verdict: too few"} {
		if !strings.Contains(text.String(), w) {
			t.Errorf("text lacks %q:\n%s", w, text.String())
		}
	}
}

// TestInterrupted: a run that did not finish is no verdict, whatever the
// rules found; the file says so with the run's exit code.
func TestInterrupted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "verdict.json")
	var text strings.Builder
	code, err := Options{Rules: Rules{{Kind: KindAny}}, VerdictFile: path, Interrupted: 130}.Apply(comparison(false), &text)
	if err != nil || code != 130 {
		t.Fatalf("code %d, err %v; want 130", code, err)
	}
	b, _ := os.ReadFile(path)
	var got Result
	if err := json.Unmarshal(b, &got); err != nil || got.Result != "interrupted" || got.ExitCode != 130 || len(got.Reasons) != 2 ||
		!strings.HasPrefix(got.Summary, "the run was interrupted, so the gate gives no verdict (what it found so far: gate failed: 2") {
		t.Errorf("verdict %s (%v)", b, err)
	}
}

package workload

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/prober"
)

// chi2Crit99 are the 99th percentiles of the chi-square distribution, by degrees of freedom.
var chi2Crit99 = []float64{0, 6.63, 9.21, 11.34, 13.28, 15.09, 16.81, 18.48, 20.09, 21.67, 23.21, 24.72, 26.22, 27.69, 29.14, 30.58}

// homogeneous is a chi-square test of two samples' bucket counts (the engine's buckets): false when
// they differ at the 1 % level.
func homogeneous(upper []float64, a, b []int) (chi2 float64, df int, same bool) {
	count := func(xs []int) []float64 {
		c := make([]float64, len(upper))
		for _, x := range xs {
			c[sort.SearchFloat64s(upper, float64(x))]++
		}
		return c
	}
	ca, cb := count(a), count(b)
	na, nb := float64(len(a)), float64(len(b))
	k := 0
	for i := range upper {
		if ca[i]+cb[i] == 0 {
			continue
		}
		k++
		d := ca[i]*sqrt(nb/na) - cb[i]*sqrt(na/nb)
		chi2 += d * d / (ca[i] + cb[i])
	}
	df = max(k-1, 1)
	return chi2, df, chi2 <= chi2Crit99[min(df, len(chi2Crit99)-1)]
}

func sqrt(x float64) float64 {
	z := x
	for range 30 {
		z -= (z*z - x) / (2 * z)
	}
	return z
}

// TestLiveMixFollowsTraffic: the simulated engine serves background traffic of a known length mix;
// the live scenario's drawn lengths match it by a chi-square test on the engine's buckets; when the
// mix changes, the draws follow within one window (and no longer match the old mix).
func TestLiveMixFollowsTraffic(t *testing.T) {
	target, e := simTarget(t, func(c *vllmsim.Config) { c.DecodeBase = time.Millisecond })
	ctx := context.Background()
	p := prober.New(slog.New(slog.DiscardHandler), prober.SystemClock{})
	type shape struct{ in, out, n int }
	send := func(mix []shape) (ins, outs []int) {
		for _, m := range mix {
			s := prober.Scenario{Name: fmt.Sprintf("bg_%d_%d", m.in, m.out), Family: prober.FamilyCustom, InputTokens: m.in, OutputTokens: m.out, Timeout: 30 * time.Second}
			for range m.n {
				res := p.Probe(ctx, target, "", s)
				if res.Kind != prober.KindSuccess {
					t.Fatalf("background request: %s %v", res.Reason, res.Err)
				}
				ins, outs = append(ins, res.PromptTokens), append(outs, res.OutputTokens)
			}
		}
		return
	}
	now := time.Unix(1_000_000, 0)
	live := &Live{Window: 10 * time.Minute, Refresh: time.Second, Seed: 3, Now: func() time.Time { return now }}
	shape1 := &LiveShape{Live: live}
	if _, _, err := shape1.Next(target); err == nil || !strings.Contains(err.Error(), "read once only") {
		t.Fatalf("the first read gave a mix: %v", err)
	}
	draw := func(n int) (ins, outs []int) {
		for range n {
			sp, class, err := shape1.Next(target)
			if err != nil {
				t.Fatal(err)
			}
			if class != ClassOf(sp.InputTokens).Name {
				t.Fatalf("class %s for %d tokens", class, sp.InputTokens)
			}
			ins, outs = append(ins, sp.InputTokens), append(outs, sp.OutputTokens)
		}
		return
	}
	upper := []float64{}
	for _, b := range []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 16384} {
		upper = append(upper, b)
	}
	upper = append(upper, 1e18)

	mixA := []shape{{300, 20, 14}, {3000, 200, 6}}
	aIn, aOut := send(mixA)
	now = now.Add(time.Minute)
	dIn, dOut := draw(400)
	for _, c := range []struct {
		what   string
		bg, dr []int
	}{{"prompt", aIn, dIn}, {"output", aOut, dOut}} {
		chi2, df, same := homogeneous(upper, c.bg, c.dr)
		t.Logf("mix A, %s lengths: chi2 %.2f on %d df", c.what, chi2, df)
		if !same {
			t.Errorf("mix A: the drawn %s lengths differ from the background's (chi2 %.2f on %d df)", c.what, chi2, df)
		}
	}

	mixB := []shape{{1000, 50, 20}}
	bIn, bOut := send(mixB)
	now = now.Add(11 * time.Minute) // one window later: the mix is B alone
	dIn, dOut = draw(400)
	for _, c := range []struct {
		what       string
		bg, old, d []int
	}{{"prompt", bIn, aIn, dIn}, {"output", bOut, aOut, dOut}} {
		chi2, df, same := homogeneous(upper, c.bg, c.d)
		chiOld, dfOld, sameOld := homogeneous(upper, c.old, c.d)
		t.Logf("mix B, %s lengths: chi2 %.2f on %d df against B, %.2f on %d df against A", c.what, chi2, df, chiOld, dfOld)
		if !same {
			t.Errorf("mix B: the drawn %s lengths differ from the background's (chi2 %.2f on %d df)", c.what, chi2, df)
		}
		if sameOld {
			t.Errorf("mix B: the drawn %s lengths still match the old mix A", c.what)
		}
	}
	_ = e
}

package status

// This file holds the "where TTFT goes" view: the split of a scenario's
// recent TTFT into the time outside the engine, in its queue and in
// prefill, from the engine's own timing of each probe.

import (
	"fmt"
	"slices"
	"time"

	"github.com/slaprobe/slaprobe/prober"
)

// splitView is a scenario's TTFT split at p50 and p95.
type splitView struct {
	Rows []splitRow
	// Sources says where the window's probes got their engine timing.
	Sources string
	// None is set when no probe in the window had its engine's timing.
	None bool
}

// splitRow is one stacked bar: the split of the probes around one quantile
// of TTFT, with widths in percent of the widest bar.
type splitRow struct {
	Label                      string // "p50", "p95"
	TTFT                       string
	Outside, Queue, Prefill    string
	OutsideW, QueueW, PrefillW float64
	OutsideShare               string
	Probes                     int // probes averaged
}

// splitBand is the share of ranks around a quantile whose probes are
// averaged: one probe's split is noisy, the p95's neighbours tell more.
const splitBand = 0.05

// buildSplit splits the TTFT of the probes sent since since whose TTFT
// counts (as in the TTFT row) and whose engine reported queue and prefill.
func buildSplit(probes []Probe, since time.Time) *splitView {
	var with []Probe
	counts := map[prober.TimingSource]int{}
	n := 0
	for _, p := range probes {
		if p.Sent.Before(since) || !p.Timed() || p.CacheHit || p.TTFT <= 0 {
			continue
		}
		n++
		src := p.Engine.Source
		if src == "" || !p.Engine.Reported() {
			src = prober.TimingNone
		}
		counts[src]++
		if p.HasSplit {
			with = append(with, p)
		}
	}
	if n == 0 {
		return nil
	}
	v := &splitView{Sources: fmt.Sprintf("engine timing of the %s in the window: from the response %d, from the engine's trace %d, not reported %d",
		plural(n, "probe"), counts[prober.TimingResponse], counts[prober.TimingTrace], counts[prober.TimingNone])}
	if len(with) == 0 {
		v.None = true
		return v
	}
	slices.SortFunc(with, func(a, b Probe) int { return int(a.TTFT - b.TTFT) })
	type avg struct{ ttft, out, q, pf time.Duration }
	var avgs []avg
	var widest time.Duration
	for _, q := range []float64{0.5, 0.95} {
		lo := int(float64(len(with)) * (q - splitBand))
		hi := int(float64(len(with)) * (q + splitBand))
		mid := min(int(float64(len(with))*q), len(with)-1)
		lo, hi = max(0, min(lo, mid)), min(len(with)-1, max(hi, mid))
		var a avg
		for _, p := range with[lo : hi+1] {
			a.ttft += p.TTFT
			a.out += p.Split.Outside
			a.q += p.Split.Queue
			a.pf += p.Split.Prefill
		}
		k := time.Duration(hi - lo + 1)
		a.ttft, a.out, a.q, a.pf = a.ttft/k, a.out/k, a.q/k, a.pf/k
		avgs = append(avgs, a)
		v.Rows = append(v.Rows, splitRow{Label: fmt.Sprintf("p%d", int(q*100)), Probes: int(k)})
		widest = max(widest, max(a.out, 0)+a.q+a.pf)
	}
	for i, a := range avgs {
		r := &v.Rows[i]
		r.TTFT, r.Outside, r.Queue, r.Prefill = dur(a.ttft), dur(a.out), dur(a.q), dur(a.pf)
		if widest > 0 {
			w := func(d time.Duration) float64 { return 100 * float64(max(d, 0)) / float64(widest) }
			r.OutsideW, r.QueueW, r.PrefillW = w(a.out), w(a.q), w(a.pf)
		}
		if a.ttft > 0 {
			r.OutsideShare = pct(float64(max(a.out, 0)) / float64(a.ttft))
		}
	}
	return v
}

// dur formats a part of a TTFT: milliseconds below a second.
func dur(d time.Duration) string {
	if d >= 0 && d < time.Millisecond {
		return fmt.Sprintf("%.2f ms", d.Seconds()*1000) // an empty queue: tens of microseconds
	}
	return formatValue(d.Seconds(), "s")
}

// probeSplit describes one probe's split for the probes page.
func probeSplit(p *Probe) string {
	switch {
	case !p.Done || !p.Timed():
		return ""
	case p.HasSplit:
		return fmt.Sprintf("outside %s · queue %s · prefill %s (%s)", dur(p.Split.Outside), dur(p.Split.Queue), dur(p.Split.Prefill), p.Engine.Source)
	case p.Engine.Reported():
		parts := ""
		if p.Engine.HasPrefill {
			parts = "prefill " + dur(p.Engine.Prefill)
		}
		if p.Engine.HasITL {
			if parts != "" {
				parts += " · "
			}
			parts += "engine ITL " + dur(p.Engine.ITL)
		}
		return parts + " (" + string(p.Engine.Source) + "; no queue time, so no split)"
	case p.Engine.Dropped.Reason != "":
		return fmt.Sprintf("engine timing from the %s dropped as implausible (%s)", p.Engine.Dropped.From, p.Engine.Dropped.Reason)
	}
	return "engine timing not reported"
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

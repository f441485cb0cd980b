package status

// This file holds what the page shows of traffic-shaped probes: a
// trace-shaped or live scenario's probes by prompt-length class, and each
// target's live length mix next to the shapes its scenarios probe.

import (
	"fmt"
	"sort"
	"time"

	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/internal/workload"
	"github.com/slaprobe/slaprobe/prober"
)

// classesView is a trace-shaped or live scenario's probes in the window by
// length class, counted as slaprobe_trace_probes_total counts them.
type classesView struct {
	Rows  []classRow
	Total int
	Live  bool // drawn from the live mix, not a trace
}

type classRow struct {
	Class                     string
	Probes, Good, Slow, Error int
	GoodShare                 string // of Probes; "" when none
	P50, P99                  string // TTFT; "" when none answered
	Limit                     string // the class's TTFT threshold
}

// buildClasses counts the probes sent since since by class: good (answered
// within the class's TTFT threshold), slow (answered over it), error. Nil
// for a scenario without a workload.
func buildClasses(sc prober.Scenario, probes []Probe, since time.Time) *classesView {
	sh, ok := sc.Shape.(*workload.Shape)
	if !ok {
		return nil
	}
	v := &classesView{Live: sh.IsLive()}
	ttfts := map[string][]float64{}
	rows := map[string]*classRow{}
	for _, c := range workload.Classes {
		r := &classRow{Class: c.Name}
		if d, ok := sh.TTFT()[c.Name]; ok {
			r.Limit = "≤ " + formatValue(d.Seconds(), "s")
		}
		rows[c.Name] = r
	}
	for i := range probes {
		p := &probes[i]
		r := rows[p.LengthClass]
		if !p.Done || r == nil || p.Sent.Before(since) {
			continue
		}
		r.Probes++
		v.Total++
		switch {
		case p.ClassTTFT <= 0:
			r.Error++
		case sh.TTFT().Met(p.LengthClass, p.ClassTTFT):
			r.Good++
		default:
			r.Slow++
		}
		if p.ClassTTFT > 0 {
			ttfts[p.LengthClass] = append(ttfts[p.LengthClass], p.ClassTTFT.Seconds())
		}
	}
	for _, c := range workload.Classes {
		r := rows[c.Name]
		if r.Probes > 0 {
			r.GoodShare = share(r.Good, r.Probes)
		}
		if vals := ttfts[c.Name]; len(vals) > 0 {
			sort.Float64s(vals)
			r.P50, r.P99 = formatValue(sweep.Quantile(vals, 0.5), "s"), formatValue(sweep.Quantile(vals, 0.99), "s")
		}
		v.Rows = append(v.Rows, *r)
	}
	return v
}

// MinLiveShare is the share of the live mix's requests below which a
// probed fixed shape's length class counts as one the traffic no longer
// sends, once the window holds at least MinLiveRequests requests.
const (
	MinLiveShare    = 0.01
	MinLiveRequests = 10
)

// liveMixView is a target's live length mix and the shapes its scenarios
// probe.
type liveMixView struct {
	Window   string
	Requests int
	ReadAgo  string
	Err      string // why there is no mix
	Classes  []mixClassView
	Output   string // the answers' p50 and p90
	Shapes   []mixShapeView
	Judged   bool // enough requests to say a shape is not sent
	Stale    int  // shapes in a class under MinLiveShare
	Note     string
}

type mixClassView struct {
	Class string
	Share string
	Width float64 // percent, for the bar
}

type mixShapeView struct {
	Scenario string
	Shape    string // "4096 in / 256 out", "drawn from a trace", …
	Class    string // "" when drawn
	Share    string // the live share of Class
	Stale    bool
	Warning  string
}

// buildLiveMix sets a target's live mix beside its scenarios' shapes.
func buildLiveMix(mix workload.LiveMix, read time.Time, err error, scenarios []prober.Scenario, now time.Time) *liveMixView {
	v := &liveMixView{Requests: int(mix.Requests + 0.5)}
	if !read.IsZero() {
		v.ReadAgo = ago(now, read)
	}
	switch {
	case read.IsZero():
		v.Err = "not read yet: the mix takes two reads of the engine's /metrics"
	case mix.Requests == 0 && err != nil:
		v.Err = err.Error()
	case mix.Requests == 0:
		v.Err = "no request finished in the window (or the engine was read once only)"
	}
	var shares []float64
	if v.Err == "" {
		v.Window = human(mix.Window)
		shares = workload.ClassShares(mix.Prompt)
		for i, c := range workload.Classes {
			v.Classes = append(v.Classes, mixClassView{Class: c.Name, Share: pct1(shares[i]), Width: 100 * shares[i]})
		}
		if mix.Output.Total() > 0 {
			v.Output = fmt.Sprintf("answers p50 %.0f, p90 %.0f tokens", mix.Output.Quantile(0.5), mix.Output.Quantile(0.9))
		}
		v.Judged = v.Requests >= MinLiveRequests
	}
	for _, sc := range scenarios {
		sv := mixShapeView{Scenario: sc.Name}
		if sh, ok := sc.Shape.(*workload.Shape); ok {
			sv.Shape = "drawn from a trace, by class below"
			if sh.IsLive() {
				sv.Shape = "drawn from this mix"
			}
			v.Shapes = append(v.Shapes, sv)
			continue
		}
		sv.Shape = fmt.Sprintf("%d in / %d out", sc.InputTokens, sc.OutputTokens)
		if sc.IsConversation() {
			sv.Shape += fmt.Sprintf(", first of %d turns", sc.Turns())
		}
		k := workload.ClassOf(sc.InputTokens)
		sv.Class = k.Name
		if shares != nil {
			i := sort.Search(len(workload.Classes), func(i int) bool { return workload.Classes[i].Tokens >= k.Tokens })
			sv.Share = pct1(shares[i])
			if v.Judged && shares[i] < MinLiveShare {
				sv.Stale = true
				v.Stale++
				sv.Warning = fmt.Sprintf("%s probes %d-token prompts (class %s), which carried %s of the engine's %d requests in the last %s: the traffic no longer sends this shape (below %s)",
					sc.Name, sc.InputTokens, k.Name, sv.Share, v.Requests, v.Window, pct1(MinLiveShare))
			}
		}
		v.Shapes = append(v.Shapes, sv)
	}
	switch {
	case v.Err != "":
	case !v.Judged:
		v.Note = fmt.Sprintf("Fewer than %d requests in the window: too few to say a shape is not sent.", MinLiveRequests)
	default:
		v.Note = fmt.Sprintf("A probed fixed shape is flagged when its class carries under %s of the window's requests.", pct1(MinLiveShare))
	}
	return v
}

// pct1 is a share with one decimal: 0.4 % must not read as 0 %.
func pct1(r float64) string { return fmt.Sprintf("%.1f %%", 100*r) }

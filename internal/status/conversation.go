package status

import (
	"fmt"
	"html/template"
	"sort"
	"time"

	"github.com/slaprobe/slaprobe/internal/svgchart"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/prober"
)

// ConvTurn is one turn of a conversation probe as the status page shows
// it: the priming turn is 1, follow-ups 2 and up.
type ConvTurn struct {
	Turn int
	OK   bool          // the turn succeeded
	TTFT time.Duration // 0 when not measured
	// Cache is the follow-up's class, as slaprobe_conversation_turns_total
	// counts it; "" on the priming turn and on a follow-up that failed.
	Cache prober.ConversationCache
}

// conversationTurns lists the turns of a conversation probe's result (the
// last turn, carrying the earlier ones); nil for a cold probe.
func conversationTurns(res *prober.Result) []ConvTurn {
	if res.Turn < 1 {
		return nil
	}
	var out []ConvTurn
	for _, r := range append(res.Earlier[:len(res.Earlier):len(res.Earlier)], *res) {
		ct := ConvTurn{Turn: r.Turn, OK: r.Kind == prober.KindSuccess}
		if r.Timed() && r.TTFT() > 0 {
			ct.TTFT = r.TTFT()
		}
		if ct.OK && r.FollowUp() {
			ct.Cache = r.ConversationCache()
		}
		out = append(out, ct)
	}
	return out
}

// conversationView is a conversation scenario's turns on the status page:
// its follow-ups by cache class, and TTFT against the turn number.
type conversationView struct {
	Turns         int // turns per conversation, priming turn included
	Conversations int // conversations in the window
	Classes       []cacheClassView
	FollowUps     int // successful follow-ups in the window, all classes
	Chart         template.HTML
	Legend        template.HTML
	// Note says what the chart draws, or why nothing.
	Note string
}

type cacheClassView struct {
	Class string
	Count int
	Share string // of FollowUps; "" when there is none
}

// buildConversation gathers the conversation probes sent since since: the
// follow-ups of each cache class (counted as slaprobe_conversation_turns_total
// counts them: successful follow-ups) and, per turn number, the median TTFT
// and the last conversation's.
func buildConversation(id string, sc prober.Scenario, probes []Probe, since time.Time) *conversationView {
	if !sc.IsConversation() {
		return nil
	}
	v := &conversationView{Turns: sc.Turns()}
	counts := map[prober.ConversationCache]int{}
	byTurn := map[int][]float64{}
	var last []ConvTurn
	for i := range probes {
		p := &probes[i]
		if !p.Done || len(p.Conversation) == 0 || p.Sent.Before(since) {
			continue
		}
		v.Conversations++
		last = p.Conversation
		for _, t := range p.Conversation {
			if t.Cache != "" {
				counts[t.Cache]++
				v.FollowUps++
			}
			if t.TTFT > 0 {
				byTurn[t.Turn] = append(byTurn[t.Turn], t.TTFT.Seconds())
			}
		}
	}
	for _, c := range prober.ConversationCaches {
		cv := cacheClassView{Class: string(c), Count: counts[c]}
		if v.FollowUps > 0 {
			cv.Share = pct(float64(counts[c]) / float64(v.FollowUps))
		}
		v.Classes = append(v.Classes, cv)
	}

	turns := make([]int, 0, len(byTurn))
	for k := range byTurn {
		turns = append(turns, k)
	}
	sort.Ints(turns)
	median := svgchart.Series{Name: "median of the window's conversations", Color: "#0969da"}
	for _, k := range turns {
		vals := byTurn[k]
		sort.Float64s(vals)
		m := sweep.Quantile(vals, 0.5)
		median.Points = append(median.Points, svgchart.Point{X: float64(k), Y: m,
			Tip: fmt.Sprintf("turn %d: median TTFT %s over %d conversations", k, formatValue(m, "s"), len(vals))})
	}
	latest := svgchart.Series{Name: "last conversation", Color: "#bc4c00", Marker: 1, Dashed: true}
	for _, t := range last {
		if t.TTFT <= 0 {
			continue
		}
		tip := fmt.Sprintf("turn %d: TTFT %s", t.Turn, formatValue(t.TTFT.Seconds(), "s"))
		if t.Turn == 1 {
			tip += " (priming turn, a cold prompt)"
		} else if t.Cache != "" {
			tip += ", cache " + string(t.Cache)
		}
		latest.Points = append(latest.Points, svgchart.Point{X: float64(t.Turn), Y: t.TTFT.Seconds(), Tip: tip})
	}
	ticks := make([]float64, 0, v.Turns)
	step := max(1, (v.Turns+11)/12) // at most about 12 labelled turns
	for k := 1; k <= v.Turns; k += step {
		ticks = append(ticks, float64(k))
	}
	if ticks[len(ticks)-1] != float64(v.Turns) {
		ticks = append(ticks, float64(v.Turns))
	}
	c := svgchart.Chart{ID: id + "-turns", Title: sc.Name + ": TTFT by turn",
		Desc:  "TTFT of each turn of the scenario's conversations: turn 1 is the cold priming turn, later turns are follow-ups on its cache.",
		X:     svgchart.Axis{Label: "turn", Ticks: ticks, Fmt: svgchart.TickPlain},
		Y:     svgchart.Axis{Label: "TTFT", Fmt: svgchart.TickSeconds, FromZero: true},
		Empty: "no conversation in the window"}
	if len(median.Points) > 0 {
		c.Series = append(c.Series, median)
	}
	if v.Conversations > 1 && len(latest.Points) > 0 {
		c.Series = append(c.Series, latest)
	}
	if lim := sc.Thresholds.TTFT; lim > 0 {
		c.Refs = append(c.Refs, svgchart.RefLine{Value: lim.Seconds(), Label: "SLA " + formatValue(lim.Seconds(), "s"), Color: "#cf222e"})
	}
	v.Chart, v.Legend = c.SVG(), c.LegendHTML()
	switch {
	case v.Conversations == 0:
		v.Note = "No conversation finished in the window."
	case v.FollowUps == 0:
		v.Note = fmt.Sprintf("%d conversation(s) in the window, none with a successful follow-up.", v.Conversations)
	default:
		v.Note = fmt.Sprintf("%d successful follow-ups of %d conversation(s) in the window, classed by the share of what the engine had already seen that it served from its cache: hit ≥ %.0f %%, miss < %.0f %%, the share reported by the server, else inferred from the turn's TTFT against the cold first turn; unknown when neither is possible.",
			v.FollowUps, v.Conversations, prober.HitShare*100, prober.MissShare*100)
	}
	return v
}

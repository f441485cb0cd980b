package render

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/svgchart"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/prober"
)

// Number formatting shared by the Markdown and HTML renderers, so both
// documents show the same digits.

// grouped formats v with thousands separators and the given decimals.
func grouped(v float64, decimals int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	s := strconv.FormatFloat(v, 'f', decimals, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	intPart, frac, hasFrac := strings.Cut(s, ".")
	var b strings.Builder
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	out := b.String()
	if hasFrac {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}

// fmtRate formats tokens/s: one decimal below 1,000, none above.
func fmtRate(v float64) string {
	if math.Abs(v) >= 1000 {
		return grouped(v, 0)
	}
	return grouped(v, 1)
}

// fmtSeconds formats a duration given in seconds: ms below 1 s.
func fmtSeconds(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0 s"
	case a < 0.01:
		return strconv.FormatFloat(v*1000, 'f', 1, 64) + " ms"
	case a < 1:
		return strconv.FormatFloat(v*1000, 'f', 0, 64) + " ms"
	case a < 10:
		return strconv.FormatFloat(v, 'f', 2, 64) + " s"
	default:
		return grouped(v, 1) + " s"
	}
}

// fmtMS formats seconds as milliseconds, for ITL.
func fmtMS(v float64) string {
	ms := v * 1000
	if math.Abs(ms) >= 100 {
		return grouped(ms, 0) + " ms"
	}
	return strconv.FormatFloat(ms, 'f', 1, 64) + " ms"
}

// fmtPct formats a ratio as a percentage.
func fmtPct(ratio float64) string {
	p := ratio * 100
	if p != 100 && p >= 99.95 {
		return "99.9%" // never round a failure away
	}
	if p == math.Trunc(p) {
		return strconv.FormatFloat(p, 'f', 0, 64) + "%"
	}
	return strconv.FormatFloat(p, 'f', 1, 64) + "%"
}

// fmtBig formats a large count compactly: 10.7 M, 620 K.
func fmtBig(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e9:
		return strconv.FormatFloat(v/1e9, 'f', 2, 64) + " B"
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 2, 64) + " M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', 0, 64) + " K"
	default:
		return grouped(v, 0)
	}
}

// fmtTokens formats a context size: 1,024 -> "1K", 32,768 -> "32K".
func fmtTokens(n float64) string {
	switch {
	case n >= 1024 && math.Mod(n, 1024) == 0:
		return strconv.FormatFloat(n/1024, 'f', 0, 64) + "K"
	case n >= 1000:
		return strconv.FormatFloat(n/1000, 'f', 1, 64) + "k"
	default:
		return strconv.FormatFloat(n, 'f', 0, 64)
	}
}

// fmtBound formats a capacity: "~35", "128+", "<1", "39".
func fmtBound(b sweep.Bound) string {
	switch {
	case b.AtLeast:
		return strconv.Itoa(b.Value) + "+"
	case b.Value <= 0:
		return "<1"
	case b.Approximate:
		return "~" + strconv.Itoa(b.Value)
	default:
		return strconv.Itoa(b.Value)
	}
}

// fmtWatts formats power.
func fmtWatts(v float64) string { return grouped(v, 0) + " W" }

// fmtUSD formats a cost per hour with enough digits for cents fractions.
func fmtUSD(v float64) string {
	if v < 1 {
		return "$" + strconv.FormatFloat(v, 'f', 3, 64)
	}
	return "$" + grouped(v, 2)
}

// limitText describes one threshold: "TTFT ≤ 8 s", "decode ≥ 15 tok/s".
func limitText(kind string, v float64) string {
	switch kind {
	case report.LimitTTFT:
		return "TTFT ≤ " + fmtSecondsShort(v)
	case report.LimitE2E:
		return "E2E ≤ " + fmtSecondsShort(v)
	case report.LimitITL:
		return "ITL ≤ " + fmtSecondsShort(v)
	case report.LimitDecode:
		return "decode ≥ " + strconv.FormatFloat(v, 'f', -1, 64) + " tok/s"
	}
	return fmt.Sprintf("%s %g", kind, v)
}

// fmtSecondsShort drops trailing zeros: 3 s, 2.5 s, 200 ms.
func fmtSecondsShort(v float64) string {
	if v < 1 {
		return strconv.FormatFloat(svgchart.Clean(v*1000), 'f', -1, 64) + " ms"
	}
	return strconv.FormatFloat(svgchart.Clean(v), 'f', -1, 64) + " s"
}

// thresholdTexts lists a scenario's thresholds in a stable order.
func thresholdTexts(t prober.Thresholds) []string {
	var out []string
	if t.TTFT.Seconds() > 0 {
		out = append(out, limitText(report.LimitTTFT, t.TTFT.Seconds()))
	}
	if t.E2E.Seconds() > 0 {
		out = append(out, limitText(report.LimitE2E, t.E2E.Seconds()))
	}
	if t.ITL.Seconds() > 0 {
		out = append(out, limitText(report.LimitITL, t.ITL.Seconds()))
	}
	if t.MinDecode > 0 {
		out = append(out, limitText(report.LimitDecode, t.MinDecode))
	}
	return out
}

// limitName names a threshold kind in prose.
func limitName(kind string) string {
	switch kind {
	case report.LimitTTFT:
		return "TTFT"
	case report.LimitE2E:
		return "end-to-end latency"
	case report.LimitITL:
		return "inter-token latency"
	case report.LimitDecode:
		return "decode speed"
	}
	return kind
}

// where describes a headline stat's location: "chatbot, closed loop N=1".
func where(s *report.Figure) string {
	if s == nil {
		return ""
	}
	var parts []string
	if s.Scenario != "" {
		parts = append(parts, s.Scenario)
	}
	if s.Concurrency > 0 {
		parts = append(parts, modeLabel(s.Mode)+" N="+strconv.Itoa(s.Concurrency))
	}
	return strings.Join(parts, ", ")
}

func modeLabel(m sweep.Mode) string {
	switch m {
	case sweep.ModeClosedLoop:
		return "closed loop"
	case sweep.ModeBurst:
		return "burst"
	}
	return string(m)
}

func statBound(s *report.Figure) sweep.Bound {
	return sweep.Bound{Value: int(s.Value), Approximate: s.Approximate, AtLeast: s.AtLeast}
}

// fmtPctFine formats a level close to 100 % with up to three decimals
// (99.75%, 99.917%), where fmtPct would round it to 99.8% or 99.9%.
func fmtPctFine(ratio float64) string {
	return strconv.FormatFloat(math.Round(ratio*100_000)/1000, 'f', -1, 64) + "%"
}

// finite reports whether v is a number that can be shown (not NaN or ±Inf).
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

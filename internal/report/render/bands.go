package render

import (
	"math"

	"github.com/slaprobe/slaprobe/internal/slo"
	"github.com/slaprobe/slaprobe/internal/svgchart"
)

// scaled returns the bands as chart shading, with values multiplied by
// scale (1000 for milliseconds, 100 for percent).
func scaled(b slo.Bands, scale float64) []svgchart.Band {
	e := [3]float64{b.Edges[0] * scale, b.Edges[1] * scale, b.Edges[2] * scale}
	if b.HigherIsBetter {
		return []svgchart.Band{band(e[0], math.Inf(1), excellent), band(e[1], e[0], good), band(e[2], e[1], acceptable), band(math.Inf(-1), e[2], poor)}
	}
	return []svgchart.Band{band(math.Inf(-1), e[0], excellent), band(e[0], e[1], good), band(e[1], e[2], acceptable), band(e[2], math.Inf(1), poor)}
}

// Experience levels, best first; they index levelNames and the CSS classes.
type level int

const (
	excellent level = iota
	good
	acceptable
	poor
)

var levelNames = [...]string{"excellent", "good", "acceptable", "poor"}

// band shades [lo, hi) of a chart with level l's colour.
func band(lo, hi float64, l level) svgchart.Band {
	return svgchart.Band{Lo: lo, Hi: hi, Name: levelNames[l]}
}

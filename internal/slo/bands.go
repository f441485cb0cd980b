package slo

// Bands are the experience levels of one metric, in base units: how a user
// feels a value, from excellent to poor. They colour the report's charts
// and the Grafana dashboards, so a band means the same thing everywhere.
type Bands struct {
	Metric string
	// Edges are the borders excellent|good, good|acceptable and
	// acceptable|poor, in the order the metric worsens.
	Edges [3]float64
	// HigherIsBetter is true for speeds and ratios.
	HigherIsBetter bool
	// Text describes each level for the report's legend.
	Text [4]string
}

// The four experience bands.
var (
	// ITLBands: under 10 ms streaming is excellent; 20 ms is where it stops
	// feeling instant; 70 ms is the memory-bandwidth ceiling typical of
	// large MoE models.
	ITLBands = Bands{Metric: "Inter-token latency", Edges: [3]float64{0.010, 0.020, 0.070},
		Text: [4]string{"< 10 ms", "10–20 ms", "20–70 ms", "> 70 ms"}}
	// TTFTBands: under half a second feels instant; past 10 s users retry.
	TTFTBands = Bands{Metric: "Time to first token", Edges: [3]float64{0.5, 2, 10},
		Text: [4]string{"< 0.5 s, feels instant", "0.5–2 s, responsive", "2–10 s, noticeable to slow", "> 10 s, users retry"}}
	// DecodeBands: 15 tokens/s is about reading pace.
	DecodeBands = Bands{Metric: "Decode speed per user", Edges: [3]float64{50, 25, 15}, HigherIsBetter: true,
		Text: [4]string{"> 50 tok/s", "25–50 tok/s", "15–25 tok/s, reading pace", "< 15 tok/s"}}
	// EfficiencyBands grade scaling efficiency (a ratio).
	EfficiencyBands = Bands{Metric: "Scaling efficiency", Edges: [3]float64{0.9, 0.7, 0.5}, HigherIsBetter: true,
		Text: [4]string{"> 90%", "70–90%", "50–70%", "< 50%"}}
)

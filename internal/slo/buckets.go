package slo

// Classic buckets of the probe histograms: each covers the range the
// reference reports show and has an edge at every threshold and experience
// band they use, so that "fraction of probes under X" is exact for those X.
// Native histograms give fine resolution on top for servers that scrape
// them. The alert rules count good probes from these same edges.
var (
	// 25 ms .. 120 s; edges at the 0.1 / 0.5 / 2 / 3 / 5 / 8 / 10 / 12 / 20 s lines.
	TTFTBuckets = []float64{0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 8, 10, 12, 15, 20, 30, 45, 60, 90, 120}
	// 2 ms .. 1 s; edges at the 10 / 20 / 70 ms bands.
	ITLBuckets = []float64{0.002, 0.004, 0.006, 0.008, 0.01, 0.0125, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3, 0.5, 1}
	// 5 .. 500 tokens/s; edges at the 10 / 15 / 20 / 25 / 50 / 80 / 150 bands.
	DecodeBuckets = []float64{5, 10, 15, 20, 25, 30, 40, 50, 60, 80, 100, 125, 150, 175, 200, 250, 300, 400, 500}
	// 0.25 .. 300 s; edge at the 2 s code-completion threshold.
	E2EBuckets = []float64{0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 300}
	// 250 .. 100000 tokens/s.
	PrefillBuckets = []float64{250, 500, 1000, 2000, 3000, 5000, 7500, 10000, 15000, 20000, 30000, 40000, 50000, 75000, 100000}
	// 1 .. 32 tokens: 1 is plain decoding, more is MTP / speculative / stream-interval.
	ChunkBuckets = []float64{1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32}
	// 0 .. 1: the share of drafted tokens accepted.
	AcceptanceBuckets = []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1}
)

// Reduced classic buckets keep only the edges at the thresholds and
// experience bands, plus a few to span the range: about half the series
// (global.classic_histogram_buckets: reduced). Quantiles interpolate over
// wider buckets, so they are coarser between edges.
var (
	TTFTBucketsReduced       = []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 8, 10, 12, 20, 30, 60, 120}
	ITLBucketsReduced        = []float64{0.005, 0.01, 0.02, 0.03, 0.05, 0.07, 0.1, 0.2, 0.5, 1}
	DecodeBucketsReduced     = []float64{10, 15, 20, 25, 50, 80, 150, 300}
	E2EBucketsReduced        = []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300}
	PrefillBucketsReduced    = []float64{500, 1000, 2500, 5000, 10000, 25000, 50000, 100000}
	ChunkBucketsReduced      = []float64{1, 2, 4, 8, 16, 32}
	AcceptanceBucketsReduced = []float64{0.25, 0.5, 0.75, 0.9, 1}
)

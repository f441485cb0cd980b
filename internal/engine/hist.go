package engine

import (
	"fmt"
	"math"
	"sort"

	dto "github.com/prometheus/client_model/go"
)

// MaxHistogramBuckets bounds the buckets of one engine histogram that
// slaprobe re-exports. vLLM's and SGLang's histograms have 10 to 40; a
// family with more is a misconfiguration or an attack on our memory, and is
// skipped with a note rather than copied.
const MaxHistogramBuckets = 64

// Histogram is one engine histogram summed over its label sets: cumulative
// counts by upper bound (the +Inf bucket left out, as Count holds it), in
// the engine's own bounds.
type Histogram struct {
	Count   uint64
	Sum     float64
	Buckets map[float64]uint64
}

// Histograms are the engine's own histograms that slaprobe re-exports. They
// live apart from the scalar fields of a Snapshot so that a Watcher keeps
// them only for its newest snapshot (see Watcher.append): a target's history
// holds thousands of snapshots, which need only the scalars.
type Histograms struct {
	// Phase: "queue", "prefill", "decode" (see PhaseQueue...).
	Phase map[string]Histogram
	TTFT  *Histogram
	ITL   *Histogram
	// KVTransfer is the KV-cache transfer time of disaggregated prefill
	// (vllm:nixl_xfer_time_seconds).
	KVTransfer *Histogram
}

// The phases of a request, the phase label of slaprobe_engine_request_phase_seconds.
const (
	PhaseQueue   = "queue"
	PhasePrefill = "prefill"
	PhaseDecode  = "decode"
)

// Phases lists every phase, in order.
var Phases = []string{PhaseQueue, PhasePrefill, PhaseDecode}

func (h *Histograms) empty() bool {
	return h == nil || (len(h.Phase) == 0 && h.TTFT == nil && h.ITL == nil && h.KVTransfer == nil)
}

// sumHistograms adds the typed histograms of mf whose labels keep accepts
// (nil: all). Every label set must have the same bucket bounds, at most
// MaxHistogramBuckets of them; otherwise it returns an error saying which.
// ok is false when no label set was kept.
func sumHistograms(mf *dto.MetricFamily, keep func(*dto.Metric) bool) (h Histogram, ok bool, err error) {
	var bounds []float64
	for _, m := range mf.GetMetric() {
		dh := m.GetHistogram()
		if dh == nil || (keep != nil && !keep(m)) {
			continue
		}
		var bs []float64
		var cs []uint64
		for _, b := range dh.GetBucket() {
			ub := b.GetUpperBound()
			if math.IsInf(ub, +1) {
				continue // the parser keeps an explicit +Inf bucket; Count holds it
			}
			if math.IsNaN(ub) {
				return Histogram{}, false, fmt.Errorf("histogram %s: bucket bound NaN", mf.GetName())
			}
			bs = append(bs, ub)
			cs = append(cs, b.GetCumulativeCount())
		}
		if len(bs) > MaxHistogramBuckets {
			return Histogram{}, false, fmt.Errorf("histogram %s: %d buckets, more than the %d slaprobe copies", mf.GetName(), len(bs), MaxHistogramBuckets)
		}
		if !sort.Float64sAreSorted(bs) {
			return Histogram{}, false, fmt.Errorf("histogram %s: bucket bounds not in increasing order", mf.GetName())
		}
		if !ok {
			bounds = bs
			h = Histogram{Buckets: make(map[float64]uint64, len(bs))}
			ok = true
		} else if !sameBounds(bounds, bs) {
			return Histogram{}, false, fmt.Errorf("histogram %s: label sets with different bucket bounds (%v and %v) cannot be summed", mf.GetName(), bounds, bs)
		}
		for i, ub := range bs {
			h.Buckets[ub] += cs[i]
		}
		h.Count += dh.GetSampleCount()
		h.Sum += dh.GetSampleSum()
	}
	return h, ok, nil
}

func sameBounds(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// labelValue returns the value of label name on m, and whether it is there.
func labelValue(m *dto.Metric, name string) (string, bool) {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue(), true
		}
	}
	return "", false
}

package engine

// This file is the one reader: it walks a parsed page with the table of
// its engine's flavor (flavor.go) and fills a Snapshot.

import (
	"fmt"
	"math"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// page is what a flavor's hook sees: the parsed families, and which
// signals the rows found (a sum or mean with a sample, a histogram present).
type page struct {
	fams map[string]*dto.MetricFamily
	got  [numSignals]bool
}

func (p page) first(ns names) *dto.MetricFamily { return first(p.fams, ns) }

func (p page) sum(ns names) (float64, int, bool) { return sumOf(p.fams, ns, nil) }

func (p page) mean(ns names) (float64, bool) { return meanOf(p.fams, ns, nil) }

// read fills a Snapshot from fams with f's table, then f's hook.
func (f *flavor) read(fams map[string]*dto.MetricFamily) Snapshot {
	s := Snapshot{Flavor: f.name}
	p := page{fams: fams}
	for _, r := range f.rows {
		keep := r.where.keep()
		switch r.signal.kind() {
		case kindSum:
			v, n, ok := sumOf(fams, r.names, keep)
			if !ok && r.zeroIfAbsent {
				v, n, ok = 0, 0, true
			}
			p.got[r.signal] = ok
			setSum(&s, r.signal, r.scale(v), n, ok)
		case kindMean:
			v, ok := meanOf(fams, r.names, keep)
			p.got[r.signal] = ok
			setMean(&s, r.signal, r.scale(v), ok)
		case kindHist:
			sum, count, ok := histOf(fams, r.names, keep)
			p.got[r.signal] = ok
			setHist(&s, r.signal, r.scale(sum), count, ok)
		}
	}
	s.HasPrefixCache = p.got[sigPrefixCacheQueries] && p.got[sigPrefixCacheHits]
	s.HasSpecDecode = p.got[sigSpecDraftTokens] && p.got[sigSpecAcceptedTokens]
	s.HasWaitingByReason = p.got[sigWaitingCapacity] || p.got[sigWaitingDeferred]

	h := &Histograms{Phase: map[string]Histogram{}}
	for _, sig := range histOrder {
		for _, r := range f.rows {
			if r.signal != sig {
				continue
			}
			x, ok := f.histogram(fams, r, &s)
			if !ok {
				continue
			}
			switch sig {
			case sigTTFT:
				h.TTFT = &x
			case sigITL:
				h.ITL = &x
			case sigKVTransferTime:
				h.KVTransfer = &x
			default:
				h.Phase[phaseOf[sig]] = x
			}
		}
	}
	s.Hists = h
	if f.hook != nil {
		f.hook(p, &s)
	}
	if s.Hists.empty() {
		s.Hists = nil
	}
	return s
}

func (r row) scale(v float64) float64 {
	if r.div == 0 || r.div == 1 {
		return v
	}
	return v / r.div
}

func setSum(s *Snapshot, sig signal, v float64, n int, ok bool) {
	switch sig {
	case sigRunning:
		s.Running, s.Series, s.HasQueue = v, n, ok
	case sigWaiting:
		s.Waiting = v
	case sigGenerationTokens:
		s.GenerationTokens, s.HasTokens = v, ok
	case sigPromptTokens:
		s.PromptTokens = v
	case sigPrefixCacheQueries:
		s.PrefixCacheQueries = v
	case sigPrefixCacheHits:
		s.PrefixCacheHits = v
	case sigSpecDraftTokens:
		s.SpecDraftTokens = v
	case sigSpecAcceptedTokens:
		s.SpecAcceptedTokens = v
	case sigWaitingCapacity:
		s.WaitingCapacity = v
	case sigWaitingDeferred:
		s.WaitingDeferred = v
	case sigPreemptions:
		s.Preemptions, s.HasPreemptions = v, ok
	case sigAdmissionRejections:
		s.AdmissionRejections, s.HasAdmissionRejections = v, ok
	case sigKVTransferFailures:
		s.KVTransferFailures, s.HasKVTransferFailures = v, ok
	}
}

func setMean(s *Snapshot, sig signal, v float64, ok bool) {
	switch sig {
	case sigKVCache:
		s.KVCacheUsage, s.HasKVCache = v, ok
	case sigCacheHitRate:
		s.CacheHitRate, s.HasCacheHitRate = v, ok
	case sigSpecAcceptRate:
		s.SpecAcceptRate, s.HasSpecAcceptRate = v, ok
	}
}

func setHist(s *Snapshot, sig signal, sum, count float64, ok bool) {
	switch sig {
	case sigQueueTime:
		s.QueueTimeSum, s.QueueTimeCount, s.HasQueueTime = sum, count, ok
	case sigTTFT:
		s.TTFTSum, s.TTFTCount, s.HasTTFT = sum, count, ok
	case sigITL:
		s.ITLSum, s.ITLCount, s.HasITL = sum, count, ok
	case sigRequestsFinished:
		s.RequestsFinished, s.HasRequestsFinished = count, ok
	}
}

// histogram sums r's first present family as a typed histogram over the
// label sets r and f keep, in seconds; one that cannot be summed is noted
// on s and left out.
func (f *flavor) histogram(fams map[string]*dto.MetricFamily, r row, s *Snapshot) (Histogram, bool) {
	mf := first(fams, r.names)
	if mf == nil {
		return Histogram{}, false
	}
	keep := and(r.where.keep(), f.histKeep)
	h, ok, err := sumHistograms(mf, keep)
	if err != nil {
		if r.where.name != "" {
			s.Notes = append(s.Notes, fmt.Sprintf("%s %s: %v", r.where.name, r.where.value, err))
		} else {
			s.Notes = append(s.Notes, err.Error())
		}
		return Histogram{}, false
	}
	if ok && r.div != 0 && r.div != 1 {
		b := make(map[float64]uint64, len(h.Buckets))
		for ub, c := range h.Buckets {
			b[ub/r.div] = c
		}
		h.Buckets, h.Sum = b, h.Sum/r.div
	}
	return h, ok
}

// and keeps a label set both keep (a nil func keeps all).
func and(a, b func(*dto.Metric) bool) func(*dto.Metric) bool {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(m *dto.Metric) bool { return a(m) && b(m) }
}

func hasPrefix(fams map[string]*dto.MetricFamily, prefix string) bool {
	for name := range fams {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// first returns the first family of ns that is present.
func first(fams map[string]*dto.MetricFamily, ns names) *dto.MetricFamily {
	for _, n := range ns {
		if mf, ok := fams[n]; ok && len(mf.GetMetric()) > 0 {
			return mf
		}
	}
	return nil
}

// sumOf sums a gauge or counter over the label sets keep accepts (nil: all;
// data-parallel engines, several model names). ok is false when none had a
// value.
func sumOf(fams map[string]*dto.MetricFamily, ns names, keep func(*dto.Metric) bool) (sum float64, n int, ok bool) {
	mf := first(fams, ns)
	if mf == nil {
		return 0, 0, false
	}
	for _, m := range mf.GetMetric() {
		if keep != nil && !keep(m) {
			continue
		}
		v := scalar(m)
		if math.IsNaN(v) {
			continue // a NaN gauge says "unknown"; do not let it poison the sum
		}
		sum += v
		n++
	}
	return sum, n, n > 0
}

// meanOf averages a ratio gauge over its label sets: the KV cache usage of
// two engines at 0.5 each is 0.5, not 1.
func meanOf(fams map[string]*dto.MetricFamily, ns names, keep func(*dto.Metric) bool) (float64, bool) {
	sum, n, ok := sumOf(fams, ns, keep)
	if !ok || n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

// histOf returns the summed sample sum and count of a histogram. An
// exposition without a TYPE line leaves _sum and _count as untyped
// families of their own; those are read too.
func histOf(fams map[string]*dto.MetricFamily, ns names, keep func(*dto.Metric) bool) (sum, count float64, ok bool) {
	for _, n := range ns {
		if mf, found := fams[n]; found && len(mf.GetMetric()) > 0 {
			for _, m := range mf.GetMetric() {
				if keep != nil && !keep(m) {
					continue
				}
				switch {
				case m.GetHistogram() != nil:
					sum += m.GetHistogram().GetSampleSum()
					count += float64(m.GetHistogram().GetSampleCount())
				case m.GetSummary() != nil:
					sum += m.GetSummary().GetSampleSum()
					count += float64(m.GetSummary().GetSampleCount())
				}
			}
			return sum, count, true
		}
		if mc, found := fams[n+"_count"]; found && len(mc.GetMetric()) > 0 {
			count, _, _ = sumOf(fams, names{n + "_count"}, keep)
			sum, _, _ = sumOf(fams, names{n + "_sum"}, keep)
			return sum, count, true
		}
	}
	return 0, 0, false
}

func scalar(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

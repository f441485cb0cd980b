package collector

// This file makes a scrape of the probe metrics cheaper at fleet scale
// (thousands of target × scenario children per metric): each metric
// vector hands the registry its children already in the order the
// exposition sorts them, so the registry's sort finds nothing to do, and a
// probe histogram keeps the protobuf snapshot of its last scrape until it
// is observed again, so that the children of targets not probed since the
// last scrape cost neither a bucket walk nor its allocations.
//
// The vectors themselves stay the source of truth: whatever deletes a child
// (ForgetTarget, ForgetModel, any expiry) deletes it from the vector, and the
// next Collect drops it here too.

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// sortedChild is one child of a vector as the registry receives it.
type sortedChild struct {
	m      prometheus.Metric
	desc   *prometheus.Desc
	labels []*dto.LabelPair // sorted by name; set before the child is first handed out, then never changed
	seen   uint64           // the Collect that last found the child in its vector

	// Histograms only (cache): the snapshot of the last Write, kept until an
	// observation marks the child dirty.
	cache bool
	dirty atomic.Bool
	mu    sync.Mutex
	snap  *dto.Metric
}

func (c *sortedChild) Desc() *prometheus.Desc { return c.desc }

// Write hands out the cached snapshot when nothing was observed since it
// was taken. The snapshot's parts are shared between scrapes, read only:
// the registry and the encoders never change a written metric.
func (c *sortedChild) Write(out *dto.Metric) error {
	if !c.cache {
		err := c.m.Write(out)
		out.Label = c.labels
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Clear the flag before the Write: an observation during it sets it
	// again, and the next scrape takes a new snapshot.
	if c.dirty.Swap(false) || c.snap == nil {
		snap := &dto.Metric{}
		if err := c.m.Write(snap); err != nil {
			c.snap = nil
			return err
		}
		c.snap = snap
	}
	out.Label = c.labels
	out.Histogram = c.snap.Histogram
	out.TimestampMs = c.snap.TimestampMs
	return nil
}

// sortedVec wraps a metric vector's Collect. It keeps the children in
// exposition order and re-sorts only when a child came or went.
type sortedVec struct {
	vec   prometheus.Collector
	cache bool

	mu       sync.Mutex
	gen      uint64
	children map[prometheus.Metric]*sortedChild
	order    []*sortedChild // replaced, never changed in place, when children come or go
}

func newSortedVec(vec prometheus.Collector, cache bool) *sortedVec {
	return &sortedVec{vec: vec, cache: cache, children: map[prometheus.Metric]*sortedChild{}}
}

// sorted wraps a counter or gauge vector for registration.
func sorted(vec prometheus.Collector) prometheus.Collector { return newSortedVec(vec, false) }

func (s *sortedVec) Describe(ch chan<- *prometheus.Desc) { s.vec.Describe(ch) }

func (s *sortedVec) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	size := len(s.order) + 64
	s.mu.Unlock()
	// Buffered for every child, so that the vector's Collect rarely waits.
	in := make(chan prometheus.Metric, size)
	go func() {
		s.vec.Collect(in)
		close(in)
	}()
	s.mu.Lock()
	s.gen++
	n := 0
	var added []*sortedChild
	for m := range in {
		n++
		c := s.children[m]
		if c == nil {
			c = &sortedChild{m: m, desc: m.Desc(), cache: s.cache}
			pb := &dto.Metric{}
			if err := m.Write(pb); err == nil { // else the registry reports it at the child's Write
				c.labels = pb.Label
				if c.cache {
					c.snap = pb // taken under s.mu: an observation since marks it dirty
				}
			}
			s.children[m] = c
			added = append(added, c)
		}
		c.seen = s.gen
	}
	if len(added) > 0 {
		slices.SortFunc(added, compareChildren) // packed in the order they are read
		packLabels(added)
	}
	if len(added) > 0 || n != len(s.order) {
		order := make([]*sortedChild, 0, n)
		for m, c := range s.children {
			if c.seen != s.gen {
				delete(s.children, m) // gone from the vector
				continue
			}
			order = append(order, c)
		}
		slices.SortFunc(order, compareChildren)
		s.order = order
	}
	order := s.order
	s.mu.Unlock()
	for _, c := range order {
		ch <- c
	}
}

// packLabels gives the new children label pairs of their own, side by
// side in one block, with one copy of each name and value: the registry and
// the encoder read every label of every child at each scrape, and pairs
// scattered over the heap as the children were created cost a cache miss
// each.
func packLabels(children []*sortedChild) {
	total := 0
	for _, c := range children {
		total += len(c.labels)
	}
	pairs := make([]dto.LabelPair, total)
	ptrs := make([]*dto.LabelPair, total)
	strs := map[string]*string{}
	intern := func(v string) *string {
		p := strs[v]
		if p == nil {
			p = &v
			strs[v] = p
		}
		return p
	}
	k := 0
	for _, c := range children {
		start := k
		for _, l := range c.labels {
			pairs[k].Name = intern(l.GetName())
			pairs[k].Value = intern(l.GetValue())
			ptrs[k] = &pairs[k]
			k++
		}
		c.labels = ptrs[start:k:k]
		if c.snap != nil {
			c.snap.Label = c.labels
		}
	}
}

// compareChildren orders children as the registry's sort does: by their
// label values, label by label in the order of the names.
func compareChildren(a, b *sortedChild) int {
	if len(a.labels) != len(b.labels) {
		return len(a.labels) - len(b.labels)
	}
	for i, l := range a.labels {
		if c := strings.Compare(l.GetValue(), b.labels[i].GetValue()); c != 0 {
			return c
		}
	}
	return 0
}

// markDirty marks the child m, once observed, for a new snapshot.
func (s *sortedVec) markDirty(m prometheus.Metric) {
	s.mu.Lock()
	c := s.children[m]
	s.mu.Unlock()
	if c != nil {
		c.dirty.Store(true)
	}
}

// snapHist is a probe histogram vector whose scrape goes through a
// sortedVec with snapshots. Observations must go through its
// WithLabelValues, which marks the child for a new snapshot.
type snapHist struct {
	*prometheus.HistogramVec
	sorted *sortedVec
}

func newSnapHist(v *prometheus.HistogramVec) *snapHist {
	return &snapHist{HistogramVec: v, sorted: newSortedVec(v, true)}
}

func (h *snapHist) Collect(ch chan<- prometheus.Metric) { h.sorted.Collect(ch) }

// WithLabelValues returns the child's observer; an observation through it
// marks the child for a new snapshot at the next scrape.
func (h *snapHist) WithLabelValues(lvs ...string) prometheus.Observer {
	o := h.HistogramVec.WithLabelValues(lvs...)
	return &dirtyObserver{o: o, s: h.sorted}
}

// dirtyObserver observes, then marks the child dirty (after, so that a
// scrape in between takes the observation at the latest next time).
type dirtyObserver struct {
	o prometheus.Observer
	s *sortedVec
}

func (d *dirtyObserver) Observe(v float64) {
	d.o.Observe(v)
	d.s.markDirty(d.o.(prometheus.Metric))
}

func (d *dirtyObserver) ObserveWithExemplar(v float64, l prometheus.Labels) {
	d.o.(prometheus.ExemplarObserver).ObserveWithExemplar(v, l)
	d.s.markDirty(d.o.(prometheus.Metric))
}

// Desc and Write make the observer the child's metric too, as the
// vector's own children are.
func (d *dirtyObserver) Desc() *prometheus.Desc      { return d.o.(prometheus.Metric).Desc() }
func (d *dirtyObserver) Write(out *dto.Metric) error { return d.o.(prometheus.Metric).Write(out) }

package prober

// This file holds boundedMap, the one shape of every map the Prober keys by
// a target, a URL or a model: at most max entries, each forgotten once it
// has not been used for ttl, the least recently used going first. A caller
// of /probe or a fleet whose addresses change can then make the Prober
// calibrate again, never grow without bound.

import (
	"container/list"
	"time"
)

// Bounds of the Prober's state. A calibration is a handful of requests,
// so what is evicted costs one recalibration at most; the scheduled
// targets, probed every interval, stay in use and stay cached.
const (
	// maxCalibrations bounds the cached calibrations (base URL, model,
	// input tokens, API), their prompt-cut records and in-flight
	// conversations' sequence counters.
	maxCalibrations = 512
	// maxPreparedPerCalibration bounds the request templates built on one
	// calibration (one per target name and scenario).
	maxPreparedPerCalibration = 64
	// maxBaseURLs bounds what is remembered per base URL: the model found
	// on /v1/models, and whether /tokenize is usable.
	maxBaseURLs = 1024
	// stateTTL forgets what has not been used for this long.
	stateTTL = time.Hour
)

// boundedMap is a map with a size and an idle-age bound, least recently
// used evicted first. It is not safe for concurrent use: the Prober's mu
// guards every one.
type boundedMap[K comparable, V any] struct {
	max   int
	ttl   time.Duration
	now   func() time.Time
	order *list.List // of *boundedItem[K, V], most recently used first
	items map[K]*list.Element
}

type boundedItem[K comparable, V any] struct {
	key  K
	val  V
	used time.Time
}

func newBoundedMap[K comparable, V any](max int, ttl time.Duration, now func() time.Time) *boundedMap[K, V] {
	return &boundedMap[K, V]{max: max, ttl: ttl, now: now, order: list.New(), items: map[K]*list.Element{}}
}

// get returns k's value and marks it used; an expired entry is removed.
func (m *boundedMap[K, V]) get(k K) (V, bool) {
	var zero V
	e, ok := m.items[k]
	if !ok {
		return zero, false
	}
	it := e.Value.(*boundedItem[K, V])
	now := m.now()
	if m.ttl > 0 && now.Sub(it.used) > m.ttl {
		m.removeElement(e)
		return zero, false
	}
	it.used = now
	m.order.MoveToFront(e)
	return it.val, true
}

// put sets k to v, marks it used, and evicts what is expired or over max.
func (m *boundedMap[K, V]) put(k K, v V) {
	now := m.now()
	if e, ok := m.items[k]; ok {
		it := e.Value.(*boundedItem[K, V])
		it.val, it.used = v, now
		m.order.MoveToFront(e)
	} else {
		m.items[k] = m.order.PushFront(&boundedItem[K, V]{key: k, val: v, used: now})
	}
	m.evict(now)
}

// evict drops entries idle past ttl and the least recently used beyond max.
func (m *boundedMap[K, V]) evict(now time.Time) {
	for e := m.order.Back(); e != nil; e = m.order.Back() {
		it := e.Value.(*boundedItem[K, V])
		if m.order.Len() <= m.max && (m.ttl <= 0 || now.Sub(it.used) <= m.ttl) {
			return
		}
		m.removeElement(e)
	}
}

func (m *boundedMap[K, V]) remove(k K) {
	if e, ok := m.items[k]; ok {
		m.removeElement(e)
	}
}

func (m *boundedMap[K, V]) removeElement(e *list.Element) {
	it := m.order.Remove(e).(*boundedItem[K, V])
	delete(m.items, it.key)
}

// removeIf removes every entry for which drop is true.
func (m *boundedMap[K, V]) removeIf(drop func(K, V) bool) {
	for e := m.order.Front(); e != nil; {
		next := e.Next()
		if it := e.Value.(*boundedItem[K, V]); drop(it.key, it.val) {
			m.removeElement(e)
		}
		e = next
	}
}

// len is the number of entries, expired ones not yet evicted included.
func (m *boundedMap[K, V]) len() int { return m.order.Len() }

// newState makes the Prober's bounded maps (New).
func (p *Prober) newState() {
	now := p.clock.Now
	p.cal = newBoundedMap[calKey, *calEntry](maxCalibrations, stateTTL, now)
	p.cuts = newBoundedMap[calKey, cutEntry](maxCalibrations, cutRecheck, now)
	p.noTokenize = newBoundedMap[string, bool](maxBaseURLs, stateTTL, now)
	p.detected = newBoundedMap[string, string](maxBaseURLs, stateTTL, now)
	p.convSeq = newBoundedMap[prepKey, uint64](maxCalibrations, stateTTL, now)
}

// newPreps makes the map of a calibration's request templates.
func (p *Prober) newPreps() *boundedMap[prepKey, *Prepared] {
	return newBoundedMap[prepKey, *Prepared](maxPreparedPerCalibration, stateTTL, p.clock.Now)
}

// StateSize reports how many entries the Prober holds in its bounded maps
// (calibrations, their request templates, prompt cuts, base URLs known to
// lack /tokenize, detected models, conversation counters), for tests and
// the bound's documentation.
func (p *Prober) StateSize() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.cal.len() + p.cuts.len() + p.noTokenize.len() + p.detected.len() + p.convSeq.len() + len(p.calls)
	for e := p.cal.order.Front(); e != nil; e = e.Next() {
		n += e.Value.(*boundedItem[calKey, *calEntry]).val.preps.len()
	}
	return n
}

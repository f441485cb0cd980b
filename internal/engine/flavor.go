package engine

// This file holds what an engine's table is made of and the registry of
// tables. Each engine slaprobe reads is one file (vllm.go, sglang.go,
// llamacpp.go) that registers one flavor: how its page is recognised and
// which of its families feed which Snapshot field. read.go is the one
// reader that walks a page with the table of the flavor it detects; the
// page filter (filter.go) keeps exactly the families the tables name.

import (
	"fmt"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// A flavor is one engine's table.
type flavor struct {
	// name is Snapshot.Flavor for a page of this engine.
	name string
	// prefix detects the engine: a page holding any family whose name
	// starts with it (read or not) is this engine's.
	prefix string
	// precedence orders detection where a page holds the prefixes of
	// several engines: the lowest wins.
	precedence int
	// rows are the families read, each into one signal.
	rows []row
	// histKeep selects the label sets of the histograms kept by value
	// (Snapshot.Hists); nil keeps all. Sums and counts (TTFTSum...) are
	// read over every label set.
	histKeep func(*dto.Metric) bool
	// hook reads, after the rows, what is not a table: it sees the page and
	// which signals the rows found. Nil for none.
	hook func(p page, s *Snapshot)
	// props: once its metrics are found, the watcher reads the server's
	// /props beside its /metrics (llama.cpp server).
	props bool
	// lengths says where its sigPromptLength and sigOutputLength rows come
	// from, or why it has none: the live length mix's error says it when
	// they are missing.
	lengths string
}

// A row is one signal of an engine: the families it is read from and how.
type row struct {
	signal signal
	// names are the families, current name first; the first present is
	// read, so an engine exporting an old and a new name is not counted
	// twice.
	names names
	// where keeps only the label sets with this label value (zero: all).
	where label
	// div divides every value read (a histogram's sum and bucket bounds,
	// not its counts): 1000 for milliseconds to seconds, 100 for a percent
	// to a ratio; 0 means 1.
	div float64
	// zeroIfAbsent: the engine declares this counter only once it first
	// counts, so on its page absence reads 0 (and the signal is present).
	zeroIfAbsent bool
}

// label is a label name and value; the zero label matches every label set.
type label struct{ name, value string }

func (l label) keep() func(*dto.Metric) bool {
	if l.name == "" {
		return nil
	}
	return func(m *dto.Metric) bool {
		v, ok := labelValue(m, l.name)
		return ok && v == l.value
	}
}

// names lists the families that carry one signal, current name first.
type names []string

// A signal is a Snapshot field (or a few that go together) an engine's
// family feeds; its kind says how the family is read.
type signal int

const (
	sigHook signal = iota // read by the flavor's hook, not by the reader

	// sums over label sets (gauges and counters)
	sigRunning             // Running, Series, HasQueue
	sigWaiting             // Waiting
	sigGenerationTokens    // GenerationTokens, HasTokens
	sigPromptTokens        // PromptTokens
	sigPrefixCacheQueries  // PrefixCacheQueries; HasPrefixCache with sigPrefixCacheHits
	sigPrefixCacheHits     // PrefixCacheHits
	sigSpecDraftTokens     // SpecDraftTokens; HasSpecDecode with sigSpecAcceptedTokens
	sigSpecAcceptedTokens  // SpecAcceptedTokens
	sigWaitingCapacity     // WaitingCapacity; HasWaitingByReason with sigWaitingDeferred
	sigWaitingDeferred     // WaitingDeferred
	sigPreemptions         // Preemptions, HasPreemptions
	sigAdmissionRejections // AdmissionRejections, HasAdmissionRejections
	sigKVTransferFailures  // KVTransferFailures, HasKVTransferFailures

	// means over label sets (ratio gauges)
	sigKVCache        // KVCacheUsage, HasKVCache
	sigCacheHitRate   // CacheHitRate, HasCacheHitRate
	sigSpecAcceptRate // SpecAcceptRate, HasSpecAcceptRate

	// histograms, seconds: sum and count, and by value in Hists
	sigQueueTime        // QueueTimeSum, QueueTimeCount, HasQueueTime; Hists.Phase[queue]
	sigTTFT             // TTFTSum, TTFTCount, HasTTFT; Hists.TTFT
	sigITL              // ITLSum, ITLCount, HasITL; Hists.ITL
	sigRequestsFinished // RequestsFinished, HasRequestsFinished: the e2e latency histogram's count
	sigPrefillTime      // Hists.Phase[prefill]
	sigDecodeTime       // Hists.Phase[decode]
	sigKVTransferTime   // Hists.KVTransfer

	// histograms of tokens per finished request, read by the live length
	// mix (internal/workload, LengthFamilies), not into a Snapshot; the page
	// filter does not keep them
	sigPromptLength // prompt tokens per request
	sigOutputLength // generated tokens per request

	numSignals
)

type kind int

const (
	kindHook kind = iota
	kindSum
	kindMean
	kindHist
	kindLength
)

func (g signal) kind() kind {
	switch {
	case g == sigHook:
		return kindHook
	case g <= sigKVTransferFailures:
		return kindSum
	case g <= sigSpecAcceptRate:
		return kindMean
	case g >= sigPromptLength:
		return kindLength
	}
	return kindHist
}

// histOrder is the order histograms are read by value in, so that notes
// come in the same order on every scrape.
var histOrder = []signal{sigQueueTime, sigPrefillTime, sigDecodeTime, sigTTFT, sigITL, sigKVTransferTime}

// phaseOf is the Hists.Phase key of the phase histograms.
var phaseOf = map[signal]string{sigQueueTime: PhaseQueue, sigPrefillTime: PhasePrefill, sigDecodeTime: PhaseDecode}

// flavors are the registered tables, lowest precedence first; wanted holds
// every family name they read (the page filter passes only those).
var (
	flavors []*flavor
	wanted  = map[string]bool{}
)

// register checks f and adds it to the flavors. A table that is wrong
// (no name or prefix, a prefix that overlaps another's, a signal read by
// two rows or out of range, a family outside the prefix)
// is a programming error: register panics while the package initialises,
// so no binary with it runs.
func register(f flavor) *flavor {
	fail := func(format string, a ...any) {
		panic(fmt.Sprintf("engine flavor %q: %s", f.name, fmt.Sprintf(format, a...)))
	}
	if f.name == "" || f.prefix == "" {
		fail("needs a name and a prefix")
	}
	for _, o := range flavors {
		if o.name == f.name || strings.HasPrefix(o.prefix, f.prefix) || strings.HasPrefix(f.prefix, o.prefix) {
			fail("name or prefix %q taken by flavor %q", f.prefix, o.name)
		}
	}
	seen := map[signal]bool{}
	for _, r := range f.rows {
		if r.signal < 0 || r.signal >= numSignals {
			fail("signal %d out of range", r.signal)
		}
		if len(r.names) == 0 {
			fail("a row of signal %d names no family", r.signal)
		}
		if r.signal != sigHook && seen[r.signal] {
			fail("signal %d read by two rows", r.signal)
		}
		seen[r.signal] = true
		if r.div < 0 {
			fail("row %s: div %v", r.names[0], r.div)
		}
		for _, n := range r.names {
			if !strings.HasPrefix(n, f.prefix) {
				fail("family %q does not start with the prefix %q", n, f.prefix)
			}
		}
	}
	for _, r := range f.rows {
		if r.signal.kind() == kindLength {
			continue
		}
		for _, n := range r.names {
			wanted[n] = true
		}
	}
	p := &f
	i := 0
	for i < len(flavors) && flavors[i].precedence <= f.precedence {
		i++
	}
	flavors = append(flavors[:i], append([]*flavor{p}, flavors[i:]...)...)
	return p
}

// detect returns the flavor of the page whose prefixes has reports, or nil.
func detect(has func(prefix string) bool) *flavor {
	for _, f := range flavors {
		if has(f.prefix) {
			return f
		}
	}
	return nil
}

// readsProps reports whether the flavor named name serves /props.
func readsProps(name string) bool {
	for _, f := range flavors {
		if f.name == name {
			return f.props
		}
	}
	return false
}

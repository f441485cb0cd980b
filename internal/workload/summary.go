package workload

import (
	"errors"
	"fmt"
	"io"
	"math/bits"
	"strings"
	"time"
)

// Progress is how far a long read has come.
type Progress struct {
	Bytes, Size int64 // read so far, and the file's size (0 when unknown)
	Requests    int
}

// String is the progress line: "read 512 MiB of 1.0 GiB (50 %), 3216000 requests".
func (p Progress) String() string {
	if p.Size > 0 {
		return fmt.Sprintf("read %s of %s (%d %%), %d requests", byteSize(p.Bytes), byteSize(p.Size), p.Bytes*100/p.Size, p.Requests)
	}
	return fmt.Sprintf("read %s, %d requests", byteSize(p.Bytes), p.Requests)
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// ProgressEvery is how many bytes Summarize reads between progress calls.
const ProgressEvery = 64 << 20

// Lengths summarises one length (prompt or answer) over a trace, in tokens.
// Percentiles come from a log-linear histogram: within 1 % of the exact
// order statistic.
type Lengths struct {
	Mean               float64
	P50, P90, P99, Max int
}

// Summary is what a trace holds, read in one pass in bounded memory.
type Summary struct {
	File    string
	Format  Format
	Block   int // tokens per hash id
	Skipped int // rows the filters left out

	Requests     int
	ZeroInput    int // requests with an empty prompt (a probe skips them)
	ZeroOutput   int // requests with no answer tokens (BurstGPT's failed requests; a probe skips them)
	First, Last  time.Duration
	Input        Lengths
	Output       Lengths
	InputTokens  int64
	OutputTokens int64

	// HashIDs says whether the trace has block ids. SharedTokens are the
	// prompt tokens in leading blocks an earlier request already had: what an
	// unbounded prefix cache would serve. SharedShare is their share of all
	// prompt tokens.
	HashIDs      bool
	SharedTokens int64
	SharedShare  float64
	// SharedExactUpTo is 0 when the share is exact; else the request after
	// which more distinct large ids came than are kept (SeenCap), and later
	// requests' blocks count as unshared.
	SharedExactUpTo int
}

// Span is the time from the first request to the last.
func (s Summary) Span() time.Duration { return s.Last - s.First }

// Rate is requests per second over the span (0 for a trace without one).
func (s Summary) Rate() float64 {
	if s.Span() <= 0 {
		return 0
	}
	return float64(s.Requests-1) / s.Span().Seconds()
}

// String writes the summary as check-config prints it.
func (s Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "trace %s (%s): %d requests", s.File, s.Format, s.Requests)
	if s.Skipped > 0 {
		fmt.Fprintf(&b, " (%d rows left out by the models/log_types filters)", s.Skipped)
	}
	fmt.Fprintf(&b, "\n  time span %s, %.3g requests/s\n", s.Span().Round(time.Millisecond), s.Rate())
	fmt.Fprintf(&b, "  input tokens:  mean %.0f, p50 %d, p90 %d, p99 %d, max %d\n", s.Input.Mean, s.Input.P50, s.Input.P90, s.Input.P99, s.Input.Max)
	fmt.Fprintf(&b, "  output tokens: mean %.0f, p50 %d, p90 %d, p99 %d, max %d\n", s.Output.Mean, s.Output.P50, s.Output.P90, s.Output.P99, s.Output.Max)
	if s.ZeroInput > 0 || s.ZeroOutput > 0 {
		fmt.Fprintf(&b, "  %d requests with no prompt tokens, %d with no answer tokens (not probed)\n", s.ZeroInput, s.ZeroOutput)
	}
	if s.HashIDs {
		fmt.Fprintf(&b, "  shared-prefix share: %.1f %% of prompt tokens are in %d-token blocks an earlier request had", 100*s.SharedShare, s.Block)
		if s.SharedExactUpTo > 0 {
			fmt.Fprintf(&b, " (exact up to request %d; later new ids not kept)", s.SharedExactUpTo)
		}
		b.WriteString("\n")
	} else {
		b.WriteString("  shared-prefix share: unknown (the trace has no block ids)\n")
	}
	return b.String()
}

// Summarize reads the whole trace spec names; progress, when not nil, is
// called every ProgressEvery bytes and at the end.
func Summarize(spec Spec, progress func(Progress)) (Summary, error) {
	r, err := Open(spec)
	if err != nil {
		return Summary{}, err
	}
	defer r.Close()
	return SummarizeReader(r, progress)
}

// SummarizeReader reads the rest of r into a Summary.
func SummarizeReader(r *Reader, progress func(Progress)) (Summary, error) {
	sum := newSummarizer(r)
	next := int64(ProgressEvery)
	var req Request
	for {
		err := r.Next(&req)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return sum.s, err
		}
		sum.add(&req)
		if progress != nil && r.BytesRead() >= next {
			next = r.BytesRead() + ProgressEvery
			progress(Progress{Bytes: r.BytesRead(), Size: r.Size(), Requests: sum.s.Requests})
		}
	}
	if progress != nil {
		progress(Progress{Bytes: r.BytesRead(), Size: r.Size(), Requests: sum.s.Requests})
	}
	return sum.finish(), nil
}

// summarizer builds a Summary one request at a time.
type summarizer struct {
	r       *Reader
	s       Summary
	in, out histogram
	seen    *idSet
}

func newSummarizer(r *Reader) *summarizer {
	return &summarizer{r: r, s: Summary{File: r.name, Format: r.spec.Format, Block: r.spec.Block()}, seen: newIDSet()}
}

func (m *summarizer) add(req *Request) {
	s := &m.s
	if s.Requests == 0 || req.At < s.First {
		s.First = req.At
	}
	if req.At > s.Last {
		s.Last = req.At
	}
	s.Requests++
	m.in.add(req.Input)
	m.out.add(req.Output)
	s.InputTokens += int64(req.Input)
	s.OutputTokens += int64(req.Output)
	if req.Input == 0 {
		s.ZeroInput++
	}
	if req.Output == 0 {
		s.ZeroOutput++
	}
	if len(req.HashIDs) > 0 {
		s.HashIDs = true
		s.SharedTokens += int64(SharedPrefix(req.HashIDs, req.Input, s.Block, m.seen.has))
		for _, id := range req.HashIDs {
			if !m.seen.add(id) && s.SharedExactUpTo == 0 {
				s.SharedExactUpTo = s.Requests
			}
		}
	}
}

func (m *summarizer) finish() Summary {
	s := m.s
	s.Skipped = m.r.Skipped()
	s.Input, s.Output = m.in.lengths(), m.out.lengths()
	if s.InputTokens > 0 {
		s.SharedShare = float64(s.SharedTokens) / float64(s.InputTokens)
	}
	return s
}

// SharedPrefix is how many of a prompt's input tokens lie in its leading
// blocks that seen reports (a prefix cache serves a block only when it
// serves every block before it). Block i holds tokens [i·block,
// min((i+1)·block, input)).
func SharedPrefix(ids []uint64, input, block int, seen func(uint64) bool) int {
	n := 0
	for i, id := range ids {
		if !seen(id) {
			break
		}
		n += min(block, input-i*block)
	}
	return max(n, 0)
}

// SeenCap bounds the large block ids (>= denseIDs) Summarize keeps.
const SeenCap = 4 << 20

// denseIDs: ids below it go into a bitset (at most 16 MiB); Mooncake's
// remapped ids are small consecutive integers.
const denseIDs = 1 << 27

type idSet struct {
	bits   []uint64
	sparse map[uint64]struct{}
}

func newIDSet() *idSet { return &idSet{sparse: map[uint64]struct{}{}} }

func (s *idSet) has(id uint64) bool {
	if id < denseIDs {
		w := id / 64
		return w < uint64(len(s.bits)) && s.bits[w]&(1<<(id%64)) != 0
	}
	_, ok := s.sparse[id]
	return ok
}

// add records id; it returns false when id could not be kept (SeenCap).
func (s *idSet) add(id uint64) bool {
	if id < denseIDs {
		w := id / 64
		if uint64(len(s.bits)) <= w {
			// Grow by doubling, but never past the bitset's bound.
			n := min(max(2*len(s.bits), int(w)+1, 1024), denseIDs/64)
			grown := make([]uint64, n)
			copy(grown, s.bits)
			s.bits = grown
		}
		s.bits[w] |= 1 << (id % 64)
		return true
	}
	if _, ok := s.sparse[id]; ok {
		return true
	}
	if len(s.sparse) >= SeenCap {
		return false
	}
	s.sparse[id] = struct{}{}
	return true
}

// histogram counts values in log-linear buckets: exact below 256, then 128
// buckets per power of two (relative width under 1 %).
type histogram struct {
	counts []int64
	n      int64
	sum    float64
	max    int
}

const histExact = 256

func bucketOf(v int) int {
	if v < histExact {
		return v
	}
	e := bits.Len(uint(v)) - 1 // >= 8
	sub := (v >> (e - 7)) & 127
	return histExact + (e-8)*128 + sub
}

// bucketMid is a bucket's middle value.
func bucketMid(b int) int {
	if b < histExact {
		return b
	}
	e := (b-histExact)/128 + 8
	sub := (b - histExact) % 128
	lo := (128 + sub) << (e - 7)
	return lo + (1<<(e-7))/2
}

func (h *histogram) add(v int) {
	if v < 0 {
		v = 0
	}
	b := bucketOf(v)
	for len(h.counts) <= b {
		h.counts = append(h.counts, 0)
	}
	h.counts[b]++
	h.n++
	h.sum += float64(v)
	h.max = max(h.max, v)
}

// quantile is the nearest-rank q-quantile.
func (h *histogram) quantile(q float64) int {
	if h.n == 0 {
		return 0
	}
	rank := int64(q*float64(h.n) + 0.999999)
	rank = min(max(rank, 1), h.n)
	var c int64
	for b, n := range h.counts {
		c += n
		if c >= rank {
			return min(bucketMid(b), h.max)
		}
	}
	return h.max
}

func (h *histogram) lengths() Lengths {
	if h.n == 0 {
		return Lengths{}
	}
	return Lengths{Mean: h.sum / float64(h.n), P50: h.quantile(0.5), P90: h.quantile(0.9), P99: h.quantile(0.99), Max: h.max}
}

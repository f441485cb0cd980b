package workload

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Class is a band of prompt lengths a probe's TTFT is judged in: a trace's
// lengths spread over three orders of magnitude, and one TTFT threshold
// cannot fit them all. The bands are the seed reports' 1K, 4K, 16K and 32K
// scenarios and the 96K coding assistant; a prompt belongs to the nearest
// (on a log scale). There are five, so a label holding a class stays
// bounded.
type Class struct {
	Name   string
	Tokens int // the band's centre
}

// Classes are the length classes, shortest first.
var Classes = []Class{{"1k", 1024}, {"4k", 4096}, {"16k", 16384}, {"32k", 32768}, {"96k", 98304}}

// ClassOf is the class of a prompt of input tokens.
func ClassOf(input int) Class {
	x := int64(max(input, 1))
	for i := 0; i < len(Classes)-1; i++ {
		// The boundary is the geometric mean of two neighbouring centres:
		// input <= sqrt(a·b), in integers.
		if x <= math.MaxInt32 && x*x <= int64(Classes[i].Tokens)*int64(Classes[i+1].Tokens) {
			return Classes[i]
		}
	}
	return Classes[len(Classes)-1]
}

// ClassTTFT is a TTFT threshold per class name.
type ClassTTFT map[string]time.Duration

// DefaultClassTTFT: the report family's 3 s at 1K to 16K (the built-in
// chatbot, rag and agentic thresholds), then the use-case thresholds of the
// long prompts (general_chat's 8 s at 32K, coding_assistant's 12 s at 96K).
var DefaultClassTTFT = ClassTTFT{"1k": 3 * time.Second, "4k": 3 * time.Second, "16k": 3 * time.Second, "32k": 8 * time.Second, "96k": 12 * time.Second}

// Validate reports a class name that is not one of Classes, or a threshold
// that is not positive.
func (c ClassTTFT) Validate() error {
	for name, d := range c {
		known := false
		for _, k := range Classes {
			known = known || k.Name == name
		}
		if !known {
			names := make([]string, len(Classes))
			for i, k := range Classes {
				names[i] = k.Name
			}
			return fmt.Errorf("workload: ttft_by_class[%q]; expected a class among %s", name, strings.Join(names, ", "))
		}
		if d <= 0 {
			return fmt.Errorf("workload: ttft_by_class[%q]=%s; expected a positive duration", name, d)
		}
	}
	return nil
}

// Met reports whether ttft meets the threshold of class; a class without
// one is met.
func (c ClassTTFT) Met(class string, ttft time.Duration) bool {
	d, ok := c[class]
	return !ok || ttft <= d
}

// String lists the thresholds shortest class first: "1k≤3s 4k≤3s …".
func (c ClassTTFT) String() string {
	var parts []string
	for _, k := range Classes {
		if d, ok := c[k.Name]; ok {
			parts = append(parts, k.Name+"≤"+d.String())
		}
	}
	return strings.Join(parts, " ")
}

// classBounds are the upper bounds of Classes but the last: the geometric
// means of neighbouring centres, as ClassOf draws them.
func classBounds() []float64 {
	b := make([]float64, len(Classes)-1)
	for i := range b {
		b[i] = math.Sqrt(float64(Classes[i].Tokens) * float64(Classes[i+1].Tokens))
	}
	return b
}

// bucketBounds are a bucket's bounds as draw reads them: from 0.5 (the
// first bucket) or its lower bound, to its upper bound or, for +Inf, twice
// its lower bound.
func (h Hist) bucketBounds(i int) (lo, hi float64) {
	if i > 0 {
		lo = h.Upper[i-1]
	}
	hi = h.Upper[i]
	if math.IsInf(hi, 1) {
		hi = 2 * max(lo, 1)
	}
	return max(lo, 0.5), max(hi, max(lo, 0.5))
}

// ClassShares splits a histogram of prompt lengths over Classes, in their
// order: each bucket's count spread log-uniformly between its bounds, as
// live probes are drawn. All zeros when the histogram counts nothing.
func ClassShares(h Hist) []float64 {
	out := make([]float64, len(Classes))
	total := h.Total()
	if total == 0 {
		return out
	}
	bounds := classBounds()
	for i, c := range h.Counts {
		if c == 0 {
			continue
		}
		lo, hi := h.bucketBounds(i)
		if hi <= lo { // a point: all of it in its class
			out[slices.IndexFunc(Classes, func(k Class) bool { return k == ClassOf(int(math.Ceil(hi))) })] += c / total
			continue
		}
		from := math.Log(lo)
		for k := range Classes {
			to := math.Log(hi)
			if k < len(bounds) {
				to = min(to, math.Log(bounds[k]))
			}
			if to > from {
				out[k] += c / total * (to - from) / (math.Log(hi) - math.Log(lo))
				from = to
			}
		}
	}
	return out
}

// Quantile is the q-quantile of the lengths the histogram counts, log-
// uniform inside a bucket as draw reads it; 0 when it counts nothing.
func (h Hist) Quantile(q float64) float64 {
	total := h.Total()
	if total == 0 {
		return 0
	}
	rank, last := q*total, 0.0
	for i, c := range h.Counts {
		if c == 0 {
			continue
		}
		lo, hi := h.bucketBounds(i)
		if rank > c {
			rank, last = rank-c, hi
			continue
		}
		f := max(rank/c, 0)
		return math.Exp(math.Log(lo) + f*(math.Log(hi)-math.Log(lo)))
	}
	return last // rounding left rank past the last bucket
}

package workload

import (
	"fmt"
	"math"
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

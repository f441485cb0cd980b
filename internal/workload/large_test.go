package workload

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// TestLargeTraceStreams reads a synthetic Mooncake trace of SLAPROBE_TRACE_GB gibibytes (written
// to a temporary directory by Generate) and checks that the heap stays bounded while it is read.
// make test runs it on a small trace (8 MiB); SLAPROBE_TRACE_GB=1 runs the 1 GiB one.
func TestLargeTraceStreams(t *testing.T) {
	size := int64(8 << 20)
	if v := os.Getenv("SLAPROBE_TRACE_GB"); v != "" {
		gb, err := strconv.ParseFloat(v, 64)
		if err != nil || gb <= 0 {
			t.Fatalf("SLAPROBE_TRACE_GB=%q; expected a positive number of GiB", v)
		}
		size = int64(gb * (1 << 30))
	}
	path := filepath.Join(t.TempDir(), "large.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	// Estimate bytes per request on a sample, then write enough requests for size bytes.
	o := GenOptions{Seed: 1, Rate: 50, InputMin: 200, InputMax: 64000, OutputMin: 8, OutputMax: 2000,
		Prefixes: 64, PrefixBlocks: 8, SharedProb: 0.4}
	var cnt countingWriter
	o.Requests = 10000
	if err := Generate(&cnt, FormatMooncake, o); err != nil {
		t.Fatal(err)
	}
	o.Requests = int(size / (cnt.n / 10000))
	bw := bufio.NewWriter(f)
	start := time.Now()
	if err := Generate(bw, FormatMooncake, o); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	st, _ := os.Stat(path)
	t.Logf("wrote %s (%d requests) in %s", byteSize(st.Size()), o.Requests, time.Since(start).Round(time.Millisecond))

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak uint64
	sample := func() {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
	}
	start = time.Now()
	var lines []string
	s, err := Summarize(Spec{Path: path, Format: FormatMooncake}, func(p Progress) {
		sample()
		lines = append(lines, p.String())
	})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("read %d requests in %s (%.0f MiB/s); heap in use peaked %d MiB above the start; progress: %q",
		s.Requests, took.Round(time.Millisecond), float64(st.Size())/(1<<20)/took.Seconds(), (peak-min(base, peak))>>20, lines[len(lines)-1])
	t.Log(s.String())
	if s.Requests != o.Requests {
		t.Errorf("read %d requests, wrote %d", s.Requests, o.Requests)
	}
	// Bounded whatever the file's size: the line buffer, the parser, the histograms and the id
	// bitset (at most 16 MiB; the 1 GiB trace's ids reach about 10^8, which fills most of it),
	// with the garbage of its last growth.
	if grow := peak - min(base, peak); grow > 64<<20 {
		t.Errorf("heap grew by %d MiB while reading a %s trace; want under 64 MiB", grow>>20, byteSize(st.Size()))
	}
	if len(lines) < int(st.Size()/ProgressEvery) {
		t.Errorf("%d progress lines for %s; want one every %s", len(lines), byteSize(st.Size()), byteSize(ProgressEvery))
	}
}

type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

var _ io.Writer = (*countingWriter)(nil)

package prober_test

// The timing error of kernel receive stamps against user-space ones and
// against the floor of a bare reader, with the engine in a child process
// that records when it wrote each chunk (TestTimingSimProcess), for 1 to 256
// streams, on a quiet machine or with busy processes beside the prober.
// See docs/performance.md.

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/prober"
)

// benchUserStamps makes benchTimingError's prober stamp in user space.
var benchUserStamps bool

// BenchmarkStampError runs, for 1, 16, 64 and 256 concurrent streams, the
// split timing benchmark (engine in a child process, decode step 5 ms,
// 128 output tokens) three ways: the prober with kernel stamps, the prober
// with user-space stamps (the same connections, SetUserStamps), and raw, a
// bare reader (net.Conn, bufio, time.Now after each line: the floor of any
// user-space client). SLAPROBE_BENCH_BUSY=N starts N busy processes (shell
// loops) beside it for the whole run; SLAPROBE_BENCH_STREAMS=1,16 picks the
// stream counts. Report ttft_err_mean_us / ttft_err_p99_us (|first token's
// arrival − its write|) and itl_probe_err_mean_us (|probe's ITL − the
// engine's|); kernel_share is the share of probes whose stamps came from
// the kernel.
//
//	SLAPROBE_BENCH_BUSY=4 go test -run '^$' -bench StampError -benchtime 3x ./prober/
func BenchmarkStampError(b *testing.B) {
	counts := []int{1, 16, 64, 256}
	if v := os.Getenv("SLAPROBE_BENCH_STREAMS"); v != "" {
		counts = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				b.Fatalf("SLAPROBE_BENCH_STREAMS=%q: want stream counts like 1,16,64", v)
			}
			counts = append(counts, n)
		}
	}
	if v := os.Getenv("SLAPROBE_BENCH_BUSY"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			b.Fatalf("SLAPROBE_BENCH_BUSY=%q: want a number of busy processes", v)
		}
		startBusy(b, n)
	}
	for _, n := range counts {
		for _, src := range []string{"kernel", "user", "raw"} {
			b.Run(fmt.Sprintf("streams=%d/stamps=%s", n, src), func(b *testing.B) {
				sim := benchChildProcess(b, n)
				if src == "raw" {
					benchRawFloor(b, n, sim)
					return
				}
				sim.tr.DialContext = prober.DialKernelStamps
				benchUserStamps = src == "user"
				defer func() { benchUserStamps = false }()
				benchTimingError(b, n, 1, sim)
			})
		}
	}
}

// startBusy starts n processes that spin on a CPU until the benchmark
// ends.
func startBusy(b *testing.B, n int) {
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
}

var rawIDRE = regexp.MustCompile(`"id":"([^"]+)"`)

// benchRawFloor streams n requests at once per op from the engine with a
// bare reader and compares its stamps with the engine's writes.
func benchRawFloor(b *testing.B, n int, sim benchSim) {
	addr := strings.TrimPrefix(sim.target.BaseURL, "http://")
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}],"max_tokens":128,"stream":true,"ignore_eos":true}`,
		sim.target.Model, strings.Repeat("word ", 250))
	req := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body)
	type stream struct {
		id          string
		first, last time.Time
		err         error
	}
	one := func(start <-chan struct{}) (s stream) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return stream{err: err}
		}
		defer c.Close()
		<-start
		if _, err := c.Write([]byte(req)); err != nil {
			return stream{err: err}
		}
		br := bufio.NewReaderSize(c, 64<<10)
		for {
			line, err := br.ReadSlice('\n')
			at := time.Now()
			if err != nil {
				if s.id == "" {
					s.err = err
				}
				return s
			}
			data, ok := bytes.CutPrefix(line, []byte("data: "))
			if !ok {
				continue
			}
			if bytes.HasPrefix(data, []byte("[DONE]")) {
				return s
			}
			if s.id == "" {
				if m := rawIDRE.FindSubmatch(data); m != nil {
					s.id = string(m[1])
				}
			}
			if bytes.Contains(data, []byte(`"content":"`)) && !bytes.Contains(data, []byte(`"content":""`)) {
				if s.first.IsZero() {
					s.first = at
				}
				s.last = at
			}
		}
	}
	var ttft, signed, itl []float64
	round := func(record bool) {
		out := make([]stream, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { out[i] = one(start) })
		}
		time.Sleep(50 * time.Millisecond) // the dials
		close(start)
		wg.Wait()
		for _, s := range out {
			if s.err != nil || s.id == "" || s.first.IsZero() {
				b.Fatalf("raw stream: id %q, %v", s.id, s.err)
			}
			if !record {
				continue
			}
			tr, ok := sim.trace(s.id)
			if !ok {
				b.Fatalf("no trace for %s", s.id)
			}
			ttft = append(ttft, benchUS(absDur(s.first.Sub(tr.FirstTokenWritten))))
			signed = append(signed, benchUS(s.first.Sub(tr.FirstTokenWritten)))
			if k := tr.CompletionTokens - tr.Chunks[0].Tokens; k > 0 {
				truth := tr.LastTokenWritten.Sub(tr.FirstTokenWritten) / time.Duration(k)
				itl = append(itl, benchUS(absDur(s.last.Sub(s.first)/time.Duration(k)-truth)))
			}
		}
	}
	round(false)
	for b.Loop() {
		round(true)
	}
	b.ReportMetric(benchMean(ttft), "ttft_err_mean_us")
	b.ReportMetric(benchQuantile(ttft, 0.99), "ttft_err_p99_us")
	b.ReportMetric(benchMean(itl), "itl_probe_err_mean_us")
	b.ReportMetric(benchQuantile(signed, 0.5), "ttft_err_signed_p50_us")
}

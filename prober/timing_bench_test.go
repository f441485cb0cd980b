package prober_test

// Timing error under concurrency: many probes stream from the simulated
// engine at once and every probe's timestamps are compared with the engine's
// Trace write times: in this process (same monotonic clock), or with the
// engine in a child process (BenchmarkTimingSplit*, wall clock). See
// docs/performance.md for figures and how to read them.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/prober"
)

// BenchmarkTimingError64Streams runs rounds of 64 concurrent probes (256
// prompt tokens, 128 output tokens) against an engine whose decode step is
// 5 ms with 64 requests running. One op is one round. Custom metrics, in µs:
//
//	ttft_err_mean_us, ttft_err_p99_us  |FirstToken − engine's first chunk write|: the
//	                                   error of TTFT, t0 being the prober's own
//	itl_err_mean_us                    per-token ITL error: for each pair of consecutive
//	                                   output chunks, |client gap − engine gap| / tokens
//	itl_probe_err_mean_us              |probe's ITL − trace ITL| (the error of the
//	                                   exported mean ITL)
//	lag_mean_us, lag_p99_us            chunk arrival − chunk write, over every chunk
//	lag_in_burst_mean_us               the part of the lag while the engine's handlers were
//	                                   still writing chunks of the same step (writes less
//	                                   than 1 ms apart form one burst)
//	lag_after_burst_mean_us            the part after the burst's last write
//	burst_mean_us                      first to last chunk write of a step
//	cpu_per_chunk_us                   process CPU (user + system) per output chunk
//	                                   while the probes ran; the split benchmarks report
//	                                   client_ and engine_cpu_per_chunk_us instead
func BenchmarkTimingError64Streams(b *testing.B) { benchTimingError(b, 64, 1, benchInProcess(b, 64)) }

// BenchmarkTimingError1Stream is the same with one stream (four probes one
// after another per op, decode step 5 ms at batch 1): the error without
// contention for the CPU, to compare with 64 streams.
func BenchmarkTimingError1Stream(b *testing.B) { benchTimingError(b, 1, 4, benchInProcess(b, 1)) }

// BenchmarkTimingSplit64Streams is BenchmarkTimingError64Streams with the
// engine in a child process (this test binary run again, see
// TestTimingSimProcess), as a real prober sees a real server: the HTTP
// handlers no longer share the prober's Go scheduler. Client arrivals and
// the engine's write times are compared on the wall clock (CLOCK_REALTIME,
// same host). SLAPROBE_TIMING_SIM_CPUS, if set, pins the child with
// taskset(1) (e.g. "0"; run the benchmark itself under "taskset -c 1" to
// give each process a core of its own).
func BenchmarkTimingSplit64Streams(b *testing.B) {
	benchTimingError(b, 64, 1, benchChildProcess(b, 64))
}

// BenchmarkTimingSplit1Stream is BenchmarkTimingError1Stream with the engine
// in a child process.
func BenchmarkTimingSplit1Stream(b *testing.B) { benchTimingError(b, 1, 4, benchChildProcess(b, 1)) }

const (
	benchStep   = 5 * time.Millisecond // decode step at the benchmark's batch size
	benchPerSeq = 12500 * time.Nanosecond
)

// benchProbe is one probe of a round with the client-side arrivals of its
// output chunks.
type benchProbe struct {
	res      prober.Result
	arrivals []time.Time
}

// benchConfig is the engine of the timing benchmarks: a decode step of
// exactly benchStep with streams requests running, one prefill step for all.
func benchConfig(streams int) vllmsim.Config {
	c := vllmsim.DefaultConfig()
	c.EOSMeanTokens = 0
	c.MaxNumSeqs = max(streams, 64)
	c.MaxNumBatchedTokens = 0 // one prefill step admits every waiting probe
	c.PrefillOverhead = 5 * time.Millisecond
	c.PrefillTokensPerSecond = 2e6
	c.PrefillQuadratic = 0
	c.DecodePerSeq = benchPerSeq
	c.DecodeBase = benchStep - time.Duration(streams)*benchPerSeq
	c.DecodePerKVToken = 0
	c.TraceCapacity = 16384
	return c
}

// benchSim is the engine a timing benchmark probes, and its ground truth.
type benchSim struct {
	tr     *http.Transport
	target prober.Target
	trace  func(id string) (vllmsim.Trace, bool)
	pid    int // the engine's process when it is a child, else 0
}

func benchInProcess(b *testing.B, streams int) benchSim {
	sim := accStartSim(b, func(c *vllmsim.Config) { *c = benchConfig(streams) })
	return benchSim{tr: sim.tr, target: sim.target, trace: sim.e.Trace}
}

// benchChildEnv tells TestTimingSimProcess to serve an engine for that many
// streams.
const benchChildEnv = "SLAPROBE_TIMING_SIM_CHILD"

// benchChildProcess starts the engine in a child process and returns it; the
// child exits when the benchmark ends (its stdin closes).
func benchChildProcess(b *testing.B, streams int) benchSim {
	b.Helper()
	args := []string{os.Args[0], "-test.run=^TestTimingSimProcess$", "-test.count=1"}
	if cpus := os.Getenv("SLAPROBE_TIMING_SIM_CPUS"); cpus != "" {
		args = append([]string{"taskset", "-c", cpus}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), benchChildEnv+"="+strconv.Itoa(streams))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	sc := bufio.NewScanner(stdout)
	addr := ""
	for addr == "" && sc.Scan() {
		addr, _ = strings.CutPrefix(sc.Text(), "SIM LISTENING ")
	}
	if addr == "" {
		b.Fatalf("the engine process did not start: %v", sc.Err())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()

	cfg := benchConfig(streams)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.MaxIdleConnsPerHost = 256
	b.Cleanup(tr.CloseIdleConnections)
	base := "http://" + addr
	client := &http.Client{Transport: tr}
	return benchSim{
		tr:     tr,
		target: prober.Target{Name: "sim", API: prober.APIChat, BaseURL: base, Model: cfg.ModelName, Client: client},
		// Times decoded from JSON carry no monotonic reading, so they are
		// compared with the client's on the wall clock.
		pid: cmd.Process.Pid,
		trace: func(id string) (vllmsim.Trace, bool) {
			resp, err := client.Get(base + "/debug/trace/" + id)
			if err != nil {
				b.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return vllmsim.Trace{}, false
			}
			var t vllmsim.Trace
			if err := json.NewDecoder(resp.Body).Decode(&t); err != nil {
				b.Fatal(err)
			}
			return t, true
		},
	}
}

// TestTimingSimProcess is the engine process of BenchmarkTimingSplit*: it
// serves the engine and GET /debug/trace/{id} (the Trace as JSON) on
// loopback until its stdin closes. It skips unless started by them.
func TestTimingSimProcess(t *testing.T) {
	v := os.Getenv(benchChildEnv)
	if v == "" {
		t.Skip("engine process of BenchmarkTimingSplit*; runs only when started by it")
	}
	streams, err := strconv.Atoi(v)
	if err != nil {
		t.Fatal(err)
	}
	e, err := vllmsim.New(benchConfig(streams), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	mux := http.NewServeMux()
	mux.Handle("/", e.Handler())
	mux.HandleFunc("GET /debug/trace/{id}", func(w http.ResponseWriter, r *http.Request) {
		tr, ok := e.Trace(r.PathValue("id"))
		if !ok {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(tr)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	fmt.Printf("SIM LISTENING %s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
}

func benchTimingError(b *testing.B, streams, perStream int, sim benchSim) {
	if got := benchConfig(streams).DecodeStep(streams, 0); got != benchStep {
		b.Fatalf("decode step at batch %d is %v, want %v", streams, got, benchStep)
	}
	p := prober.New(nil, prober.SystemClock{})
	p.SetUserStamps(benchUserStamps) // kstamp_bench_test.go
	prep := accPrepare(b, p, sim.target, accScenario(256, 128))
	taps := make([]*benchTap, streams)
	targets := make([]prober.Target, streams)
	for i := range taps {
		taps[i] = &benchTap{base: sim.tr}
		targets[i] = sim.target
		targets[i].Client = &http.Client{Transport: taps[i]}
	}
	var (
		st                 benchStats
		cpuSelf, cpuEngine time.Duration // during the probing part of recorded rounds
		cpuOK              = true
	)
	cpuNow := func() (self, engine time.Duration) {
		self, ok := benchProcCPU(os.Getpid())
		cpuOK = cpuOK && ok
		if sim.pid != 0 {
			engine, ok = benchProcCPU(sim.pid)
			cpuOK = cpuOK && ok
		}
		return self, engine
	}
	round := func(record bool) {
		probes := make([][]benchProbe, streams)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range streams {
			wg.Go(func() {
				<-start
				for range perStream {
					res := p.Run(context.Background(), targets[i], prep)
					probes[i] = append(probes[i], benchProbe{res: res, arrivals: taps[i].last()})
				}
			})
		}
		self0, engine0 := cpuNow()
		close(start)
		wg.Wait()
		if record {
			self1, engine1 := cpuNow()
			cpuSelf += self1 - self0
			cpuEngine += engine1 - engine0
		}
		var pairs []benchPair
		for _, ps := range probes {
			for _, pr := range ps {
				res := &pr.res
				if res.Kind != prober.KindSuccess {
					b.Fatalf("probe: %s/%s: %v", res.Kind, res.Reason, res.Err)
				}
				if !record {
					continue
				}
				tr, ok := sim.trace(res.ResponseID)
				if !ok {
					b.Fatalf("no trace for %s", res.ResponseID)
				}
				pairs = st.add(res, tr, pr.arrivals, pairs)
				if res.Stamps == prober.StampKernel {
					st.kernel++
				}
			}
		}
		st.bursts(pairs)
	}
	round(false) // dial the connections, warm the pools
	for b.Loop() {
		round(true)
	}
	if st.probes == 0 {
		return
	}
	b.ReportMetric(benchMean(st.ttft), "ttft_err_mean_us")
	b.ReportMetric(benchQuantile(st.ttft, 0.99), "ttft_err_p99_us")
	b.ReportMetric(benchMean(st.gap), "itl_err_mean_us")
	b.ReportMetric(benchMean(st.itl), "itl_probe_err_mean_us")
	b.ReportMetric(benchMean(st.lag), "lag_mean_us")
	b.ReportMetric(benchQuantile(st.lag, 0.99), "lag_p99_us")
	b.ReportMetric(benchMean(st.inBurst), "lag_in_burst_mean_us")
	b.ReportMetric(benchMean(st.afterBurst), "lag_after_burst_mean_us")
	b.ReportMetric(benchMean(st.burst), "burst_mean_us")
	b.ReportMetric(float64(st.kernel)/float64(st.probes), "kernel_share")
	b.ReportMetric(benchQuantile(st.ttftSigned, 0.5), "ttft_err_signed_p50_us")
	if cpuOK && st.chunks > 0 {
		// CPU time (user + system, 10 ms ticks) per output chunk while the
		// probes ran, per-request work included.
		perChunk := func(d time.Duration) float64 { return benchUS(d) / float64(st.chunks) }
		if sim.pid == 0 {
			b.ReportMetric(perChunk(cpuSelf), "cpu_per_chunk_us")
		} else {
			b.ReportMetric(perChunk(cpuSelf), "client_cpu_per_chunk_us")
			b.ReportMetric(perChunk(cpuEngine), "engine_cpu_per_chunk_us")
		}
	}
	if st.mismatched > 0 {
		b.Logf("%d of %d probes: chunk count differs from the engine's; left out of the per-chunk figures", st.mismatched, st.probes)
	}
}

// benchStats accumulates errors in µs.
type benchStats struct {
	probes, mismatched  int
	kernel              int       // probes whose stamps came from the kernel
	ttftSigned          []float64 // first token's arrival − its write
	chunks              int       // output chunks written by the engine
	ttft, itl, gap      []float64 // absolute errors
	lag                 []float64 // signed
	inBurst, afterBurst []float64 // lag split at the end of its step's write burst
	burst               []float64 // write bursts' durations
}

// benchPair is one output chunk: written by the engine's handler, stamped by
// the client.
type benchPair struct{ at, arrived time.Time }

// bursts splits the lag of a round's chunks at the end of the write burst
// they belong to: the engine ends a decode step, its 64 handlers write one
// chunk each, one after another on the machine's cores; writes less than
// 1 ms apart are one burst (steps are 5 ms apart).
func (s *benchStats) bursts(pairs []benchPair) {
	slices.SortFunc(pairs, func(a, b benchPair) int { return a.at.Compare(b.at) })
	for i := 0; i < len(pairs); {
		j := i + 1
		for j < len(pairs) && pairs[j].at.Sub(pairs[j-1].at) < time.Millisecond {
			j++
		}
		end := pairs[j-1].at
		if j-i > 1 {
			s.burst = append(s.burst, benchUS(end.Sub(pairs[i].at)))
		}
		for _, p := range pairs[i:j] {
			in := end.Sub(p.at)
			if p.arrived.Before(end) {
				in = p.arrived.Sub(p.at)
			}
			s.inBurst = append(s.inBurst, benchUS(max(in, 0)))
			s.afterBurst = append(s.afterBurst, benchUS(max(p.arrived.Sub(end), 0)))
		}
		i = j
	}
}

// benchProcCPU reads a process's user + system CPU time from
// /proc/PID/stat (Linux; USER_HZ = 100). ok is false elsewhere.
func benchProcCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, true
}

func benchUS(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func (s *benchStats) add(res *prober.Result, tr vllmsim.Trace, arrivals []time.Time, pairs []benchPair) []benchPair {
	s.probes++
	s.chunks += len(tr.Chunks)
	s.ttft = append(s.ttft, benchUS(absDur(res.FirstToken.Sub(tr.FirstTokenWritten))))
	s.ttftSigned = append(s.ttftSigned, benchUS(res.FirstToken.Sub(tr.FirstTokenWritten)))
	if n := tr.CompletionTokens - tr.Chunks[0].Tokens; n > 0 {
		truth := tr.LastTokenWritten.Sub(tr.FirstTokenWritten) / time.Duration(n)
		s.itl = append(s.itl, benchUS(absDur(res.ITL()-truth)))
	}
	if len(arrivals) != len(tr.Chunks) {
		s.mismatched++
		return pairs
	}
	for i, c := range tr.Chunks {
		pairs = append(pairs, benchPair{at: c.At, arrived: arrivals[i]})
		s.lag = append(s.lag, benchUS(arrivals[i].Sub(c.At)))
		if i > 0 {
			gap := arrivals[i].Sub(arrivals[i-1]) - c.At.Sub(tr.Chunks[i-1].At)
			s.gap = append(s.gap, benchUS(absDur(gap))/float64(c.Tokens))
		}
	}
	return pairs
}

func benchMean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var sum float64
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

func benchQuantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[max(int(math.Ceil(q*float64(len(s))))-1, 0)] // nearest rank
}

// benchTap is one probe's transport: it stamps the arrival of every output
// chunk of the generation response, right after the read that completed it
// (the prober's own stamp follows within a microsecond; the prober only keeps
// the first and the last).
type benchTap struct {
	base http.RoundTripper
	mu   sync.Mutex
	body *benchTapBody
}

func (t *benchTap) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || !isGeneration(req) {
		return resp, err
	}
	body := &benchTapBody{ReadCloser: resp.Body, arrivals: make([]time.Time, 0, 256)}
	t.mu.Lock()
	t.body = body
	t.mu.Unlock()
	resp.Body = body
	return resp, nil
}

// last returns the arrivals of the last generation response.
func (t *benchTap) last() []time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.body == nil {
		return nil
	}
	return t.body.arrivals
}

type benchTapBody struct {
	io.ReadCloser
	pending  []byte
	arrivals []time.Time
}

var sseEventEnd = []byte("\n\n")

func (b *benchTapBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n == 0 {
		return n, err
	}
	now := time.Now()
	b.pending = append(b.pending, p[:n]...)
	off := 0
	for {
		i := bytes.Index(b.pending[off:], sseEventEnd)
		if i < 0 {
			break
		}
		if isOutputEvent(b.pending[off : off+i]) {
			b.arrivals = append(b.arrivals, now)
		}
		off += i + len(sseEventEnd)
	}
	b.pending = append(b.pending[:0], b.pending[off:]...)
	return n, err
}

// isOutputEvent reports whether a vllmsim SSE event carries output tokens:
// a data chunk that is neither the role chunk, the usage chunk, an error nor
// [DONE].
func isOutputEvent(ev []byte) bool {
	return bytes.HasPrefix(ev, []byte("data: {")) &&
		!bytes.HasPrefix(ev, []byte(`data: {"error"`)) &&
		!bytes.Contains(ev, []byte(`"choices":[]`)) &&
		!bytes.Contains(ev, []byte(`"role":"assistant"`))
}

package tracing_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/slaprobe/slaprobe/collector"
	"github.com/slaprobe/slaprobe/internal/tracing"
	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/prober"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// holdProxy forwards every request to target after holding it for hold,
// and keeps how long each hold really lasted (a sleep overshoots by the
// machine's timer slack): that measured hold is the truth the split is
// judged against.
type holdProxy struct {
	hold  time.Duration
	mu    sync.Mutex
	holds []time.Duration
	rp    *httputil.ReverseProxy
}

func newHoldProxy(t *testing.T, target string, hold time.Duration) (*holdProxy, string) {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &holdProxy{hold: hold, rp: httputil.NewSingleHostReverseProxy(u)}
	p.rp.FlushInterval = -1 // pass every chunk on at once, as a streaming gateway does
	// A transport of its own: http.DefaultTransport is the prober's too, and
	// an httptest server's Close closes its idle connections.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	p.rp.Transport = tr
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv.URL
}

func (p *holdProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The whole request is read first, as a buffering gateway does, so the
	// upstream request never waits on the client's connection.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if strings.HasPrefix(r.URL.Path, "/v1/chat/") {
		start := time.Now()
		time.Sleep(p.hold)
		p.mu.Lock()
		p.holds = append(p.holds, time.Since(start))
		p.mu.Unlock()
	}
	p.rp.ServeHTTP(w, r)
}

// resetHolds forgets the holds measured so far.
func (p *holdProxy) resetHolds() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holds = nil
}

func (p *holdProxy) medianHold() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return median(p.holds)
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// rig is a simulated engine, a prober whose probe spans register with a
// joiner, and the joiner's receiver: what `slaprobe run` wires, without
// the scheduler.
type rig struct {
	eng     *vllmsim.Engine
	url     string
	prober  *prober.Prober
	joiner  *tracing.Joiner
	metrics *collector.ProbeMetrics
	reg     *prometheus.Registry
}

// newRig starts the engine; inBand turns on its per-request metrics,
// otherwise it sends its llm_request spans to the rig's OTLP/gRPC receiver.
func newRig(t *testing.T, inBand bool, seqs int) *rig {
	t.Helper()
	j := tracing.NewJoiner(10 * time.Second)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	recv := tracing.NewReceiver(j, nil, nil)
	go recv.ServeGRPC(ln)
	t.Cleanup(recv.Close)

	cfg := vllmsim.DefaultConfig()
	cfg.MaxNumSeqs = seqs
	if inBand {
		cfg.EnablePerRequestMetrics = true
	} else {
		cfg.OTLPTracesEndpoint = "http://" + ln.Addr().String()
	}
	eng, err := vllmsim.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(eng.Handler())
	t.Cleanup(func() { srv.Close(); eng.Close() })

	tp, err := tracing.NewTracerProvider(tracing.ExportOptions{}, j)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	p := prober.New(nil, nil)
	p.SetTracerProvider(tp)
	reg := prometheus.NewRegistry()
	return &rig{eng: eng, url: srv.URL, prober: p, joiner: j, metrics: collector.NewProbeMetrics(reg), reg: reg}
}

var splitScenario = prober.Scenario{
	Name: "split", InputTokens: 1024, OutputTokens: 16,
	Interval: time.Minute, Timeout: 30 * time.Second,
}

// probeN runs n probes through url and returns them with their engine
// timing settled as the daemon settles it: from the response, or from the
// engine's span through the joiner.
func (r *rig) probeN(t *testing.T, url string, n int) []prober.Result {
	t.Helper()
	target := prober.Target{Name: "sim", API: prober.APIChat, BaseURL: url, Model: r.eng.Config().ModelName}
	var (
		mu  sync.Mutex
		out []prober.Result
		wg  sync.WaitGroup
	)
	for range n {
		res := r.prober.Probe(context.Background(), target, "", splitScenario)
		if res.Kind != prober.KindSuccess {
			t.Fatalf("probe through %s: %s %s: %v", url, res.Kind, res.Reason, res.Err)
		}
		r.metrics.ObserveClient(&res)
		if res.Engine.Source == prober.TimingResponse {
			r.metrics.ObserveEngine(&res)
			out = append(out, res)
			continue
		}
		wg.Add(1)
		if !r.joiner.Join(res, func(j prober.Result) {
			defer wg.Done()
			r.metrics.ObserveEngine(&j)
			mu.Lock()
			out = append(out, j)
			mu.Unlock()
		}) {
			t.Fatalf("probe %s: the joiner does not know its trace id", res.TraceID)
		}
	}
	wg.Wait()
	return out
}

type splitMedians struct{ outside, queue, prefill time.Duration }

func medians(t *testing.T, rs []prober.Result, want prober.TimingSource) splitMedians {
	t.Helper()
	var o, q, p []time.Duration
	for _, r := range rs {
		if r.Engine.Source != want {
			t.Fatalf("probe %s: engine timing from %q, want %q", r.TraceID, r.Engine.Source, want)
		}
		sp, ok := r.Split()
		if !ok {
			t.Fatalf("probe %s: no split: %+v", r.TraceID, r.Engine)
		}
		o, q, p = append(o, sp.Outside), append(q, sp.Queue), append(p, sp.Prefill)
	}
	return splitMedians{median(o), median(q), median(p)}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// TestProxyHoldShowsOutsideTheEngine is the split's proof against a truth
// slaprobe did not measure: a reverse proxy that holds every request for
// 100 ms adds its measured hold (±proxyHoldTol) to the time outside the engine, and
// leaves queue and prefill as they were; load beyond the engine's batch
// shows up in the queue, not outside. Both through vLLM's per-request
// metrics on the response and through the engine's spans alone.
//
// The hold is 100 ms and its tolerance 6 ms: the proxy's own forwarding
// (a second connection, the body read, the reverse proxy's copy) is
// outside the engine too but not in the measured hold, and took up to
// 3.3 ms on top of it beside two busy loops on two cores, so ±3 ms on a
// 40 ms hold failed by chance; a 10 % error of the hold (10 ms) is beyond 6.
func TestProxyHoldShowsOutsideTheEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs about 100 probes on a simulated engine")
	}
	testproc.QuietLight(t) // ±6 ms on a 100 ms hold
	const n = 15
	for _, c := range []struct {
		name   string
		inBand bool
		source prober.TimingSource
	}{
		{"response", true, prober.TimingResponse},
		{"trace", false, prober.TimingTrace},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, c.inBand, 2)
			proxy, proxyURL := newHoldProxy(t, r.url, proxyHold)
			t.Logf("engine %s, proxy %s", r.url, proxyURL)
			r.probeN(t, r.url, 2) // calibrated and warm

			// Up to three tries (TimingAttempts): the shared machine can
			// upset one set of 2×15 probes without anything being wrong.
			var direct splitMedians
			testproc.TimingAttempts(t, func(errorf func(string, ...any)) {
				proxy.resetHolds()
				direct = medians(t, r.probeN(t, r.url, n), c.source)
				held := medians(t, r.probeN(t, proxyURL, n), c.source)
				hold := proxy.medianHold()
				t.Logf("direct:    outside %6.2f ms, queue %6.3f ms, prefill %7.2f ms", ms(direct.outside), ms(direct.queue), ms(direct.prefill))
				t.Logf("via proxy: outside %6.2f ms, queue %6.3f ms, prefill %7.2f ms (proxy held %.2f ms)", ms(held.outside), ms(held.queue), ms(held.prefill), ms(hold))
				if d := held.outside - direct.outside - hold; d < -proxyHoldTol || d > proxyHoldTol {
					errorf("outside the engine grew by %.2f ms through a proxy that held %.2f ms; want the hold ±%.0f ms",
						ms(held.outside-direct.outside), ms(hold), ms(proxyHoldTol))
				}
				if d := held.queue - direct.queue; d < -3*time.Millisecond || d > 3*time.Millisecond {
					errorf("queue moved by %.2f ms through the proxy; want unchanged (±3 ms)", ms(d))
				}
				if d := held.prefill - direct.prefill; d < -3*time.Millisecond || d > 3*time.Millisecond {
					errorf("prefill moved by %.2f ms through the proxy; want unchanged (±3 ms)", ms(d))
				}
			})

			// Load: two long answers fill both of the engine's slots (max_num_seqs 2),
			// so every probe waits in the queue for one of them to end.
			ctx, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					long := prober.Scenario{Name: "load", InputTokens: 1024, OutputTokens: 64, Interval: time.Minute, Timeout: time.Minute}
					tg := prober.Target{Name: "load", API: prober.APIChat, BaseURL: r.url, Model: r.eng.Config().ModelName}
					for ctx.Err() == nil {
						r.prober.Probe(ctx, tg, "", long)
					}
				}()
			}
			time.Sleep(200 * time.Millisecond)
			loaded := medians(t, r.probeN(t, r.url, n/3), c.source)
			stop()
			wg.Wait()
			t.Logf("loaded:    outside %6.2f ms, queue %6.3f ms, prefill %7.2f ms", ms(loaded.outside), ms(loaded.queue), ms(loaded.prefill))
			if loaded.queue-direct.queue < 50*time.Millisecond {
				t.Errorf("queue grew by %.2f ms with both engine slots busy; want at least 50 ms", ms(loaded.queue-direct.queue))
			}
			// The wait for a slot is the queue's: outside may move by the
			// 3 ms of the unloaded checks plus 5 % of what the queue grew.
			// Two long answers beside the probe cost its client some CPU on
			// a loaded machine (7.8 ms with a queue 412 ms longer, at a load
			// average of 14); giving a tenth of the queue's growth to outside
			// still fails.
			if d, tol := loaded.outside-direct.outside, 3*time.Millisecond+(loaded.queue-direct.queue)/20; d < -tol || d > tol {
				t.Errorf("outside the engine moved by %.2f ms under engine load, the queue by %.2f ms; want outside unchanged (±%.2f ms)",
					ms(d), ms(loaded.queue-direct.queue), ms(tol))
			}

			// The histograms hold the same split.
			if got := histCount(t, r.reg, "slaprobe_ttft_outside_engine_seconds"); got < 2*n {
				t.Errorf("slaprobe_ttft_outside_engine_seconds has %d observations, want at least %d", got, 2*n)
			}
			if got := counterValue(t, r.reg, "slaprobe_probe_engine_timing_total", "source", string(c.source)); got < 2*n {
				t.Errorf(`slaprobe_probe_engine_timing_total{source=%q} = %v, want at least %d`, c.source, got, 2*n)
			}
		})
	}
}

const (
	proxyHold    = 100 * time.Millisecond
	proxyHoldTol = 6 * time.Millisecond
)

func histCount(t *testing.T, g prometheus.Gatherer, name string) int {
	t.Helper()
	n := 0
	for _, mf := range gather(t, g, name) {
		n += int(mf.GetHistogram().GetSampleCount())
	}
	return n
}

func counterValue(t *testing.T, g prometheus.Gatherer, name, label, value string) int {
	t.Helper()
	n := 0.0
	for _, m := range gather(t, g, name) {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return int(n)
}

func gather(t *testing.T, g prometheus.Gatherer, name string) []*dto.Metric {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

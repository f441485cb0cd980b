package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// truthRelay stands between the simulated engine and slaprobe's OTLP/HTTP
// receiver: it keeps the queue and prefill of every llm_request span the
// engine really sent (the truth), then passes the export on.
type truthRelay struct {
	mu      sync.Mutex
	queue   map[string]float64 // by trace id: seconds
	prefill map[string]float64
	forward string
}

func (r *truthRelay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var ex coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &ex); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range ex.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				// Calibration requests carry no traceparent: root spans, no probe's.
				if s.GetName() != vllmsim.SpanLLMRequest || len(s.GetParentSpanId()) == 0 {
					continue
				}
				id := hex.EncodeToString(s.GetTraceId())
				for _, kv := range s.GetAttributes() {
					switch kv.GetKey() {
					case vllmsim.AttrLatencyTimeInQueue:
						r.queue[id] = kv.GetValue().GetDoubleValue()
					case vllmsim.AttrLatencyPrefill:
						r.prefill[id] = kv.GetValue().GetDoubleValue()
					}
				}
			}
		}
	}
	r.mu.Unlock()
	resp, err := http.Post(r.forward, "application/x-protobuf", bytes.NewReader(b))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// sums is the truth so far: how many probe spans the engine sent, and the
// sums of their queue and prefill.
func (r *truthRelay) sums() (n int, queue, prefill float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, q := range r.queue {
		n++
		queue += q
		prefill += r.prefill[id]
	}
	return n, queue, prefill
}

// forgery is an OTLP export of spans in trace id that claim 10 s of queue:
// an llm_request with no parent, one with a random parent, and a forged
// gateway span (random parent) with an llm_request under it. The attacker
// knows the trace id, not the probe's span id.
func forgery(t *testing.T, traceID string) []byte {
	t.Helper()
	tid, err := hex.DecodeString(traceID)
	if err != nil || len(tid) != 16 {
		t.Fatalf("trace id %q", traceID)
	}
	rnd := func() []byte {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		return b
	}
	dbl := func(k string, v float64) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v}}}
	}
	attrs := []*commonpb.KeyValue{dbl(vllmsim.AttrLatencyTimeInQueue, 10), dbl(vllmsim.AttrLatencyPrefill, 0.001)}
	gw := rnd()
	spans := []*tracepb.Span{
		{TraceId: tid, SpanId: rnd(), Name: vllmsim.SpanLLMRequest, Attributes: attrs},
		{TraceId: tid, SpanId: rnd(), ParentSpanId: rnd(), Name: vllmsim.SpanLLMRequest, Attributes: attrs},
		{TraceId: tid, SpanId: gw, ParentSpanId: rnd(), Name: "envoy.proxy"},
		{TraceId: tid, SpanId: rnd(), ParentSpanId: gw, Name: vllmsim.SpanLLMRequest, Attributes: attrs},
	}
	for _, s := range spans {
		s.Kind, s.StartTimeUnixNano, s.EndTimeUnixNano = tracepb.Span_SPAN_KIND_SERVER, uint64(time.Now().UnixNano()), uint64(time.Now().UnixNano())
	}
	b, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: spans}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	traceIDRE = regexp.MustCompile(`trace_id="([0-9a-f]{32})"|data-trace-id="([0-9a-f]{32})"`)
	sampleRE  = regexp.MustCompile(`(?m)^([a-z_]+)(\{[^}]*\})? ([0-9.e+-]+|NaN)`)
)

// metricSum sums every sample of name in an exposition, whatever its labels
// (those that match the optional label filter).
func metricSum(body, name, filter string) float64 {
	v := 0.0
	for _, m := range sampleRE.FindAllStringSubmatch(body, -1) {
		if m[1] != name || (filter != "" && !strings.Contains(m[2], filter)) {
			continue
		}
		f, err := strconv.ParseFloat(m[3], 64)
		if err == nil {
			v += f
		}
	}
	return v
}

// TestForgedEngineSpans is the attacker model of the trace join: a client
// that polls /metrics (with the trace_id exemplars) and /probes every
// 100 ms and posts, for every trace id it sees, spans claiming 10 s of
// queue to the OTLP receiver, while the simulated engine sends its real
// spans there through a relay that keeps the truth. Over at least 20
// probes joined from the engine's trace: every queue and prefill slaprobe
// recorded is the engine's (their sums match the truth exactly, none is in
// a bucket above 1 s), and the input of SlaprobeTTFTOutsideEngine,
// target_scenario:slaprobe_ttft_outside_engine:ratio_15m (outside / (outside
// + queue + prefill)), is the true ratio. Every forged span is counted,
// rejected.
func TestForgedEngineSpans(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs slaprobe for about a minute")
	}
	t.Parallel() // mostly waits on its own slaprobe: beside the package's other waiting tests
	bin := binary(t)
	otlpAddr, webAddr := testproc.FreeAddr(t), testproc.FreeAddr(t)
	relay := &truthRelay{queue: map[string]float64{}, prefill: map[string]float64{}, forward: "http://" + otlpAddr + "/v1/traces"}
	relaySrv := httptest.NewServer(relay)
	t.Cleanup(relaySrv.Close)

	cfg := vllmsim.DefaultConfig()
	cfg.TimeScale = 0.2
	cfg.OTLPTracesEndpoint = relaySrv.URL + "/v1/traces"
	cfg.OTLPTracesProtocol = "http/protobuf"
	eng, err := vllmsim.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	engSrv := httptest.NewServer(eng.Handler())
	t.Cleanup(func() { engSrv.Close(); eng.Close() })

	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "slaprobe.yml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(`
global: {jitter: 0}
targets:
  - {name: sim, url: %q, scenarios: [tiny, small]}
scenarios:
  - {name: tiny, input_tokens: 200, output_tokens: 8, interval: 1s, timeout: 10s}
  - {name: small, input_tokens: 400, output_tokens: 8, interval: 1s, timeout: 10s}
tracing:
  otlp_http_listen_address: %q
  join_timeout: 10s
`, engSrv.URL, otlpAddr)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	logs, exited := startProcess(t, exec.CommandContext(ctx, bin, "run", "--config.file="+cfgPath, "--web.listen-address="+webAddr))

	base := "http://" + webAddr
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(path string, openMetrics bool) (string, error) {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if openMetrics {
			req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}

	// The attacker.
	var (
		amu    sync.Mutex
		seen   = map[string]bool{}
		posted int
	)
	attackCtx, stopAttack := context.WithCancel(ctx)
	attackDone := make(chan struct{})
	go func() {
		defer close(attackDone)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for attackCtx.Err() == nil {
			var ids []string
			for _, page := range []struct {
				path string
				om   bool
			}{{"/metrics", true}, {"/probes?target=sim", false}} {
				body, err := get(page.path, page.om)
				if err != nil {
					continue
				}
				for _, m := range traceIDRE.FindAllStringSubmatch(body, -1) {
					ids = append(ids, m[1]+m[2])
				}
			}
			for _, id := range ids {
				amu.Lock()
				fresh := !seen[id]
				seen[id] = true
				amu.Unlock()
				if !fresh {
					continue
				}
				resp, err := http.Post("http://"+otlpAddr+"/v1/traces", "application/x-protobuf", bytes.NewReader(forgery(t, id)))
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						amu.Lock()
						posted++
						amu.Unlock()
					}
				}
			}
			select {
			case <-attackCtx.Done():
			case <-tick.C:
			}
		}
	}()

	// Wait for at least 20 probes joined from the engine's trace, and a
	// moment where every probe span the engine sent is recorded (none in
	// flight between the engine and slaprobe), then judge.
	const want = 20
	var body string
	for {
		select {
		case err := <-exited:
			t.Fatalf("slaprobe exited: %v\n%s", err, logs.String())
		default:
		}
		if ctx.Err() != nil {
			t.Fatalf("no stable point with %d probes joined in time; last /metrics:\n%s\nlogs:\n%s",
				want, grepLines(body, "engine_"), logs.String())
		}
		n0, _, _ := relay.sums()
		b, err := get("/metrics", false)
		n1, q1, p1 := relay.sums()
		body = b
		joined := metricSum(body, "slaprobe_probe_engine_timing_total", `source="trace"`)
		// Every recorded TTFT joined too: a probe whose span is on its way
		// has its TTFT recorded only once the join settles, but one scrape
		// can fall between the two series' updates.
		if err != nil || joined < want || n0 != n1 || float64(n1) != joined ||
			metricSum(body, "slaprobe_engine_queue_seconds_count", "") != joined ||
			metricSum(body, "slaprobe_ttft_seconds_count", "") != joined {
			time.Sleep(300 * time.Millisecond)
			continue
		}
		stopAttack()
		<-attackDone
		amu.Lock()
		nPosted, nSeen := posted, len(seen)
		amu.Unlock()

		queue, prefill := metricSum(body, "slaprobe_engine_queue_seconds_sum", ""), metricSum(body, "slaprobe_engine_prefill_seconds_sum", "")
		outside, ttft := metricSum(body, "slaprobe_ttft_outside_engine_seconds_sum", ""), metricSum(body, "slaprobe_ttft_seconds_sum", "")
		t.Logf("%v probes joined from the engine's trace; the attacker saw %d trace ids and posted %d forged exports (4 spans each)", joined, nSeen, nPosted)
		t.Logf("queue sum %.6f s (truth %.6f s), prefill sum %.6f s (truth %.6f s)", queue, q1, prefill, p1)
		for _, r := range []string{"joined", "rejected", "late", "other", "ignored", "implausible"} {
			t.Logf("slaprobe_engine_spans_received_total{result=%q} = %v", r, metricSum(body, "slaprobe_engine_spans_received_total", `result="`+r+`"`))
		}
		if nSeen < want {
			t.Errorf("the attacker saw %d trace ids, want at least %d: the attack did not happen", nSeen, want)
		}
		if d := queue - q1; d < -1e-6 || d > 1e-6 {
			t.Errorf("slaprobe_engine_queue_seconds_sum = %.6f, the engine's queue summed %.6f: a forged span moved a probe's split", queue, q1)
		}
		if d := prefill - p1; d < -1e-6 || d > 1e-6 {
			t.Errorf("slaprobe_engine_prefill_seconds_sum = %.6f, the engine's prefill summed %.6f", prefill, p1)
		}
		if le1 := metricSum(body, "slaprobe_engine_queue_seconds_bucket", `le="1.0"`) + metricSum(body, "slaprobe_engine_queue_seconds_bucket", `le="1"`); le1 != joined {
			t.Errorf("%v of %v queue observations at most 1 s: a 10 s queue got in", le1, joined)
		}
		// The recording rule's ratio over the run: rate(outside_sum) /
		// (rate(outside_sum) + rate(queue_sum) + rate(prefill_sum)) over a
		// window holding the whole run is the ratio of the sums; the true
		// one takes the engine's queue and prefill. Every recorded TTFT
		// joined (counts equal), so the TTFT sum is that of the split probes.
		if c := metricSum(body, "slaprobe_ttft_seconds_count", ""); c != joined {
			t.Fatalf("%v TTFTs recorded, %v joined: not every recorded probe was split", c, joined)
		}
		got := outside / (outside + queue + prefill)
		truth := (ttft - q1 - p1) / ttft
		t.Logf("target_scenario:slaprobe_ttft_outside_engine:ratio_15m over the run = %.6f, true value %.6f", got, truth)
		if d := got - truth; d < -1e-6 || d > 1e-6 {
			t.Errorf("the alert's ratio is %.6f, its true value %.6f", got, truth)
		}
		// The stable point's page can predate the attacker's last posts:
		// count the rejections on a page read after it stopped.
		after, err := get("/metrics", false)
		if err != nil {
			t.Fatal(err)
		}
		if r := metricSum(after, "slaprobe_engine_spans_received_total", `result="rejected"`); r < 3*want {
			t.Errorf("%v forged llm_request spans counted rejected, want at least %d (3 per trace id)", r, 3*want)
		}
		if n := metricSum(body, "slaprobe_engine_spans_received_total", `result="joined"`); n != joined {
			t.Errorf("%v spans counted joined, %v probes joined", n, joined)
		}
		return
	}
}

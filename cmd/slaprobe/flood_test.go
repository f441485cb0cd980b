package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/encoding/gzip" // the gzip bombs sent over gRPC
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// The flood: `slaprobe run` probing a simulated engine (its four default
// scenarios every 2 s; the engine sends its llm_request spans to slaprobe's
// OTLP/gRPC receiver) with both OTLP receivers on loopback, quiet for 30 s,
// then flooded by 48 HTTP and 16 gRPC connections at once, each sending one
// kind of export: valid ones just under the size limit (JSON and protobuf;
// one JSON kind is a single span whose name is almost the whole body, the
// decoder's worst case), garbage, oversized ones and gzip bombs (64 MiB of
// zeros in 64 KiB over HTTP, 16 MiB over gRPC). Every 250 ms the test
// scrapes /metrics (timing it) and reads slaprobe's RSS from /proc.
//
// The flooding clients run in a process of their own (this test binary
// again, TestFloodClients) at the lowest CPU priority (nice 19): a flood
// comes from elsewhere on the network, and clients sharing the test's
// process would take the simulated engine's CPU and slow its answers,
// which no limit in slaprobe can prevent. What the test measures is what
// the flood costs slaprobe itself.
//
// What it checks (floodBounds): peak RSS within the memory ceiling; the
// probes' rate during the flood against the quiet phase's (probeShare: a
// probe loop sleeps its interval after each probe ends, so probes slowed
// by the flood come round less often, and a missed probe is one that never
// started); the median shift of the probes' TTFT, each against the quiet
// median of its scenario; and the /metrics p99. The probes' times and TTFTs
// come from slaprobe's debug log: exact, not histogram buckets.
//
//	SLAPROBE_FLOOD=1 nice -n 10 go test ./cmd/slaprobe -run 'TestFlood$' -timeout 10m -v
//
// SLAPROBE_FLOOD_DURATION (default 1m) sets the flood's length;
// SLAPROBE_FLOOD_BINARY runs another slaprobe binary (an older build, for a
// before/after); SLAPROBE_FLOOD_SHAPE=issue34 floods as issue 34 measured
// it: 48 HTTP clients posting valid 11 MB OTLP/JSON exports, nothing else.
// TestFloodShort is a 10-second version that runs with the other tests.
//
// Memory ceiling (internal/tracing/limits.go): the receivers' exports in
// progress hold at most 68 MiB; with Go's heap growth and grpc-go's buffer
// pool, peak RSS stays within 3 × that of the RSS before the flood. The
// tests fail when it does not.
const floodCeilingMiB = 204

// exportLimit is the receiver's limit on one export (maxExportBytes).
const exportLimit = 4 << 20

type floodPlan struct {
	quiet, flood time.Duration
	httpClients  int
	grpcClients  int
	issue34      bool // only valid 11 MB JSON exports over HTTP
	maxRSSMiB    float64
}

// floodBounds are what a flood may cost the probes and /metrics.
type floodBounds struct {
	minProbeShare float64 // of the probes expected at the quiet rate, the share that must run
	maxTTFTShift  time.Duration
	maxScrapeP99  time.Duration
}

// The bounds of TestFlood: 95 % of the probes, TTFT shifted by at most
// 5 ms at the median, /metrics p99 within 500 ms. Measured on a 2-core
// machine shared with other builds (load average 10-17): 96-98 % of the
// probes, shifts within ±1 ms, p99 130-150 ms; the build before the
// receivers' time budget, in two runs, 88 and 96 %, +17.5 and +19.3 ms,
// 523 and 282 ms (docs/reliability.md).
var fullFloodBounds = floodBounds{minProbeShare: 0.95, maxTTFTShift: 5 * time.Millisecond, maxScrapeP99: 500 * time.Millisecond}

type floodResult struct {
	rssBeforeMiB, peakRSSMiB, hwmMiB float64
	quietProbes, floodProbes         float64
	floodErrors                      float64
	expectedProbes                   float64
	probeShare                       float64   // the flood's probe rate over the quiet phase's (probeRate)
	scrapes, quietScrapes            []float64 // ms, during the flood and before
	scrapeFails                      int
	sent                             map[string]int64 // by kind and answer
	refused, spans                   map[string]float64
	quietE2EMS, floodE2EMS           float64                  // mean probe E2E
	loadBefore, loadAfter            string                   // /proc/loadavg
	quietCPU, floodCPU               float64                  // slaprobe's CPU seconds per second
	ttftQuiet                        map[string]time.Duration // median by scenario
	ttftShift                        time.Duration            // median of the flood's probes' TTFT minus their scenario's quiet median
	ttftFlood                        int                      // probes with a TTFT during the flood
	aborted                          string
}

func TestFlood(t *testing.T) {
	if os.Getenv("SLAPROBE_FLOOD") != "1" {
		t.Skip("the flood runs for over a minute: set SLAPROBE_FLOOD=1 (see docs/reliability.md)")
	}
	p := floodPlan{quiet: 30 * time.Second, flood: time.Minute, httpClients: 48, grpcClients: 16, maxRSSMiB: 3072}
	if v := os.Getenv("SLAPROBE_FLOOD_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("SLAPROBE_FLOOD_DURATION=%q: %v", v, err)
		}
		p.flood = d
	}
	if os.Getenv("SLAPROBE_FLOOD_SHAPE") == "issue34" {
		p.issue34, p.grpcClients = true, 0
	}
	r := runFlood(t, p)
	r.log(t)
	if !p.issue34 { // that shape is the "before": an export over the limit is refused at once
		r.check(t, fullFloodBounds)
	}
}

// TestFloodShort floods for 10 s with fewer clients and holds the ceiling
// and shortFloodBounds.
func TestFloodShort(t *testing.T) {
	if testing.Short() {
		t.Skip("floods slaprobe's OTLP receivers for 10 s")
	}
	// It keeps both cores busy on purpose: never beside a timing check.
	testproc.Quiet(t)
	r := runFlood(t, floodPlan{quiet: 10 * time.Second, flood: 10 * time.Second, httpClients: 16, grpcClients: 6, maxRSSMiB: 2048})
	r.log(t)
	r.check(t, shortFloodBounds)
}

// The bounds of TestFloodShort, for a loaded 2-core CI machine and the
// few samples of 10 s: the probes at 85 % of the quiet rate at least, TTFT
// shifted by at most 8 ms at the median, /metrics p99 (of 40 scrapes: the
// slowest) within 500 ms. Measured at load average 1-15 on 2 cores, -race
// or not: 95-111 % of the probes, shifts within ±1.5 ms, p99 39-173 ms;
// the build before the receivers' time budget shifted TTFT by 12-31 ms
// (p99 260-391 ms, 90-106 % of the probes), so the TTFT bound is what
// catches it here.
var shortFloodBounds = floodBounds{minProbeShare: 0.85, maxTTFTShift: 8 * time.Millisecond, maxScrapeP99: 500 * time.Millisecond}

func (r *floodResult) check(t *testing.T, b floodBounds) {
	t.Helper()
	if r.aborted != "" {
		t.Fatal(r.aborted)
	}
	if grew := r.hwmMiB - r.rssBeforeMiB; grew > floodCeilingMiB {
		t.Errorf("peak RSS %.0f MiB is %.0f MiB above the %.0f MiB before the flood; the ceiling is %d MiB",
			r.hwmMiB, grew, r.rssBeforeMiB, floodCeilingMiB)
	}
	valid := r.sent["http json 200"] + r.sent["http json long name 200"] + r.sent["http proto 200"] + r.sent["grpc proto OK"]
	if r.refused["too_many"]+r.refused["decode_budget"] == 0 || valid == 0 {
		t.Errorf("the flood did not reach the limits, or no valid export got through (refused %v, answers %v): it measured nothing", r.refused, r.sent)
	}
	if r.quietProbes == 0 {
		t.Fatal("no probe ran in the quiet phase")
	}
	if r.probeShare < b.minProbeShare {
		t.Errorf("the probes ran at %.1f %% of the quiet phase's rate during the flood (%.0f ran, %.0f expected); want at least %.0f %%",
			100*r.probeShare, r.floodProbes, r.expectedProbes, 100*b.minProbeShare)
	}
	if r.ttftFlood == 0 {
		t.Error("no probe with a TTFT during the flood")
	} else if r.ttftShift > b.maxTTFTShift {
		t.Errorf("the probes' TTFT shifted by %v at the median during the flood (quiet medians %v); the bound is %v", r.ttftShift, r.ttftQuiet, b.maxTTFTShift)
	}
	if p99 := time.Duration(quantile(r.scrapes, 0.99) * float64(time.Millisecond)); len(r.scrapes) == 0 || p99 > b.maxScrapeP99 {
		t.Errorf("/metrics p99 during the flood %v (%d scrapes, %d failed); the bound is %v", p99, len(r.scrapes), r.scrapeFails, b.maxScrapeP99)
	}
}

// quantile is the q-quantile of v (the nearest rank above).
func quantile(v []float64, q float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func (r *floodResult) log(t *testing.T) {
	t.Helper()
	quantiles := func(v []float64) string {
		if len(v) == 0 {
			return "no scrapes"
		}
		return fmt.Sprintf("%d scrapes, p50 %.1f ms, p99 %.1f ms, max %.1f ms", len(v), quantile(v, 0.5), quantile(v, 0.99), quantile(v, 1))
	}
	t.Logf("RSS: %.1f MiB before the flood, %.1f MiB sampled peak, VmHWM %.1f MiB", r.rssBeforeMiB, r.peakRSSMiB, r.hwmMiB)
	t.Logf("probes: %.0f in the quiet phase; %.0f during the flood, %.0f expected at the quiet rate (missed: %.0f); %.0f failed during the flood",
		r.quietProbes, r.floodProbes, r.expectedProbes, max(0, r.expectedProbes-r.floodProbes), r.floodErrors)
	t.Logf("probe rate during the flood, each loop's from its first probe to its last: %.1f %% of the quiet phase's", 100*r.probeShare)
	t.Logf("mean probe E2E: %.0f ms quiet, %.0f ms during the flood; load average %s before the flood, %s after",
		r.quietE2EMS, r.floodE2EMS, r.loadBefore, r.loadAfter)
	t.Logf("slaprobe's CPU: %.2f s a second quiet, %.2f s a second during the flood", r.quietCPU, r.floodCPU)
	t.Logf("TTFT: quiet medians %v; during the flood (%d probes) shifted by %v at the median", r.ttftQuiet, r.ttftFlood, r.ttftShift)
	t.Logf("/metrics before the flood: %s", quantiles(r.quietScrapes))
	t.Logf("/metrics during the flood: %s, %d failed", quantiles(r.scrapes), r.scrapeFails)
	t.Logf("exports sent, by kind and answer: %v", r.sent)
	t.Logf("slaprobe_otlp_exports_refused_total: %v", r.refused)
	t.Logf("slaprobe_engine_spans_received_total: %v", r.spans)
}

// floodBodies are the exports the flooders send.
type floodBodies struct {
	json, longName, proto, bigJSON, oversized, garbage, httpBomb, grpcBomb []byte
}

// spansExport is an export of spans of unknown traces (the receiver reads
// each and counts it as other), n of them with vLLM's attributes.
func spansExport(n int) *coltracepb.ExportTraceServiceRequest {
	dbl := func(k string, v float64) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v}}}
	}
	spans := make([]*tracepb.Span, n)
	for i := range spans {
		tid, sid := make([]byte, 16), make([]byte, 8)
		_, _ = rand.Read(tid)
		_, _ = rand.Read(sid)
		spans[i] = &tracepb.Span{TraceId: tid, SpanId: sid, ParentSpanId: sid, Name: "llm_request", Kind: tracepb.Span_SPAN_KIND_SERVER,
			StartTimeUnixNano: 1, EndTimeUnixNano: 2, Attributes: []*commonpb.KeyValue{
				{Key: "gen_ai.response.model", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "Qwen/Qwen3-0.6B"}}},
				dbl("gen_ai.latency.time_in_queue", 0.001), dbl("gen_ai.latency.time_in_model_prefill", 0.01),
				dbl("gen_ai.latency.time_in_model_decode", 0.1), dbl("gen_ai.latency.e2e", 0.2),
				{Key: "gen_ai.usage.completion_tokens", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 64}}},
			}}
	}
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{Spans: spans}}}}}
}

// under fills an export with spans up to just under limit bytes.
func under(t *testing.T, limit int, enc func(proto.Message) ([]byte, error)) []byte {
	t.Helper()
	one, err := enc(spansExport(1))
	if err != nil {
		t.Fatal(err)
	}
	n := limit * 95 / 100 / len(one)
	b, err := enc(spansExport(n))
	if err != nil {
		t.Fatal(err)
	}
	for len(b) > limit {
		n = n * 9 / 10
		if b, err = enc(spansExport(n)); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func gzipBomb(t *testing.T, size int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zero := make([]byte, 1<<20)
	for range size >> 20 {
		_, _ = zw.Write(zero)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func newFloodBodies(t *testing.T, issue34 bool) floodBodies {
	var b floodBodies
	if issue34 {
		b.bigJSON = under(t, 11<<20, protojson.Marshal)
		return b
	}
	b.json = under(t, exportLimit, protojson.Marshal)
	long := spansExport(1) // one span whose name is one JSON token of almost the limit
	long.ResourceSpans[0].ScopeSpans[0].Spans[0].Name = strings.Repeat("x", exportLimit-4096)
	var err error
	if b.longName, err = protojson.Marshal(long); err != nil {
		t.Fatal(err)
	}
	b.proto = under(t, exportLimit, proto.Marshal)
	b.oversized = under(t, exportLimit*5/4, proto.Marshal)
	for len(b.oversized) <= exportLimit {
		b.oversized = append(b.oversized, b.proto[:1024]...) // still a valid export: one more field
	}
	b.garbage = make([]byte, 1<<20)
	_, _ = rand.Read(b.garbage)
	b.httpBomb = gzipBomb(t, 64<<20)
	b.grpcBomb = make([]byte, 16<<20) // zeros: grpc-go gzips them to 16 KiB
	return b
}

// rawCodec sends a []byte as the gRPC message as it is.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error)   { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(b []byte, v any) error { *(v.(*[]byte)) = b; return nil }
func (rawCodec) Name() string                    { return "proto" }

func runFlood(t *testing.T, p floodPlan) *floodResult {
	bin := os.Getenv("SLAPROBE_FLOOD_BINARY")
	if bin == "" {
		bin = binary(t)
	}
	grpcAddr, httpAddr, webAddr := testproc.FreeAddr(t), testproc.FreeAddr(t), testproc.FreeAddr(t)

	cfg := vllmsim.DefaultConfig()
	cfg.TimeScale = 0.02
	cfg.Seed = 1
	cfg.OTLPTracesEndpoint = "http://" + grpcAddr
	eng, err := vllmsim.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)
	engLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	engAddr := engLn.Addr().String()
	engCtx, stopEng := context.WithCancel(context.Background())
	t.Cleanup(stopEng)
	go func() { _ = eng.Serve(engCtx, engLn) }()

	conf := fmt.Sprintf(`global:
  scenarios: [chatbot, rag, agentic, tool_calling]
power: {nvml: false}
scenarios:
  - {name: chatbot, interval: 2s}
  - {name: rag, interval: 2s}
  - {name: agentic, interval: 2s}
  - {name: tool_calling, interval: 2s}
tracing:
  otlp_grpc_listen_address: %s
  otlp_http_listen_address: %s
  join_timeout: 10s
targets:
  - {name: sim, url: http://%s}
`, grpcAddr, httpAddr, engAddr)
	cfgPath := filepath.Join(t.TempDir(), "flood.yml")
	if err := os.WriteFile(cfgPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	// At debug level slaprobe logs each probe's TTFT: the test reads them.
	cmd := exec.Command(bin, "run", "--config.file="+cfgPath, "--web.listen-address="+webAddr, "--log.level=debug")
	logs, exited := startProcess(t, cmd)
	metricsURL := "http://" + webAddr + "/metrics"
	waitFor(t, exited, logs, func() bool { _, err := scrapeValues(metricsURL); return err == nil })

	// The flooding clients build their exports while slaprobe starts.
	fl := startFlooders(t, p, httpAddr, grpcAddr)

	r := &floodResult{}
	var e2eSum, e2eCount float64 // the last scrape's
	counts := func() (probes, errs float64) {
		m, err := scrapeValues(metricsURL)
		if err != nil {
			t.Fatalf("scrape: %v\n%s", err, logs.String())
		}
		e2eSum, e2eCount = m["slaprobe_e2e_latency_seconds_sum"], m["slaprobe_e2e_latency_seconds_count"]
		return m["slaprobe_probes_total"], m["slaprobe_probe_errors_total"]
	}
	e2eMean := func(sum0, count0 float64) float64 {
		if e2eCount == count0 {
			return 0
		}
		return (e2eSum - sum0) / (e2eCount - count0) * 1000
	}

	// Quiet: the probe rate without a flood.
	time.Sleep(3 * time.Second) // the first probes are spread over the first interval
	q0, _ := counts()
	s0, c0 := e2eSum, e2eCount
	log0 := logs.Len()
	cpu0, at0 := procCPUSeconds(t, cmd.Process.Pid), time.Now()
	quietStart := at0
	for quietEnd := time.Now().Add(p.quiet); time.Now().Before(quietEnd); time.Sleep(250 * time.Millisecond) {
		t0 := time.Now()
		if _, err := scrapeValues(metricsURL); err == nil {
			r.quietScrapes = append(r.quietScrapes, float64(time.Since(t0).Microseconds())/1000)
		}
	}
	q1, _ := counts()
	quietLog, quietEnd := logs.Slice(log0, logs.Len()), time.Now()
	r.quietProbes = q1 - q0
	r.quietE2EMS = e2eMean(s0, c0)
	r.quietCPU = (procCPUSeconds(t, cmd.Process.Pid) - cpu0) / time.Since(at0).Seconds()
	r.loadBefore = loadAverage()
	r.rssBeforeMiB = procStatusMiB(t, cmd.Process.Pid, "VmRSS")

	fl.start()
	f0, e0 := counts()
	s0, c0 = e2eSum, e2eCount
	log0 = logs.Len()
	cpu0 = procCPUSeconds(t, cmd.Process.Pid)
	start := time.Now()
	ctx, stop := context.WithTimeout(context.Background(), p.flood)
	defer stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
sample:
	for {
		select {
		case <-ctx.Done():
			break sample
		case err := <-exited:
			fl.kill()
			t.Fatalf("slaprobe exited during the flood: %v\n%s", err, logs.String())
		case <-tick.C:
		}
		rss := procStatusMiB(t, cmd.Process.Pid, "VmRSS")
		r.peakRSSMiB = max(r.peakRSSMiB, rss)
		if p.maxRSSMiB > 0 && rss > p.maxRSSMiB {
			r.aborted = fmt.Sprintf("stopped after %v: RSS %.0f MiB passed the test's guard of %.0f MiB", time.Since(start).Round(time.Second), rss, p.maxRSSMiB)
			t.Log(r.aborted)
			break sample
		}
		t0 := time.Now()
		if _, err := scrapeValues(metricsURL); err != nil {
			r.scrapeFails++
			continue
		}
		r.scrapes = append(r.scrapes, float64(time.Since(t0).Microseconds())/1000)
	}
	elapsed := time.Since(start)
	r.floodCPU = (procCPUSeconds(t, cmd.Process.Pid) - cpu0) / elapsed.Seconds()
	r.hwmMiB = procStatusMiB(t, cmd.Process.Pid, "VmHWM")
	f1, e1 := counts()
	floodLog := logs.Slice(log0, logs.Len())
	r.floodProbes, r.floodErrors = f1-f0, e1-e0
	r.floodE2EMS, r.loadAfter = e2eMean(s0, c0), loadAverage()
	r.expectedProbes = r.quietProbes * elapsed.Seconds() / p.quiet.Seconds()
	quietLines, floodLines := probeLines(quietLog), probeLines(floodLog)
	r.ttftQuiet, r.ttftShift, r.ttftFlood = ttftShift(quietLines, floodLines)
	r.probeShare = probeShare(quietLines, floodLines, quietStart, quietEnd, start, start.Add(elapsed))
	if r.aborted != "" {
		fl.kill()
		_ = cmd.Process.Kill()
		return r
	}
	r.sent = fl.wait()
	m, err := scrapeAll(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	r.refused, r.spans = labelled(m, "slaprobe_otlp_exports_refused_total", "reason"), labelled(m, "slaprobe_engine_spans_received_total", "result")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Error("no exit within 30 s of SIGTERM")
	}
	return r
}

// probeRE reads a probe's time, kind of line, scenario and TTFT from
// slaprobe's debug log (prober/scheduler.go, logResult).
var probeRE = regexp.MustCompile(`^time=(\S+) .*msg="([^"]*)".* scenario=(\S+) .*\bttft=(\S+)`)

// probeLine is one probe the log reports.
type probeLine struct {
	at   time.Time
	ttft time.Duration
}

// probeLines are the probes a stretch of the log reports, by scenario and
// kind of line (a warm follow-up's TTFT is not a cold one's).
func probeLines(log string) map[string][]probeLine {
	m := map[string][]probeLine{}
	for _, line := range strings.Split(log, "\n") {
		g := probeRE.FindStringSubmatch(line)
		if g == nil {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, g[1])
		if err != nil {
			continue
		}
		d, err := time.ParseDuration(g[4])
		if err != nil || d <= 0 {
			continue
		}
		k := g[3] + " " + g[2]
		m[k] = append(m[k], probeLine{at, d})
	}
	return m
}

// probeRate is the probes a second of one loop in a phase: from its first
// probe to its last, so that where the phase's edges fall in its cycle
// does not count (in 10 s, a window can hold 4 or 6 probes of a loop that
// runs every 2 s). A loop whose first or last probe is further than two
// cycles (gap) from the phase's edges stopped for a while: then its
// probes over the whole phase.
func probeRate(p []probeLine, from, to time.Time, gap time.Duration) float64 {
	n := len(p)
	if n == 0 {
		return 0
	}
	first, last := p[0].at, p[n-1].at
	if n < 2 || gap <= 0 || first.Sub(from) > 2*gap || to.Sub(last) > 2*gap {
		return float64(n) / to.Sub(from).Seconds()
	}
	return float64(n-1) / last.Sub(first).Seconds()
}

// probeShare is the probe rate of the flood over that of the quiet phase,
// summed over the loops the quiet phase saw.
func probeShare(quiet, flood map[string][]probeLine, q0, q1, f0, f1 time.Time) float64 {
	var qr, fr float64
	for k, q := range quiet {
		r := probeRate(q, q0, q1, 0)
		if len(q) >= 2 {
			r = probeRate(q, q0, q1, q[len(q)-1].at.Sub(q[0].at)/time.Duration(len(q)-1))
		}
		qr += r
		if r > 0 {
			fr += probeRate(flood[k], f0, f1, time.Duration(float64(time.Second)/r))
		}
	}
	if qr == 0 {
		return 0
	}
	return fr / qr
}

func median(v []time.Duration) time.Duration {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// ttftShift is the quiet median of each kind of probe, and the median over
// the flood's probes of their TTFT minus the quiet median of their kind.
func ttftShift(quiet, flood map[string][]probeLine) (medians map[string]time.Duration, shift time.Duration, n int) {
	medians = map[string]time.Duration{}
	ttfts := func(p []probeLine) []time.Duration {
		d := make([]time.Duration, len(p))
		for i, l := range p {
			d[i] = l.ttft
		}
		return d
	}
	for k, v := range quiet {
		medians[k] = median(ttfts(v))
	}
	var deltas []time.Duration
	for k, v := range flood {
		q, ok := medians[k]
		if !ok {
			continue
		}
		for _, d := range ttfts(v) {
			deltas = append(deltas, d-q)
		}
	}
	return medians, median(deltas), len(deltas)
}

// flooders is the process of the flooding clients (TestFloodClients).
type flooders struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    string // where it writes its counts
	exited chan error
	done   chan struct{} // closed when the process has exited
	logs   *syncBuffer
}

// startFlooders starts this test binary again as the flooding clients, at
// the lowest CPU priority, and waits until their exports are built.
func startFlooders(t *testing.T, p floodPlan, httpAddr, grpcAddr string) *flooders {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{self, "-test.run=^TestFloodClients$", "-test.count=1", "-test.timeout=0"}
	if nice, err := exec.LookPath("nice"); err == nil {
		args = append([]string{nice, "-n", "19"}, args...)
	}
	f := &flooders{t: t, out: filepath.Join(t.TempDir(), "sent.json"), exited: make(chan error, 1), done: make(chan struct{}), logs: &syncBuffer{}}
	f.cmd = exec.Command(args[0], args[1:]...)
	f.cmd.Env = append(os.Environ(), "SLAPROBE_FLOOD_CLIENTS="+fmt.Sprintf("%s %s %d %d %t %s %s",
		httpAddr, grpcAddr, p.httpClients, p.grpcClients, p.issue34, p.flood, f.out))
	if f.stdin, err = f.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	f.cmd.Stdout, f.cmd.Stderr = f.logs, f.logs
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := f.cmd.Wait()
		close(f.done)
		f.exited <- err
	}()
	t.Cleanup(f.kill)
	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(f.logs.String(), "flood clients ready"); time.Sleep(100 * time.Millisecond) {
		select {
		case err := <-f.exited:
			t.Fatalf("the flood clients exited: %v\n%s", err, f.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the flood clients were not ready within 2 minutes\n%s", f.logs.String())
		}
	}
	return f
}

// start tells the clients to flood.
func (f *flooders) start() {
	if _, err := io.WriteString(f.stdin, "go\n"); err != nil {
		f.t.Fatalf("starting the flood clients: %v\n%s", err, f.logs.String())
	}
}

func (f *flooders) kill() {
	select {
	case <-f.done:
	default:
		_ = f.cmd.Process.Kill()
	}
}

// wait waits for the clients to end and returns what they counted.
func (f *flooders) wait() map[string]int64 {
	select {
	case err := <-f.exited:
		if err != nil {
			f.t.Fatalf("the flood clients failed: %v\n%s", err, f.logs.String())
		}
	case <-time.After(2 * time.Minute):
		f.t.Fatalf("the flood clients did not end\n%s", f.logs.String())
	}
	b, err := os.ReadFile(f.out)
	if err != nil {
		f.t.Fatal(err)
	}
	m := map[string]int64{}
	if err := json.Unmarshal(b, &m); err != nil {
		f.t.Fatal(err)
	}
	return m
}

// TestFloodClients is the flooding clients of runFlood, in a process of
// their own; it does nothing unless SLAPROBE_FLOOD_CLIENTS says where to
// flood: "httpAddr grpcAddr httpClients grpcClients issue34 duration out".
// It builds its exports, says so, waits for a line on stdin, floods for
// the duration and writes its counts, by kind and answer, to out as JSON.
func TestFloodClients(t *testing.T) {
	spec := os.Getenv("SLAPROBE_FLOOD_CLIENTS")
	if spec == "" {
		t.Skip("the flooding clients of TestFlood and TestFloodShort, started by them")
	}
	var (
		httpAddr, grpcAddr, out  string
		httpClients, grpcClients int
		issue34                  bool
		d                        time.Duration
		ds                       string
	)
	if _, err := fmt.Sscan(spec, &httpAddr, &grpcAddr, &httpClients, &grpcClients, &issue34, &ds, &out); err != nil {
		t.Fatalf("SLAPROBE_FLOOD_CLIENTS=%q: %v", spec, err)
	}
	d, err := time.ParseDuration(ds)
	if err != nil {
		t.Fatal(err)
	}
	bodies := newFloodBodies(t, issue34)
	fmt.Println("flood clients ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatalf("waiting for the go: %v", err)
	}
	var (
		mu   sync.Mutex
		sent = map[string]*atomic.Int64{}
	)
	count := func(k string) {
		mu.Lock()
		c, ok := sent[k]
		if !ok {
			c = &atomic.Int64{}
			sent[k] = c
		}
		mu.Unlock()
		c.Add(1)
	}
	ctx, stop := context.WithTimeout(context.Background(), d)
	defer stop()
	var wg sync.WaitGroup
	for i := range httpClients {
		wg.Go(func() { floodHTTP(ctx, i, "http://"+httpAddr+"/v1/traces", bodies, issue34, count) })
	}
	for i := range grpcClients {
		wg.Go(func() { floodGRPC(ctx, t, i, grpcAddr, bodies, count) })
	}
	wg.Wait()
	m := map[string]int64{}
	for k, v := range sent {
		m[k] = v.Load()
	}
	b, _ := json.Marshal(m)
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, exited <-chan error, logs *syncBuffer, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		select {
		case err := <-exited:
			t.Fatalf("slaprobe exited: %v\n%s", err, logs.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("slaprobe did not answer within 30 s\n%s", logs.String())
		}
	}
}

// floodHTTP posts exports until ctx ends; client i sends one kind.
func floodHTTP(ctx context.Context, i int, url string, b floodBodies, issue34 bool, count func(string)) {
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	type kind struct {
		name, ct, enc string
		body          []byte
	}
	kinds := []kind{
		{"http json", "application/json", "", b.json},
		{"http proto", "application/x-protobuf", "", b.proto},
		{"http json long name", "application/json", "", b.longName},
		{"http garbage", "application/x-protobuf", "", b.garbage},
		{"http oversized", "application/x-protobuf", "", b.oversized},
		{"http gzip bomb", "application/x-protobuf", "gzip", b.httpBomb},
	}
	k := kinds[i%len(kinds)]
	if issue34 {
		k = kind{"http json 11MB", "application/json", "", b.bigJSON}
	}
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(k.body))
		req.Header.Set("Content-Type", k.ct)
		if k.enc != "" {
			req.Header.Set("Content-Encoding", k.enc)
		}
		resp, err := client.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				count(k.name + " error")
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		count(k.name + " " + strconv.Itoa(resp.StatusCode))
	}
}

// floodGRPC sends exports on one connection until ctx ends.
func floodGRPC(ctx context.Context, t *testing.T, i int, addr string, b floodBodies, count func(string)) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close()
	type kind struct {
		name string
		body []byte
		opts []grpc.CallOption
	}
	kinds := []kind{
		{"grpc proto", b.proto, nil},
		{"grpc garbage", b.garbage, nil},
		{"grpc proto", b.proto, nil},
		{"grpc oversized", b.oversized, nil},
		{"grpc gzip bomb", b.grpcBomb, []grpc.CallOption{grpc.UseCompressor("gzip")}},
	}
	k := kinds[i%len(kinds)]
	for ctx.Err() == nil {
		var out []byte
		body := k.body
		err := conn.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", &body, &out,
			append([]grpc.CallOption{grpc.ForceCodec(rawCodec{})}, k.opts...)...)
		if ctx.Err() != nil {
			return
		}
		count(k.name + " " + status.Code(err).String())
		if err != nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// loadAverage is the machine's 1-minute load average and CPU count.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%s on %d CPUs", strings.Fields(string(b))[0], runtime.NumCPU())
}

// procCPUSeconds is the user and system CPU time of a process.
func procCPUSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("reading slaprobe's CPU time: %v", err)
	}
	// Fields after the command's closing parenthesis: state is 3, utime 14, stime 15.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ, 100 on Linux
}

// procStatusMiB reads a size field of /proc/<pid>/status.
func procStatusMiB(t *testing.T, pid int, field string) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading slaprobe's RSS: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			kb, _ := strconv.ParseFloat(f[0], 64)
			return kb / 1024
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

var floodClient = &http.Client{Timeout: 30 * time.Second}

// scrapeAll returns every sample line of /metrics.
func scrapeAll(url string) ([]string, error) {
	resp, err := floodClient.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	var lines []string
	for _, l := range strings.Split(string(body), "\n") {
		if l != "" && l[0] != '#' {
			lines = append(lines, l)
		}
	}
	return lines, nil
}

// scrapeValues sums each metric's samples by name.
func scrapeValues(url string) (map[string]float64, error) {
	lines, err := scrapeAll(url)
	if err != nil {
		return nil, err
	}
	m := map[string]float64{}
	for _, l := range lines {
		name, v := soakValue(l)
		m[name] += v
	}
	return m, nil
}

// labelled sums a metric's samples by one label.
func labelled(lines []string, metric, label string) map[string]float64 {
	m := map[string]float64{}
	for _, l := range lines {
		if !strings.HasPrefix(l, metric+"{") {
			continue
		}
		_, v := soakValue(l)
		i := strings.Index(l, label+`="`)
		if i < 0 {
			continue
		}
		rest := l[i+len(label)+2:]
		m[rest[:strings.IndexByte(rest, '"')]] += v
	}
	return m
}

// Len is how much has been written so far.
func (b *syncBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// Slice is what was written between two Lens.
func (b *syncBuffer) Slice(from, to int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf.Bytes()[from:to])
}

// TestFloodProbeShare: the flood tests' measure of missed probes ignores
// where a phase's edges fall in the loops' cycles, and counts probes that
// never started, slower loops and stopped ones.
func TestFloodProbeShare(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	// every: probes of one loop every d from offset, within [from, to).
	every := func(d, offset, from, to time.Duration) []probeLine {
		var p []probeLine
		for at := from + offset; at < to; at += d {
			p = append(p, probeLine{at: t0.Add(at), ttft: time.Millisecond})
		}
		return p
	}
	const s = time.Second
	quiet := map[string][]probeLine{"a": every(2*s, 100*time.Millisecond, 0, 10*s), "b": every(2*s, 1900*time.Millisecond, 0, 10*s)}
	for _, c := range []struct {
		name     string
		flood    map[string][]probeLine
		min, max float64
	}{
		{"same pace, other phases", map[string][]probeLine{"a": every(2*s, 1900*time.Millisecond, 20*s, 30*s), "b": every(2*s, 50*time.Millisecond, 20*s, 30*s)}, 0.99, 1.01},
		{"one loop at half pace", map[string][]probeLine{"a": every(4*s, time.Second, 20*s, 30*s), "b": every(2*s, time.Second, 20*s, 30*s)}, 0.74, 0.76},
		{"one loop stopped half-way", map[string][]probeLine{"a": every(2*s, time.Second, 20*s, 25*s), "b": every(2*s, time.Second, 20*s, 30*s)}, 0.69, 0.80},
		{"one loop never ran", map[string][]probeLine{"b": every(2*s, time.Second, 20*s, 30*s)}, 0.49, 0.51},
	} {
		got := probeShare(quiet, c.flood, t0, t0.Add(10*s), t0.Add(20*s), t0.Add(30*s))
		if got < c.min || got > c.max {
			t.Errorf("%s: share %.3f, want %.2f-%.2f", c.name, got, c.min, c.max)
		}
	}
}

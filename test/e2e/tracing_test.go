package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/slaprobe/slaprobe/test/testproc"
)

// spanLog is the test's own OTLP/HTTP receiver, standing in for a trace back end (Tempo, Jaeger): it
// keeps every span it is sent, and passes each export on to slaprobe's own receiver once that is up.
type spanLog struct {
	mu      sync.Mutex
	spans   map[string][]span // by trace id (hex)
	forward string            // slaprobe's OTLP/HTTP receiver URL; "" until set
}

type span struct{ name, id, parent string }

func (l *spanLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	l.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				id := hex.EncodeToString(s.GetTraceId())
				l.spans[id] = append(l.spans[id], span{s.GetName(), hex.EncodeToString(s.GetSpanId()), hex.EncodeToString(s.GetParentSpanId())})
			}
		}
	}
	fwd := l.forward
	l.mu.Unlock()
	if fwd != "" {
		if resp, err := http.Post(fwd, "application/x-protobuf", bytes.NewReader(b)); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// oneTrace reports whether trace id holds the probe's span and the engine's llm_request span as its
// child: what a trace back end shows as one trace.
func (l *spanLog) oneTrace(id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var probe, engine *span
	for i, s := range l.spans[id] {
		switch s.name {
		case "slaprobe.probe":
			probe = &l.spans[id][i]
		case "llm_request":
			engine = &l.spans[id][i]
		}
	}
	switch {
	case probe == nil && engine == nil:
		return fmt.Errorf("trace %s: no span received", id)
	case probe == nil:
		return fmt.Errorf("trace %s: the engine's span came, slaprobe's probe span did not", id)
	case engine == nil:
		return fmt.Errorf("trace %s: the probe span came, the engine's llm_request span did not", id)
	case engine.parent != probe.id:
		return fmt.Errorf("trace %s: llm_request's parent is %s, not the probe span %s", id, engine.parent, probe.id)
	}
	return nil
}

// TestExemplarsAndEngineSpans runs the simulated engine with its traces on (vLLM's llm_request span, in
// the trace of each request's traceparent; per-request metrics off), slaprobe with its OTLP receiver and
// its probe spans exported, and a real Prometheus with exemplar storage. The engine and slaprobe both
// export to the test's own receiver, which passes the engine's spans on to slaprobe. Then:
//   - /api/v1/query_exemplars returns trace ids on the TTFT buckets, and each is a trace in which the
//     engine's span is the child of the probe's span: Grafana's exemplar link leads to the right trace;
//   - slaprobe settled the engine timing of its probes from those spans (source="trace") and exports the
//     split, which Prometheus scraped.
func TestExemplarsAndEngineSpans(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the simulated engine, slaprobe and Prometheus for up to 90 s")
	}
	t.Parallel()
	promBin := requireTool(t, "prometheus")
	root := repoRoot(t)
	bin := buildSlaprobe(t, root)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), readyBudget+waitBudget)
	t.Cleanup(cancel)

	log := &spanLog{spans: map[string][]span{}}
	recv := httptest.NewServer(log)
	t.Cleanup(recv.Close)

	dir := t.TempDir()
	simAddr := testproc.FreeAddr(t)
	simCfg := writeFile(t, dir, "sim.yml", fmt.Sprintf("otlp_traces_endpoint: %s/v1/traces\notlp_traces_protocol: http/protobuf\n", recv.URL))
	startProcess(t, "slaprobe sim", bin, "sim", "--sim.listen-address="+simAddr, "--sim.time-scale=0.1", "--sim.config.file="+simCfg)

	otlpAddr, webAddr := testproc.FreeAddr(t), testproc.FreeAddr(t)
	cfg := writeFile(t, dir, "slaprobe.yml", fmt.Sprintf(`
global: {jitter: 0}
targets:
  - {name: sim, url: "http://%s", scenarios: [tiny]}
scenarios:
  - {name: tiny, input_tokens: 200, output_tokens: 16, interval: 2s, timeout: 10s}
tracing:
  otlp_http_listen_address: %q
  join_timeout: 10s
  export_endpoint: %s/v1/traces
  export_protocol: http/protobuf
`, simAddr, otlpAddr, recv.URL))
	sp := startRun(t, ctx, bin, cfg, webAddr)
	log.mu.Lock()
	log.forward = "http://" + otlpAddr + "/v1/traces"
	log.mu.Unlock()
	t.Logf("%5.1fs engine at %s, slaprobe at %s (OTLP %s)", since(start), simAddr, webAddr, otlpAddr)

	promCfg := fmt.Sprintf(`
global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: slaprobe
    static_configs: [{targets: [%q]}]
`, webAddr)
	p := startPrometheusWith(t, ctx, promBin, t.TempDir(), []byte(promCfg), "--enable-feature=exemplar-storage")

	var ids []string
	for {
		var err error
		if ids, err = p.exemplarTraceIDs(ctx, `slaprobe_ttft_seconds_bucket{scenario="tiny"}`); err == nil && len(ids) >= 3 {
			var errs []string
			for _, id := range ids {
				if e := log.oneTrace(id); e != nil {
					errs = append(errs, e.Error())
				}
			}
			if len(errs) == 0 {
				if err = p.wantNonEmpty(ctx, `slaprobe_probe_engine_timing_total{source="trace"} > 0`); err == nil {
					err = p.wantNonEmpty(ctx, `slaprobe_ttft_outside_engine_seconds_count > 0 and slaprobe_engine_queue_seconds_count > 0 and slaprobe_engine_prefill_seconds_count > 0`)
				}
				if err == nil {
					break
				}
			} else {
				err = fmt.Errorf("%s", strings.Join(errs, "; "))
			}
		} else if err == nil {
			err = fmt.Errorf("%d exemplar trace ids so far", len(ids))
		}
		select {
		case <-ctx.Done():
			t.Fatalf("after %.0fs: %v\n--- prometheus log ---\n%s\n%s", since(start), err, tail(p.logs.Stderr(), 20), sp.Output())
		case <-time.After(time.Second):
		}
	}
	sort.Strings(ids)
	t.Logf("%5.1fs query_exemplars returned %d trace ids, each a trace with the probe span and the engine's llm_request under it: %s",
		since(start), len(ids), strings.Join(ids, ", "))
	samples, err := p.query(ctx, `sum by (source) (slaprobe_probe_engine_timing_total)`)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		t.Logf("slaprobe_probe_engine_timing_total{source=%q} = %v", s.Metric["source"], s.Value[1])
		if s.Metric["source"] == "response" {
			if v, _ := s.Float(); v > 0 {
				t.Errorf("source=response counted %v probes, but the engine's per-request metrics are off", v)
			}
		}
	}
}

// exemplarTraceIDs returns the trace_id of every exemplar of q over the last 5 minutes.
func (p *prometheus) exemplarTraceIDs(ctx context.Context, q string) ([]string, error) {
	var data []struct {
		Exemplars []struct {
			Labels map[string]string `json:"labels"`
		} `json:"exemplars"`
	}
	now := time.Now()
	params := url.Values{"query": {q}, "start": {fmt.Sprint(now.Add(-5 * time.Minute).Unix())}, "end": {fmt.Sprint(now.Unix())}}
	if err := p.apiGet(ctx, "/api/v1/query_exemplars", params, &data); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var ids []string
	for _, s := range data {
		for _, e := range s.Exemplars {
			if id := e.Labels["trace_id"]; id != "" && !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	return ids, nil
}

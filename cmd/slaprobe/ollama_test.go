package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/slo"
	"github.com/slaprobe/slaprobe/test/browser"
	"github.com/slaprobe/slaprobe/test/ollama"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// TestRunAgainstOllama runs the README's line, `slaprobe run
// --target.url=…`, against a real engine (Ollama, llama.cpp on CPU) with a
// 2048-token context: the model is found on /v1/models, chatbot's prompt is
// sized without /tokenize and probed, and TTFT, ITL, decode speed and E2E
// are exported; rag's 4K prompt does not fit, which the log, the status page
// and slaprobe_scenario_context_needed_tokens say with the context length
// to set; the engine has no /metrics, which is logged once.
func TestRunAgainstOllama(t *testing.T) {
	if testing.Short() {
		t.Skip("runs slaprobe against a real engine")
	}
	ollama.SkipIfMissing(t)
	srv := ollama.Start(t, ollama.Options{ContextLength: 2048})
	bin := binary(t)
	addr := testproc.FreeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--target.url="+srv.URL, "--scenarios=chatbot,rag",
		"--web.listen-address="+addr, "--log.level=info")
	logs, exited := startProcess(t, cmd)

	base := "http://" + addr
	series := func(body, name, scenario string) (float64, bool) {
		re := regexp.MustCompile(`(?m)^` + name + `\{[^}]*scenario="` + scenario + `"[^}]*\} (\S+)$`)
		m := re.FindStringSubmatch(body)
		if m == nil {
			return 0, false
		}
		v, err := strconv.ParseFloat(m[1], 64)
		return v, err == nil
	}
	want := []struct{ name, scenario string }{
		{"slaprobe_ttft_seconds_count", "chatbot"},
		{"slaprobe_itl_seconds_count", "chatbot"},
		{"slaprobe_decode_tokens_per_second_count", "chatbot"},
		{"slaprobe_e2e_latency_seconds_count", "chatbot"},
		{"slaprobe_prefill_tokens_per_second_count", "chatbot"},
		{`slaprobe_probe_errors_total\{[^}]*reason="prompt_truncated"`, "rag"},
	}
	var body string
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(time.Second) {
		select {
		case err := <-exited:
			t.Fatalf("slaprobe exited: %v\n%s", err, logs)
		default:
		}
		body = scrape(t, base+"/metrics")
		missing := []string{}
		for _, w := range want {
			name := w.name
			if i := strings.Index(name, `\{`); i >= 0 { // a name with a label matcher of its own
				re := regexp.MustCompile(`(?m)^` + name + `[^}]*scenario="` + w.scenario + `"[^}]*\} [1-9]`)
				if !re.MatchString(body) {
					missing = append(missing, name+" "+w.scenario)
				}
				continue
			}
			if v, ok := series(body, name, w.scenario); !ok || v < 1 {
				missing = append(missing, name+" "+w.scenario)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 90 s still missing %v:\n%s\nlog:\n%s", missing, grepLines(body, "slaprobe_probe"), logs)
		}
	}
	if !strings.Contains(body, `model="`+srv.Model+`"`) {
		t.Errorf("no series with model=%q: the model was not found on /v1/models", srv.Model)
	}
	if re := regexp.MustCompile(`slaprobe_probes_total\{[^}]*result="success",scenario="chatbot"[^}]*\} [1-9]`); !re.MatchString(body) {
		t.Errorf("no successful chatbot probe:\n%s", grepLines(body, "slaprobe_probes_total"))
	}
	// 4096 + 256: the context the scenario needs.
	if v, ok := series(body, "slaprobe_scenario_context_needed_tokens", "rag"); !ok || v != 4352 {
		t.Errorf("slaprobe_scenario_context_needed_tokens{scenario=rag} = %v (present %v), want 4352", v, ok)
	}
	if _, ok := series(body, "slaprobe_scenario_context_needed_tokens", "chatbot"); ok {
		t.Errorf("chatbot fits, yet has slaprobe_scenario_context_needed_tokens")
	}
	// Ollama's OpenAI endpoint reports no per-request timing: every timed probe counts as
	// source="none", and nothing is recorded as a zero queue or prefill.
	for src, want := range map[string]string{"none": "[1-9][0-9.]*", "response": "0", "trace": "0"} {
		re := regexp.MustCompile(`(?m)^slaprobe_probe_engine_timing_total\{[^}]*scenario="chatbot",source="` + src + `"[^}]*\} ` + want + `$`)
		if !re.MatchString(body) {
			t.Errorf("slaprobe_probe_engine_timing_total{scenario=chatbot, source=%s} is not %s:\n%s", src, want, grepLines(body, "engine_timing"))
		}
	}
	for _, name := range []string{"slaprobe_engine_queue_seconds_count", "slaprobe_engine_prefill_seconds_count", "slaprobe_engine_itl_seconds_count", "slaprobe_ttft_outside_engine_seconds_count"} {
		if v, ok := series(body, name, "chatbot"); ok && v > 0 {
			t.Errorf("%s = %v on an engine that reports no timing", name, v)
		}
	}
	page := scrape(t, base+"/")
	if !strings.Contains(page, "The engine reports no per-request timing") {
		t.Errorf("the status page does not say that the engine reports no per-request timing")
	}
	for _, s := range []string{"does not fit the server&#39;s context window", "at least 4352 tokens", "OLLAMA_CONTEXT_LENGTH"} {
		if !strings.Contains(page, s) {
			t.Errorf("status page lacks %q", s)
		}
	}
	out := logs.String()
	if !strings.Contains(out, "cuts prompts to about") || !strings.Contains(out, "scenario=rag") {
		t.Errorf("the log does not say that rag's prompt is cut:\n%s", out)
	}
	if n := strings.Count(out, "engine metrics unavailable"); n != 1 {
		t.Errorf("the missing engine /metrics was logged %d times, want once:\n%s", n, out)
	}
	if strings.Contains(out, "level=ERROR") {
		t.Errorf("errors in the log:\n%s", out)
	}
}

// TestBenchAgainstOllama: `slaprobe bench` on a real, compute-bound CPU
// engine (one short scenario, concurrency 1, 2, 4, bursts 1, 4, 8): each
// user's decode speed falls as N grows, scaling efficiency comes out below
// 1, and the report renders in Chromium with its charts.
func TestBenchAgainstOllama(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a sweep against a real engine")
	}
	ollama.SkipIfMissing(t)
	// Two layers 256 wide on one thread: decoding four streams costs the
	// engine about four times one.
	srv := ollama.Start(t, ollama.Options{Layers: 2, Embedding: 256})
	bin := binary(t)
	out := filepath.Join(t.TempDir(), "report")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// A closed-loop step samples the requests that start inside its window,
	// so the window must outlast a request at N=4: each worker's first
	// request starts at the step's start, its second only when that one
	// ends. Loaded (load average 14), a chatbot request (1K prompt, 256
	// tokens) at N=4 took about 2.9 s (in the burst of 4: TTFT 1.24 s, then
	// 155 tok/s each), more than a 2 s window and its 0.5 s warm-up: the
	// step saw none start ("0 of 0 requests"). A 5 s window holds a request
	// that slow with room to spare.
	cmd := exec.CommandContext(ctx, bin, "bench", "--target.url="+srv.URL, "--scenarios=chatbot",
		"--concurrency=1,2,4", "--burst=1,4,8", "--burst.repeat=1", "--step.duration=5s", "--step.warmup=500ms", "--cooldown=0s", "--out="+out)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bench: %v\n%s\n%s", err, b, srv.Logs())
	}
	rep, err := report.Load(filepath.Join(out, report.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Meta.Model != srv.Model || len(rep.Scenarios) != 1 {
		t.Fatalf("model %q, %d scenarios", rep.Meta.Model, len(rep.Scenarios))
	}
	s := rep.Scenarios[0]
	if len(s.ClosedLoop) != 3 || len(s.Burst) != 3 {
		t.Fatalf("%d closed-loop and %d burst steps, want 3 and 3:\n%s", len(s.ClosedLoop), len(s.Burst), b)
	}
	var decode []float64
	for _, st := range s.ClosedLoop {
		if st.RequestsOK == 0 || st.SuccessRate < 1 {
			t.Errorf("closed loop N=%d: %d of %d requests succeeded, errors %v", st.Concurrency, st.RequestsOK, st.RequestsSent, st.Errors)
		}
		decode = append(decode, st.Decode.Mean)
		eff := "-"
		if st.ScalingEfficiency != nil {
			eff = fmt.Sprintf("%.2f", *st.ScalingEfficiency)
		}
		t.Logf("closed loop N=%d: decode %.1f tok/s per user, system %.1f tok/s, efficiency %s, TTFT %.1f ms",
			st.Concurrency, st.Decode.Mean, st.SystemTokensPerSecond, eff, 1000*st.TTFT.Mean)
	}
	if !(decode[0] > decode[1] && decode[1] > decode[2]) {
		t.Errorf("per-user decode speed %v tok/s at N=1, 2, 4: it must fall as N grows on a compute-bound engine", decode)
	}
	for _, st := range s.ClosedLoop[1:] {
		if st.ScalingEfficiency == nil || *st.ScalingEfficiency >= 1 {
			t.Errorf("closed loop N=%d: scaling efficiency %v, want below 1", st.Concurrency, st.ScalingEfficiency)
		}
	}
	for _, st := range s.Burst {
		if st.RequestsOK != st.RequestsSent {
			t.Errorf("burst N=%d: %d of %d requests succeeded, errors %v", st.Concurrency, st.RequestsOK, st.RequestsSent, st.Errors)
		}
		t.Logf("burst N=%d: TTFT %.1f ms, decode %.1f tok/s per user", st.Concurrency, 1000*st.TTFT.Mean, st.Decode.Mean)
	}

	chrome := browser.Chromium(t)
	page := "file://" + filepath.Join(out, report.HTMLFile)
	dom := browser.DOM(t, chrome, page)
	for _, c := range []string{slo.ChartDecodeVsConcurrency, slo.ChartITLVsConcurrency, slo.ChartScalingEfficiency,
		slo.ChartTTFTVsQueueDepth, slo.ChartSystemThroughput} {
		if !strings.Contains(dom, `data-chart="`+c+`"`) {
			t.Errorf("chart %q missing from the rendered report", c)
		}
	}
	if !strings.Contains(dom, srv.Model) {
		t.Errorf("the report does not name the model %s", srv.Model)
	}
	browser.Screenshot(t, chrome, page, "ollama-bench-report.png", 1280, 2400)
}

package main

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/test/ollama"
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
	addr := freePort(t)
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
	page := scrape(t, base+"/")
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

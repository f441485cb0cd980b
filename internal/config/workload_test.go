package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/workload"
)

func writeTrace(t *testing.T, f workload.Format) string {
	t.Helper()
	var b bytes.Buffer
	if err := workload.Generate(&b, f, workload.GenOptions{Requests: 300, Seed: 9, InputMin: 500, InputMax: 20000,
		OutputMin: 16, OutputMax: 400, Prefixes: 2, PrefixBlocks: 4, SharedProb: 0.5}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "trace."+string(f))
	if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWorkloadScenario(t *testing.T) {
	trace := writeTrace(t, workload.FormatMooncake)
	burst := writeTrace(t, workload.FormatBurstGPT)
	good := `targets: [{url: "http://127.0.0.1:8000"}]
global: {scenarios: [traffic]}
scenarios:
  - name: traffic
    workload:
      trace: ` + trace + `
      format: mooncake
      seed: 7
      max_context: 16384
      ttft_by_class: {32k: 6s}
`
	c, err := LoadBytes([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Scenarios("127.0.0.1:8000")
	if len(s) != 1 || s[0].Shape == nil {
		t.Fatalf("scenarios %+v; want traffic with a trace shape", s)
	}
	sh := s[0].Shape.(*workload.Shape)
	if sh.Summary().Requests != 300 || sh.TTFT()["32k"] != 6*time.Second || sh.TTFT()["1k"] != 3*time.Second {
		t.Errorf("shape summary %+v thresholds %v", sh.Summary(), sh.TTFT())
	}
	in, out := sh.MeanTokens()
	if s[0].InputTokens != in || s[0].OutputTokens != out || s[0].Interval == 0 {
		t.Errorf("scenario %d in / %d out / interval %s; want the trace's means %d / %d and a default cadence", s[0].InputTokens, s[0].OutputTokens, s[0].Interval, in, out)
	}
	// The effective config loads back to the same workload.
	printed := c.Redacted()
	for _, w := range []string{"workload:", "trace: " + trace, "format: mooncake", "ttft_by_class:"} {
		if !strings.Contains(printed, w) {
			t.Errorf("effective config lacks %q:\n%s", w, printed)
		}
	}
	if _, err := LoadBytes([]byte(printed)); err != nil {
		t.Errorf("the effective config does not load back: %v\n%s", err, printed)
	}

	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"bad line", "workload: {trace: " + burst + ", format: mooncake}", burst + ":1:"},
		{"missing file", "workload: {trace: /nonexistent/trace.jsonl, format: mooncake}", "no such file"},
		{"unknown format", "workload: {trace: " + trace + ", format: sharegpt}", `format="sharegpt"`},
		{"unknown class", "workload: {trace: " + trace + ", format: mooncake, ttft_by_class: {8k: 1s}}", `ttft_by_class["8k"]`},
		{"bad order", "workload: {trace: " + trace + ", format: mooncake, order: backwards}", `order="backwards"`},
		{"with conversation", "workload: {trace: " + trace + ", format: mooncake}\n    conversation: {new_tokens: 10}", "workload and conversation are both set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := "targets: [{url: \"http://127.0.0.1:8000\"}]\nscenarios:\n  - name: traffic\n    " + tc.yaml + "\n"
			_, err := LoadBytes([]byte(y))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "scenarios[0] (traffic)") {
				t.Errorf("error %v; want one naming scenarios[0] (traffic) and saying %q", err, tc.want)
			}
		})
	}
	live, err := LoadBytes([]byte("targets: [{url: \"http://127.0.0.1:8000\"}]\nglobal: {scenarios: [mix]}\nscenarios:\n  - name: mix\n    workload: live\n"))
	if err != nil {
		t.Fatal(err)
	}
	if sh, ok := live.Scenarios("127.0.0.1:8000")[0].Shape.(*workload.Shape); !ok || !sh.IsLive() || sh.LiveWindow() != workload.DefaultLiveWindow {
		t.Errorf("workload: live loaded as %+v", live.Scenarios("127.0.0.1:8000")[0])
	}
	if _, err := LoadBytes([]byte(live.Redacted())); err != nil {
		t.Errorf("a live scenario's effective config does not load back: %v\n%s", err, live.Redacted())
	}
	if _, err := LoadBytes([]byte("targets: [{url: \"http://127.0.0.1:8000\"}]\nscenarios:\n  - name: mix\n    workload: lively\n")); err == nil || !strings.Contains(err.Error(), `workload="lively"; expected live`) {
		t.Errorf("workload: lively: error %v", err)
	}
	_, err = LoadBytes([]byte("targets: [{url: \"http://127.0.0.1:8000\"}]\nscenarios:\n  - name: chatbot\n    workload: {trace: " + trace + ", format: mooncake}\n"))
	if err == nil || !strings.Contains(err.Error(), "built-in scenario") {
		t.Errorf("workload on a built-in scenario: error %v", err)
	}
}

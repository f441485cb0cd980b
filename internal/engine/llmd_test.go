package engine

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/test/llmd"
)

// llm-d-inference-sim, a vLLM-compatible simulator, still reads as vLLM:
// its queue and tokens as before, its histograms re-exported without a
// note, and none of the 2026 families it does not export invented.
func TestScrapeLLMDInferenceSim(t *testing.T) {
	srv := llmd.Start(t, llmd.Options{})
	for range 2 {
		body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hello there"}],"max_tokens":8}`, srv.Model)
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("chat: HTTP %d", resp.StatusCode)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var s Snapshot
	var err error
	// The simulator updates its metrics asynchronously, each family on its
	// own: wait for both requests in the counter and in the TTFT histogram.
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if s, err = Scrape(ctx, nil, srv.URL+"/metrics"); err == nil && s.RequestsFinished >= 2 &&
			s.Hists != nil && s.Hists.TTFT != nil && s.Hists.TTFT.Count >= 2 {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if s.Flavor != "vllm" || !s.HasQueue || !s.HasTokens || s.RequestsFinished != 2 {
		t.Errorf("snapshot %+v; want vLLM with queue, tokens and 2 finished requests", s)
	}
	if len(s.Notes) != 0 {
		t.Errorf("notes %q; want none", s.Notes)
	}
	if s.Hists == nil || s.Hists.TTFT == nil || s.Hists.TTFT.Count != 2 {
		t.Errorf("TTFT histogram %+v; want 2 requests", s.Hists)
	}
	if s.HasWaitingByReason || s.HasSleepState || s.HasAdmissionRejections {
		t.Errorf("families the simulator does not export were read: by reason %v, sleep %v, admission %v",
			s.HasWaitingByReason, s.HasSleepState, s.HasAdmissionRejections)
	}
}

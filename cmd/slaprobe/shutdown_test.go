package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// shutdownBound is how long slaprobe may take to exit after SIGTERM: probes
// are cancelled at once; the web server gets 5 s to finish its requests.
const shutdownBound = 10 * time.Second

// TestSIGTERMCancelsInFlightProbes runs `slaprobe run` against an engine
// whose streams hang after the first token (no stall timeout, a long
// scenario timeout), sends SIGTERM while probes hang, and checks that the
// engine sees every request cancelled and slaprobe exits 0 within
// shutdownBound.
func TestSIGTERMCancelsInFlightProbes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs slaprobe")
	}
	bin := binary(t)
	eng, err := vllmsim.New(vllmsim.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	var inFlight, cancelled atomic.Int32
	started := make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			eng.Handler().ServeHTTP(w, r)
			return
		}
		inFlight.Add(1)
		defer inFlight.Add(-1)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(`data: {"id":"x","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}` + "\n\n"))
		w.(http.Flusher).Flush()
		select {
		case started <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
			cancelled.Add(1)
		case <-time.After(5 * time.Minute):
		}
	}))
	defer srv.Close()

	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "slaprobe.yml")
	if err := os.WriteFile(cfgPath, []byte(`global: {scenarios: [chatbot, rag], stall_timeout: 0s, max_in_flight_per_target: 2}
engine: {enabled: false}
power: {nvml: false}
scenarios:
  - {name: chatbot, interval: 1s, timeout: 5m}
  - {name: rag, interval: 1s, timeout: 5m}
targets:
  - {name: hang, url: `+srv.URL+`, model: `+eng.Config().ModelName+`}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--config.file="+cfgPath, "--web.listen-address="+testproc.FreeAddr(t), "--log.level=info")
	logs, exited := startProcess(t, cmd)

	// Both scenarios hang in their streams.
	for range 2 {
		select {
		case <-started:
		case err := <-exited:
			t.Fatalf("slaprobe exited: %v\n%s", err, logs.String())
		case <-time.After(60 * time.Second):
			t.Fatalf("no probe reached the engine within 60 s\n%s", logs.String())
		}
	}
	if n := inFlight.Load(); n != 2 {
		t.Fatalf("%d probes in flight, want 2", n)
	}
	t0 := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v (want status 0)\n%s", err, logs.String())
		}
	case <-time.After(shutdownBound):
		t.Fatalf("slaprobe did not exit within %v of SIGTERM\n%s", shutdownBound, logs.String())
	}
	t.Logf("exited %v after SIGTERM", time.Since(t0).Round(time.Millisecond))
	// The engine learns of the cancellations once the connections close.
	for end := time.Now().Add(5 * time.Second); inFlight.Load() > 0 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if n, c := inFlight.Load(), cancelled.Load(); n != 0 || c != 2 {
		t.Errorf("after exit: %d requests still open at the engine, %d cancelled; want 0 and 2", n, c)
	}
	if !strings.Contains(logs.String(), "slaprobe stopped") {
		t.Errorf("no \"slaprobe stopped\" in the log:\n%s", logs.String())
	}
}

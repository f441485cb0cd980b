package testproc

import (
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestProcess: a started program's output is kept, WaitHTTP returns once
// the server answers and fails when the program exits first, and Stop
// ends it (an interrupt, then a kill after the grace).
func TestProcess(t *testing.T) {
	p, err := Start(exec.Command("sh", "-c", "echo started; exec sleep 30"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer srv.Close()
	if err := p.WaitHTTP(srv.URL, 5*time.Second, func(status int, body []byte) bool { return status == 200 && string(body) == "ok" }); err != nil {
		t.Fatalf("WaitHTTP on a serving URL: %v", err)
	}
	p.Stop(time.Second)
	select {
	case <-p.Exited():
	default:
		t.Fatal("Stop returned before the process exited")
	}
	if !strings.Contains(p.Logs(), "started") {
		t.Errorf("logs %q, want the program's output", p.Logs())
	}
	p.Stop(time.Second) // twice is fine

	q, err := Start(exec.Command("true"))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.WaitHTTP("http://127.0.0.1:1/", 5*time.Second, func(int, []byte) bool { return true }); err == nil || !strings.Contains(err.Error(), "exited") {
		t.Errorf("WaitHTTP on a program that exited: %v, want an error saying so", err)
	}
}

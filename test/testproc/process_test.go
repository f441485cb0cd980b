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
	// The program's output is kept as it comes (an interrupt sent before the
	// shell ran its echo would end it with nothing written).
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(p.Logs(), "started"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("logs %q after 30 s, want the program's output", p.Logs())
		}
	}
	p.Stop(time.Second)
	select {
	case <-p.Exited():
	default:
		t.Fatal("Stop returned before the process exited")
	}
	if !strings.Contains(p.Logs(), "started") {
		t.Errorf("logs %q after Stop, want the program's output kept", p.Logs())
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

// TestStopClean: a program that exits 0 on the interrupt is a clean stop;
// one that had already exited, one that exits non-zero and one that
// ignores the interrupt are each reported as such.
func TestStopClean(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		early        bool
		grace        time.Duration // generous where the program exits by itself: a loaded machine is slow
		want         string        // "" for a clean stop
	}{
		{"clean", `trap 'exit 0' INT; echo up; while :; do sleep 0.05; done`, false, time.Minute, ""},
		{"exited early", `echo bye; exit 3`, true, time.Minute, "exited early: exit status 3"},
		{"unclean", `trap 'exit 4' INT; echo up; while :; do sleep 0.05; done`, false, time.Minute, "did not exit cleanly after SIGINT: exit status 4"},
		{"ignores SIGINT", `trap '' INT; echo up; while :; do sleep 0.05; done`, false, 300 * time.Millisecond, "killed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := StartNamed("fixture "+tc.name, exec.Command("sh", "-c", tc.script))
			if err != nil {
				t.Fatal(err)
			}
			if tc.early {
				<-p.Exited()
			} else {
				for deadline := time.Now().Add(30 * time.Second); !strings.Contains(p.Stdout(), "up"); time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) { // "up": the trap is set
						t.Fatalf("no output after 30 s\n%s", p.Output())
					}
				}
			}
			err = p.StopClean(tc.grace)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("StopClean: %v, want a clean stop", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "fixture "+tc.name)):
				t.Errorf("StopClean: %v, want an error naming the process and saying %q", err, tc.want)
			}
			if err := p.StopClean(time.Second); err != nil {
				t.Errorf("second StopClean: %v, want nil", err)
			}
		})
	}
}

// TestRun: Run returns both outputs whole, names a failed program with its
// stderr, and kills one that outlives its timeout.
func TestRun(t *testing.T) {
	out, errOut, err := Run(exec.Command("sh", "-c", "echo out; echo err >&2"), time.Minute)
	if err != nil || out != "out\n" || errOut != "err\n" {
		t.Errorf("Run = %q, %q, %v; want out, err, nil", out, errOut, err)
	}
	if _, _, err := Run(exec.Command("sh", "-c", "echo broken >&2; exit 2"), time.Minute); err == nil ||
		!strings.Contains(err.Error(), "sh: exit status 2") || !strings.Contains(err.Error(), "broken") {
		t.Errorf("Run of a failing program: %v, want its name, status and stderr", err)
	}
	if _, _, err := Run(exec.Command("sleep", "30"), 100*time.Millisecond); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Run past its timeout: %v, want killed", err)
	}
}

package testproc

// This file holds the lifecycle of an external process a test runs (a
// simulator, an engine): start it with its output kept, wait until it
// serves, and stop it.

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"time"
)

// Process is a running external program whose output is kept (the tail of
// stdout and stderr together). Safe for concurrent use.
type Process struct {
	cmd      *exec.Cmd
	done     chan struct{}
	stopOnce sync.Once
	logs     *TailBuffer
}

// Start starts cmd with its stdout and stderr kept in a 64 KiB tail.
func Start(cmd *exec.Cmd) (*Process, error) {
	p := &Process{cmd: cmd, done: make(chan struct{}), logs: &TailBuffer{Max: 64 << 10}}
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Logs returns the tail of the process's output.
func (p *Process) Logs() string { return p.logs.String() }

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.done }

// WaitHTTP polls url every 20 ms until ready accepts an answer (its status
// and body), the process exits (an error, whatever its status), or timeout
// passes.
func (p *Process) WaitHTTP(url string, timeout time.Duration, ready func(status int, body []byte) bool) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-p.done:
			return errors.New("exited before serving")
		default:
		}
		resp, err := client.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if ready(resp.StatusCode, body) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not serving %s after %s (last error: %v)", url, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop stops the process once: an interrupt, then a kill after grace (at
// once when grace is 0). It returns when the process has exited.
func (p *Process) Stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		if p.cmd.Process == nil {
			return
		}
		if grace > 0 {
			_ = p.cmd.Process.Signal(os.Interrupt)
			select {
			case <-p.done:
				return
			case <-time.After(grace):
			}
		}
		_ = p.cmd.Process.Kill()
		<-p.done
	})
}

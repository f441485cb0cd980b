package testproc

// This file holds the lifecycle of an external process a test runs (a
// simulator, an engine, Prometheus, Alertmanager, slaprobe itself, a
// browser): start it with its output kept, wait until it serves, and stop
// it, or run it to the end.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Process is a running external program whose output is kept: the tail of
// stdout and stderr together (Logs) and of each apart. Safe for concurrent
// use.
type Process struct {
	name           string
	cmd            *exec.Cmd
	done           chan struct{}
	err            error // the exit status; set before done is closed
	stopOnce       sync.Once
	logs           *TailBuffer
	stdout, stderr *TailBuffer
}

// Start starts cmd, named by its program's file name in messages.
func Start(cmd *exec.Cmd) (*Process, error) { return StartNamed(filepath.Base(cmd.Path), cmd) }

// StartNamed starts cmd with its stdout and stderr kept in 64 KiB tails;
// name is what messages call it ("slaprobe run 2").
func StartNamed(name string, cmd *exec.Cmd) (*Process, error) {
	SeesTree()
	p := &Process{name: name, cmd: cmd, done: make(chan struct{}), logs: &TailBuffer{Max: 64 << 10},
		stdout: &TailBuffer{Max: 64 << 10}, stderr: &TailBuffer{Max: 64 << 10}}
	cmd.Stdout, cmd.Stderr = io.MultiWriter(p.logs, p.stdout), io.MultiWriter(p.logs, p.stderr)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Name is what messages call the process.
func (p *Process) Name() string { return p.name }

// Stdout and Stderr return the tails of the process's two outputs.
func (p *Process) Stdout() string { return p.stdout.String() }

// Stderr: see Stdout.
func (p *Process) Stderr() string { return p.stderr.String() }

// Err is how the process exited (nil: status 0); valid once Exited is
// closed.
func (p *Process) Err() error { return p.err }

// Output is the last lines of both outputs, headed by the process's name,
// for a failure message.
func (p *Process) Output() string {
	return fmt.Sprintf("--- %s stdout (tail) ---\n%s\n--- %s stderr (tail) ---\n%s",
		p.name, lastLines(p.Stdout(), 20), p.name, lastLines(p.Stderr(), 40))
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
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

// StopClean stops the process as Stop does, and says what went wrong: it
// had exited before it was asked to, it did not exit with status 0 after
// the interrupt, or it was still running after grace and was killed. A
// process already stopped is nil.
func (p *Process) StopClean(grace time.Duration) error {
	var err error
	p.stopOnce.Do(func() {
		select {
		case <-p.done:
			err = fmt.Errorf("%s exited early: %v\n%s", p.name, p.err, p.Output())
			return
		default:
		}
		if e := p.cmd.Process.Signal(os.Interrupt); e != nil {
			err = fmt.Errorf("signal %s: %w", p.name, e)
		}
		select {
		case <-p.done:
			if p.err != nil {
				err = fmt.Errorf("%s did not exit cleanly after SIGINT: %v\n%s", p.name, p.err, p.Output())
			}
		case <-time.After(grace):
			_ = p.cmd.Process.Kill()
			<-p.done
			err = fmt.Errorf("%s did not exit within %s of SIGINT; killed\n%s", p.name, grace, p.Output())
		}
	})
	return err
}

// Run runs cmd to its end, or kills it after timeout, and returns its whole
// stdout and stderr; the error names the program and carries the tail of
// its stderr.
func Run(cmd *exec.Cmd, timeout time.Duration) (stdout, stderr string, err error) {
	SeesTree()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		return "", "", fmt.Errorf("start %s: %w", filepath.Base(cmd.Path), err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		err = fmt.Errorf("still running after %s; killed", timeout)
	}
	if err != nil {
		tail := errb.String()
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		err = fmt.Errorf("%s: %w\n%s", filepath.Base(cmd.Path), err, tail)
	}
	return out.String(), errb.String(), err
}

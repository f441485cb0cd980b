package sweeper

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stateWriterEnv makes the test binary a child that writes the file named
// by it in a loop with writeFileAtomic, until killed.
const stateWriterEnv = "SLAPROBE_TEST_STATE_WRITER"

// TestMain lets the test binary serve as that child.
func TestMain(m *testing.M) {
	if path := os.Getenv(stateWriterEnv); path != "" {
		for seq := 1; ; seq++ {
			if err := writeFileAtomic(path, killPayload(seq)); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(3)
			}
			// Tell the parent how far it got, without buffering.
			fmt.Fprintf(os.Stdout, "%d\n", seq)
		}
	}
	os.Exit(m.Run())
}

// killPayload is write number seq: a header, 1 MiB that depends on seq, and
// a trailer, so a torn or mixed file is easy to tell.
func killPayload(seq int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "seq=%d\n", seq)
	line := bytes.Repeat([]byte{byte('a' + seq%26)}, 1023)
	for range 1024 {
		b.Write(line)
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "end=%d\n", seq)
	return b.Bytes()
}

// TestStateFileSurvivesKill9 starts a child process that rewrites a state
// file in a loop, kills it with SIGKILL at a random moment, and checks the
// file is always one complete write: never missing once a write finished,
// never torn, never a mix of two writes.
func TestStateFileSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kills 25 child processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	var lastSeen int
	for round := range 25 {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), stateWriterEnv+"="+path)
		var out bytes.Buffer
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// A random moment: from before the first write to many writes in.
		time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: the child ended with %v, not SIGKILL; output:\n%s", round, err, out.String())
		}
		done := 0
		if f := strings.Fields(out.String()); len(f) > 0 {
			done, _ = strconv.Atoi(f[len(f)-1])
		}

		b, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			if lastSeen > 0 || done > 0 {
				t.Fatalf("round %d: the file is gone after %d completed writes", round, done)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		seq, ok := parseKillPayload(b)
		if !ok {
			t.Fatalf("round %d: the file is torn or mixed (%d bytes, starts %q)", round, len(b), b[:min(len(b), 20)])
		}
		// The file holds the last completed write of this round or the one
		// the kill interrupted after its rename, or an older round's.
		if done > 0 && seq < done {
			t.Fatalf("round %d: the file holds write %d, but write %d had completed", round, seq, done)
		}
		lastSeen = seq
		t.Logf("round %d: killed after %d completed writes; the file holds write %d", round, done, seq)
	}
	// Interrupted writes may leave their temporary files behind; they are
	// never taken for the state.
	left, _ := filepath.Glob(filepath.Join(dir, ".state.json.tmp-*"))
	t.Logf("%d temporary file(s) left by interrupted writes", len(left))
}

func parseKillPayload(b []byte) (int, bool) {
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 || !bytes.HasPrefix(b, []byte("seq=")) {
		return 0, false
	}
	seq, err := strconv.Atoi(string(b[4:nl]))
	if err != nil {
		return 0, false
	}
	return seq, bytes.Equal(b, killPayload(seq))
}

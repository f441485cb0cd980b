package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/slaprobe/slaprobe/test/testproc"
)

// TestMain holds the quiet-cores lock shared for the whole package: its Prometheus, Alertmanager,
// demos and simulators keep the cores busy, so the timing checks of other packages (which take the
// lock exclusive, testproc.Quiet) wait until it is done instead of failing beside it.
func TestMain(m *testing.M) {
	release, err := testproc.HoldShared()
	if err != nil {
		fmt.Fprintln(os.Stderr, "quiet-cores lock:", err)
		os.Exit(1)
	}
	code := m.Run()
	release()
	os.Exit(code)
}

package e2e

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/slaprobe/slaprobe/test/testproc"
)

// parallel is how many of this package's tests run at once unless -test.parallel is given. Its long
// tests (a sweep, paging, a fleet, Prometheus) spend most of their time waiting for scrapes, rule
// evaluations and probes, not computing: run one after the other they took 260 s on 2 cores, for
// 80 s of CPU.
const parallel = 4

// TestMain holds the quiet-cores lock shared for the whole package: its Prometheus, Alertmanager,
// demos and simulators keep the cores busy, so the timing checks of other packages (which take the
// lock exclusive, testproc.Quiet) wait until it is done instead of failing beside it.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(parallel)); err != nil {
			fmt.Fprintln(os.Stderr, "test.parallel:", err)
			os.Exit(2)
		}
	}
	release, err := testproc.HoldShared()
	if err != nil {
		fmt.Fprintln(os.Stderr, "quiet-cores lock:", err)
		os.Exit(1)
	}
	code := m.Run()
	release()
	if slaprobeBuild.dir != "" {
		os.RemoveAll(slaprobeBuild.dir)
	}
	os.Exit(code)
}

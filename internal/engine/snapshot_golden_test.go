package engine

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateSnapshots = flag.Bool("update-snapshots", false, "rewrite testdata/snapshots from what Parse reads now")

// TestParseSnapshotsGolden pins every field Parse fills from every fixture
// page (testdata/*.txt), histograms and notes included, against
// testdata/snapshots/<page>.golden: a change in how any family is read
// shows here even where the field-by-field tests do not look. After a
// deliberate change: go test ./internal/engine/ -run SnapshotsGolden -update-snapshots
func TestParseSnapshotsGolden(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no fixture pages: %v", err)
	}
	for _, page := range pages {
		name := strings.TrimSuffix(filepath.Base(page), ".txt")
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(page)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			s, err := Parse(f)
			got := dumpSnapshot(s, err)
			golden := filepath.Join("testdata", "snapshots", name+".golden")
			if *updateSnapshots {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (write it with -update-snapshots)", err)
			}
			if got != string(want) {
				t.Errorf("Parse(%s) differs from %s:\ngot:\n%s\nwant:\n%s", page, golden, got, want)
			}
		})
	}
}

// dumpSnapshot writes every field of s, one a line, histograms by value.
func dumpSnapshot(s Snapshot, err error) string {
	var b strings.Builder
	if err != nil {
		var ne *NoEngineError
		fmt.Fprintf(&b, "error: %v (ErrNoEngineMetrics: %v, NoEngineError: %v)\n", err, errors.Is(err, ErrNoEngineMetrics), errors.As(err, &ne))
	}
	h := s.Hists
	s.Hists = nil
	scalars := fmt.Sprintf("%+v", s)
	scalars = strings.TrimSuffix(strings.TrimPrefix(scalars, "{"), "}")
	// One field a line: a field starts at a space before "Name:".
	for _, f := range strings.Split(scalars, " ") {
		if i := strings.IndexByte(f, ':'); i > 0 && f[0] >= 'A' && f[0] <= 'Z' && !strings.ContainsAny(f[:i], "[]{}") {
			b.WriteString("\n")
		} else {
			b.WriteString(" ")
		}
		b.WriteString(f)
	}
	fmt.Fprintf(&b, "\nCacheTokensByTier nil: %v, Notes nil: %v\n", s.CacheTokensByTier == nil, s.Notes == nil)
	if h == nil {
		b.WriteString("Hists: nil\n")
		return b.String()
	}
	for _, p := range Phases {
		if x, ok := h.Phase[p]; ok {
			fmt.Fprintf(&b, "Hists.Phase[%s]: %+v\n", p, x)
		}
	}
	fmt.Fprintf(&b, "Hists.Phase: %d phases\n", len(h.Phase))
	for _, x := range []struct {
		name string
		h    *Histogram
	}{{"TTFT", h.TTFT}, {"ITL", h.ITL}, {"KVTransfer", h.KVTransfer}} {
		if x.h == nil {
			fmt.Fprintf(&b, "Hists.%s: nil\n", x.name)
		} else {
			fmt.Fprintf(&b, "Hists.%s: %+v\n", x.name, *x.h)
		}
	}
	return b.String()
}

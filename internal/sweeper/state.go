package sweeper

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/slaprobe/slaprobe/internal/compare"
	"github.com/slaprobe/slaprobe/internal/report"
)

// stateVersion is the shape of the state file; a file of another version
// is ignored (with a warning) rather than misread. Version 2 keeps each
// target's result in the report schema (report.json's), the one schema
// slaprobe persists; version 1 kept the prober's own result type.
const stateVersion = 2

// state is what the daemon keeps across restarts.
type state struct {
	Version int `json:"version"`
	// LastScheduled is when the last scheduled sweep started; the schedule
	// counts its interval (and its once-per-window rule) from it.
	LastScheduled time.Time               `json:"last_scheduled,omitempty"`
	Targets       map[string]*targetState `json:"targets"`
}

// targetState is one target's latest results.
type targetState struct {
	// Result is the latest complete sweep, or the latest partial one when
	// no sweep of this target ever completed.
	Result *report.Report `json:"result,omitempty"`
	// Previous is the complete sweep before Result: the daemon's report
	// page and the change metrics compare Result with it. Absent until a
	// second sweep completed (and in files written before it was kept).
	Previous *report.Report `json:"previous,omitempty"`
	// LastAttempt describes the most recent sweep, complete or not.
	LastAttempt Attempt `json:"last_attempt"`

	// compared is Result drawn against Previous, computed once per result.
	compared *report.Report
}

// setResult makes rep the target's result. A complete sweep that replaces
// a complete one keeps that one as Previous; a partial result never
// becomes Previous.
func (ts *targetState) setResult(rep *report.Report) {
	if ts.Result != nil && !ts.Result.Meta.Interrupted && rep != ts.Result {
		ts.Previous = ts.Result
	}
	ts.Result, ts.compared = rep, nil
}

// shown is the result the daemon shows and exports: Result compared with
// Previous when there is one (package compare), else Result. The caller
// holds the sweeper's lock.
func (ts *targetState) shown() *report.Report {
	if ts.Result == nil || ts.Previous == nil {
		return ts.Result
	}
	if ts.compared == nil {
		label := "the previous sweep"
		if t := ts.Previous.Meta.StartedAt; !t.IsZero() {
			label += " (" + t.UTC().Format("2006-01-02 15:04 MST") + ")"
		}
		ts.compared = compare.Compare(ts.Previous, ts.Result, compare.Options{BaseLabel: label})
	}
	return ts.compared
}

// Attempt is the outcome of one sweep of one target.
type Attempt struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Trigger  string    `json:"trigger"` // "schedule" or "request"
	Complete bool      `json:"complete"`
	Error    string    `json:"error,omitempty"`
}

func newState() *state {
	return &state{Version: stateVersion, Targets: map[string]*targetState{}}
}

// loadState reads the state file; a missing file is an empty state.
func loadState(path string) (*state, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return newState(), nil
	}
	if err != nil {
		return newState(), fmt.Errorf("read sweep state: %w", err)
	}
	st := newState()
	if err := json.Unmarshal(b, st); err != nil {
		return newState(), fmt.Errorf("sweep state %s: %w", path, err)
	}
	if st.Version != stateVersion {
		return newState(), fmt.Errorf("sweep state %s: version %d; this slaprobe reads version %d", path, st.Version, stateVersion)
	}
	if st.Targets == nil {
		st.Targets = map[string]*targetState{}
	}
	return st, nil
}

// save writes the state atomically: a temporary file in the same
// directory, fsync, rename over the old file, fsync of the directory. A
// crash leaves either the old file or the new one, never half of one.
func (st *state) save(path string) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode sweep state: %w", err)
	}
	return writeFileAtomic(path, append(b, '\n'))
}

func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		_ = f.Close()
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	// Make the rename itself durable.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

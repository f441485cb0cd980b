package compare

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/slaprobe/slaprobe/internal/report"
)

// LoadReport reads a report.json, or the report.json inside a directory.
// Its errors name the file, what was found and what was expected.
func LoadReport(path string) (*report.Report, error) {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: no such file or directory; expected a report.json or a directory holding one", path)
		}
		return nil, err
	}
	file := path
	if fi.IsDir() {
		file = filepath.Join(path, report.JSONFile)
		if _, err := os.Stat(file); err != nil {
			return nil, fmt.Errorf("%s: directory has no %s; expected the --out directory of slaprobe bench or compare", path, report.JSONFile)
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var probe struct {
		SchemaVersion *string `json:"schema_version"`
	}
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&probe); err != nil {
		return nil, fmt.Errorf("%s: not a slaprobe report (not JSON: %v); expected the report.json of slaprobe bench", file, err)
	}
	if probe.SchemaVersion == nil {
		return nil, fmt.Errorf("%s: not a slaprobe report (no schema_version field); expected the report.json of slaprobe bench", file)
	}
	if v := *probe.SchemaVersion; v != report.SchemaVersion && v != report.SchemaVersionV1 {
		return nil, fmt.Errorf("%s: schema_version=%q is not supported; expected %q or %q", file, v, report.SchemaVersion, report.SchemaVersionV1)
	}
	return report.Load(file)
}

// WriteReport writes a comparison (Compare's result) into dir as
// report.json, report.md and report.html (report.Write).
func WriteReport(dir string, r *report.Report) ([]string, error) {
	return report.Write(dir, r)
}

// Summarize prints a comparison's verdict for a terminal: the significant
// regressions first, then the improvements, in one line each.
func Summarize(w io.Writer, c *report.Comparison) {
	var worse, better []report.Finding
	for _, f := range c.Findings() {
		if f.Worse {
			worse = append(worse, f)
		} else {
			better = append(better, f)
		}
	}
	if !c.Confidence {
		fmt.Fprintln(w, "no confidence available: a report has no raw samples, so changes were compared on summaries only")
	}
	for _, d := range c.Differences {
		fmt.Fprintf(w, "note: %s\n", d)
	}
	fmt.Fprintf(w, "compared with %s: %d significant regression(s), %d significant improvement(s)\n", c.BaseLabel, len(worse), len(better))
	for _, f := range worse {
		fmt.Fprintf(w, "  worse:  %s\n", report.FindingText(f))
	}
	for _, f := range better {
		fmt.Fprintf(w, "  better: %s\n", report.FindingText(f))
	}
}

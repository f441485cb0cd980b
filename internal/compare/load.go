package compare

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/report/render"
	"github.com/slaprobe/slaprobe/internal/sweep"
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
// report.json, report.md and report.html (render.Write).
func WriteReport(dir string, r *report.Report) ([]string, error) {
	return render.Write(dir, r)
}

// WriteSummary prints a comparison's verdict for a terminal: the significant
// regressions first, then the improvements, in one line each.
func WriteSummary(w io.Writer, c *report.Comparison) {
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
	if c.Headroom != nil && !c.Headroom.Significant() {
		fmt.Fprintln(w, "  "+render.HeadroomChangeText(c.Headroom))
	}
	for _, f := range worse {
		fmt.Fprintf(w, "  worse:  %s\n", render.FindingText(f))
	}
	for _, f := range better {
		fmt.Fprintf(w, "  better: %s\n", render.FindingText(f))
	}
	tooFew := 0
	for _, s := range c.Steps {
		for _, mc := range s.Metrics {
			if mc.NeededPerRun > 0 {
				tooFew++
			}
		}
	}
	if tooFew > 0 {
		fmt.Fprintf(w, "%d figures got no verdict: their burst rounds, slices or requests are too few for the report's level (each figure's note in report.json says how many would give one)\n", tooFew)
	}
	if m := c.Method; m.Figures > 0 {
		var det []float64
		for _, s := range c.Steps {
			for _, mc := range s.Metrics {
				if mc.Detectable != nil {
					det = append(det, *mc.Detectable)
				}
			}
		}
		fmt.Fprintf(w, "%d figures judged together at %s (each interval at %s), so two runs of an unchanged server get any figure flagged with a probability of at most %s\n",
			m.Figures, pct(m.Level), pctFine(m.FigureLevel), pct(1-m.Level))
		if len(det) > 0 {
			slices.Sort(det)
			fmt.Fprintf(w, "%d with no detectable change: each would have seen a change of %s to %s (median %s) or more; run longer to see smaller ones\n",
				len(det), pct(det[0]), pct(det[len(det)-1]), pct(sweep.Median(det)))
		}
	}
}

func pct(r float64) string { return strconv.FormatFloat(100*r, 'f', 1, 64) + "%" }
func pctFine(r float64) string {
	return strconv.FormatFloat(math.Round(r*100_000)/1000, 'f', -1, 64) + "%"
}

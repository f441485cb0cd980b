package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// File names Write produces inside its directory.
const (
	JSONFile     = "report.json"
	MarkdownFile = "report.md"
	HTMLFile     = "report.html"
)

// Write renders r into dir (created if needed) as report.json, report.md
// and report.html, and returns their paths in that order. Each file is
// written to a temporary name and renamed, so a reader never sees half a
// report. r is not modified: the schema version is stamped, the target URL
// redacted and an empty Headline computed on a copy.
//
// Partial reports (an interrupted run, a mode that was not run) are fine;
// only structural problems (see Validate) are errors. On an error the files
// already written are returned with it.
func Write(dir string, r *Report) ([]string, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("write report: %w", err)
	}
	rr := prepared(r)
	var paths []string
	for _, f := range []struct {
		name   string
		render func(io.Writer, *Report) error
	}{
		{JSONFile, RenderJSON},
		{MarkdownFile, RenderMarkdown},
		{HTMLFile, RenderHTML},
	} {
		var buf bytes.Buffer
		if err := f.render(&buf, rr); err != nil {
			return paths, fmt.Errorf("render %s: %w", f.name, err)
		}
		path := filepath.Join(dir, f.name)
		if err := writeAtomic(path, buf.Bytes()); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// RenderJSON writes report.json: two-space indent, fields in struct order,
// maps sorted by key, so identical reports give identical bytes.
func RenderJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(prepared(r))
}

// prepared returns r ready to render: version stamped, URL redacted,
// headline computed when the caller left it empty. It copies only what it
// changes.
func prepared(r *Report) *Report {
	if r == nil {
		r = &Report{}
	}
	rr := *r
	rr.SchemaVersion = SchemaVersion
	rr.Meta.TargetURL = RedactURL(r.Meta.TargetURL)
	if rr.Headline.empty() {
		rr.Headline = ComputeHeadline(&rr)
	}
	return &rr
}

func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

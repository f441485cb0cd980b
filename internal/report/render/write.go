package render

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/slaprobe/slaprobe/internal/report"
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
func Write(dir string, r *report.Report) ([]string, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("write report: %w", err)
	}
	rr := report.Prepared(r)
	var paths []string
	for _, f := range []struct {
		name   string
		render func(io.Writer, *report.Report) error
	}{
		{report.JSONFile, report.RenderJSON},
		{report.MarkdownFile, RenderMarkdown},
		{report.HTMLFile, RenderHTML},
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

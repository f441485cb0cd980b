package report

import (
	"encoding/json"
	"io"
)

// File names of a report's directory (render.Write writes all three).
const (
	JSONFile     = "report.json"
	MarkdownFile = "report.md"
	HTMLFile     = "report.html"
)

// RenderJSON writes report.json: two-space indent, fields in struct order,
// maps sorted by key, so identical reports give identical bytes.
func RenderJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(Prepared(r))
}

// Prepared returns r ready to render: version stamped, URL redacted,
// headline computed when the caller left it empty. It copies only what it
// changes.
func Prepared(r *Report) *Report {
	if r == nil {
		r = &Report{}
	}
	rr := *r
	rr.SchemaVersion = SchemaVersion
	rr.Meta.TargetURL = RedactURL(r.Meta.TargetURL)
	if rr.Headline.Empty() {
		rr.Headline = ComputeHeadline(&rr)
	}
	return &rr
}

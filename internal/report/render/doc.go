// Package render draws a benchmark report (internal/report's data) as
// report.md and a self-contained report.html whose charts are inline SVG
// drawn here (internal/svgchart), so the page opens on an air-gapped
// cluster. Write writes report.json, report.md and report.html together.
package render

package render

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/slaprobe/slaprobe/internal/report"
)

// mdEscape makes a user-provided string safe inside Markdown text and table
// cells: no raw HTML, no column breaks, no line breaks, no link syntax.
var mdEscaper = strings.NewReplacer(
	"\\", "\\\\", "|", "\\|", "`", "\\`", "*", "\\*", "[", "\\[", "]", "\\]",
	"<", "&lt;", ">", "&gt;", "&", "&amp;", "\r", " ", "\n", " ",
)

func mdEscape(s string) string { return mdEscaper.Replace(s) }

// RenderMarkdown writes report.md: the headline, capacity, throughput and
// every step in tables. "~" marks interpolated values, "+" lower bounds.
func RenderMarkdown(w io.Writer, r *report.Report) error {
	r = report.Prepared(r)
	bw := bufio.NewWriter(w)
	p := func(format string, a ...any) { fmt.Fprintf(bw, format, a...) }

	p("# %s\n\n", mdEscape(reportTitle(r)))
	for _, m := range metaRows(r) {
		p("- **%s:** %s\n", m.K, mdEscape(m.V))
	}
	p("- **Schema:** %s\n\n", report.SchemaVersion)
	if r.Meta.Interrupted {
		p("> This run was interrupted: the report holds only the steps measured before it stopped.\n\n")
	}
	for _, n := range append(append([]string(nil), r.Notes...), summarizeDrain(r).notes()...) {
		p("> %s\n\n", mdEscape(n))
	}

	if v := buildCompareView(r); v != nil {
		p("## What changed since %s?\n\n", mdEscape(v.BaseLabel))
		for _, m := range v.Base {
			p("- **%s:** %s\n", m.K, mdEscape(m.V))
		}
		p("\n")
		for _, d := range v.Differences {
			p("> %s\n\n", mdEscape(d))
		}
		p("### Significant regressions\n\n")
		list := func(items []string, none string) {
			if len(items) == 0 {
				p("%s\n\n", none)
				return
			}
			for _, it := range items {
				p("- %s\n", mdEscape(it))
			}
			p("\n")
		}
		list(v.Regressions, "None: nothing got significantly worse.")
		p("### Significant improvements\n\n")
		list(v.Improvements, "None.")
		p("%s\n\n", mdEscape(v.Counts))
		if !isHeadroomOnly(r) {
			p("%s\n\n", mdEscape(sentence(compareMethod(r.Comparison).V)))
		}
	}

	if isHeadroomOnly(r) {
		markdownHeadroom(bw, r)
		return bw.Flush()
	}
	p("## Headline\n\n")
	var rows [][]string
	compared := r.Comparison != nil
	for _, t := range headlineTiles(r) {
		detail := t.Sub
		if t.Extra != "" {
			detail = strings.TrimSpace(detail + "; " + t.Extra)
		}
		row := []string{t.Label, strings.TrimSpace(t.Value + " " + t.Unit), detail}
		if compared {
			row = append(row, orDash(t.Change))
		}
		rows = append(rows, row)
	}
	switch {
	case len(rows) == 0:
		p("No step completed a request: there is no figure to give (the notes under each scenario say why).\n\n")
	case compared:
		mdTable(bw, []string{"metric", "value", "where", "change vs base"}, []bool{false, true, false, false}, rows)
	default:
		mdTable(bw, []string{"metric", "value", "where"}, []bool{false, true, false}, rows)
	}

	if len(r.Capacity.UseCases) > 0 {
		p("## Use-case capacity\n\n")
		t := useCaseTable(r)
		mdTable(bw, t.Head, t.Numeric, t.Rows)
		for _, u := range r.Capacity.UseCases {
			if len(u.Limits) == 0 {
				continue
			}
			var parts []string
			for _, l := range u.Limits {
				parts = append(parts, fmt.Sprintf("%s (%s): %s", limitText(l.Kind, l.Threshold), l.Stat, fmtBound(l.Bound)))
			}
			p("- %s: %s\n", mdEscape(u.Scenario), mdEscape(strings.Join(parts, "; ")))
		}
		p("\n")
	}

	if len(r.Capacity.On) > 0 {
		p("## Capacity on goodput and percentiles\n\n")
		t := capacityOnTable(r)
		mdTable(bw, t.Head, t.Numeric, t.Rows)
	}

	if len(r.Capacity.Conversations) > 0 {
		p("## Capacity in concurrent conversations\n\n")
		t := conversationTable(r)
		mdTable(bw, t.Head, t.Numeric, t.Rows)
		for _, c := range r.Capacity.Conversations {
			p("%s\n\n", mdEscape(ConversationSentence(c)))
		}
		if t := conversationStepsTable(r); len(t.Rows) > 0 {
			p("### Follow-ups by concurrent conversations\n\n")
			mdTable(bw, t.Head, t.Numeric, t.Rows)
		}
	}

	if len(r.Capacity.MaxSafeQueue) > 0 {
		p("## Max safe queue depth\n\n")
		var rows [][]string
		head := []string{"scenario", "max safe queue", "threshold", "burst tested up to"}
		numeric := []bool{false, true, false, true}
		if compared {
			head, numeric = append(head, "change vs base"), append(numeric, false)
		}
		for _, q := range r.Capacity.MaxSafeQueue {
			row := []string{q.Scenario, fmtBound(q.Bound), fmt.Sprintf("TTFT %s ≤ %s", q.Stat, fmtSecondsShort(q.ThresholdSeconds)), fmt.Sprintf("N=%d", q.MaxTested)}
			if compared {
				row = append(row, orDash(capacityChangeText(r.Comparison.CapacityOf(report.CapacityMaxSafeQueue, q.Scenario))))
			}
			rows = append(rows, row)
		}
		mdTable(bw, head, numeric, rows)
	}

	idx := chartScenarios(r)
	if t := tokensPerHourTable(r, idx); len(t.Rows) > 0 {
		p("## Tokens per hour\n\nSystem throughput × 3,600 per closed-loop N, and the best closed-loop step (a burst, marked as such, only where no closed loop ran).\n\n")
		mdTable(bw, t.Head, t.Numeric, t.Rows)
	}

	for _, e := range appendix(r) {
		p("## Scenario %s\n\n%s\n\n", mdEscape(e.Name), mdEscape(e.Info))
		for _, n := range e.Notes {
			p("> %s\n\n", mdEscape(n))
		}
		for _, t := range e.Tables {
			p("### %s\n\n", t.Caption)
			mdTable(bw, t.MDHead, t.Numeric, t.Rows)
		}
	}
	p("---\nGenerated by slaprobe %s, finished %s. Times in seconds unless the column says ms. \"~\": interpolated between measured points; \"+\": every tested N passed.\n",
		mdEscape(r.Meta.ToolVersion), r.Meta.FinishedAt.UTC().Format(time.RFC3339))
	return bw.Flush()
}

func mdTable(w io.Writer, head []string, numeric []bool, rows [][]string) {
	cells := func(v []string) string {
		e := make([]string, len(v))
		for i, s := range v {
			e[i] = mdEscape(s)
		}
		return "| " + strings.Join(e, " | ") + " |\n"
	}
	io.WriteString(w, cells(head))
	sep := make([]string, len(head))
	for i := range head {
		sep[i] = "---"
		if i < len(numeric) && numeric[i] {
			sep[i] = "---:"
		}
	}
	io.WriteString(w, "|"+strings.Join(sep, "|")+"|\n")
	for _, r := range rows {
		io.WriteString(w, cells(r))
	}
	io.WriteString(w, "\n")
}

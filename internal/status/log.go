package status

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
)

// Handler wraps the daemon's log handler: every record goes to inner as
// before, and a record that names a target (the `target` attribute, set by
// the scheduler and the prober) is also kept by the Recorder, with the
// probe of its scenario when there is one. Debug records are kept too, even
// when inner drops them, so the probe view shows each probe's outcome line
// whatever --log.level says.
func (r *Recorder) Handler(inner slog.Handler) slog.Handler {
	return &teeHandler{rec: r, inner: inner}
}

type teeHandler struct {
	rec   *Recorder
	inner slog.Handler
	// attrs are those added by WithAttrs outside any group, rendered;
	// target and scenario are pulled out of them.
	attrs            []slog.Attr
	target, scenario string
	group            string // prefix of WithGroup, "" at top level
}

func (h *teeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelDebug || h.inner.Enabled(ctx, l)
}

func (h *teeHandler) Handle(ctx context.Context, rec slog.Record) error {
	var err error
	if h.inner.Enabled(ctx, rec.Level) {
		err = h.inner.Handle(ctx, rec)
	}
	target, scenario := h.target, h.scenario
	if h.group == "" {
		rec.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "target":
				target = a.Value.String()
			case "scenario":
				scenario = a.Value.String()
			}
			return true
		})
	}
	if target == "" || !h.rec.keeps(target) {
		return err
	}
	var b strings.Builder
	b.WriteString(rec.Message)
	write := func(prefix string, a slog.Attr) {
		if a.Key == "" || (prefix == "" && (a.Key == "target" || a.Key == "scenario")) {
			return
		}
		b.WriteByte(' ')
		b.WriteString(prefix + a.Key)
		b.WriteByte('=')
		b.WriteString(logValue(a.Value))
	}
	for _, a := range h.attrs {
		write("", a)
	}
	prefix := ""
	if h.group != "" {
		prefix = h.group + "."
	}
	rec.Attrs(func(a slog.Attr) bool { write(prefix, a); return true })
	h.rec.addLog(target, scenario, LogLine{Time: rec.Time, Level: rec.Level.String(), Text: b.String()})
	return err
}

func (h *teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.inner = h.inner.WithAttrs(as)
	if h.group != "" {
		return &c // grouped attributes are not ours to read
	}
	c.attrs = append([]slog.Attr(nil), h.attrs...)
	for _, a := range as {
		switch a.Key {
		case "target":
			c.target = a.Value.String()
		case "scenario":
			c.scenario = a.Value.String()
		default:
			c.attrs = append(c.attrs, a)
		}
	}
	return &c
}

func (h *teeHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.inner = h.inner.WithGroup(name)
	if name != "" {
		if c.group != "" {
			c.group += "."
		}
		c.group += name
	}
	return &c
}

// logValue renders v as logfmt does: quoted when it has spaces, quotes or
// is empty.
func logValue(v slog.Value) string {
	s := v.Resolve().String()
	if s == "" || strings.ContainsAny(s, " \t\n\"=") {
		return strconv.Quote(s)
	}
	return s
}

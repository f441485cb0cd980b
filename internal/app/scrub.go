package app

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/slaprobe/slaprobe/internal/config"
)

// scrubHandler hides the current config's secrets, and the user information
// of any URL, in every log record: the message and each attribute
// (config.Config.Scrub). The config never logs
// one itself; an error a server answered may echo a credential slaprobe
// sent it, and such errors are logged.
type scrubHandler struct {
	inner slog.Handler
	cfg   *atomic.Pointer[func() *config.Config]
}

func newScrubHandler(inner slog.Handler) *scrubHandler {
	return &scrubHandler{inner: inner, cfg: &atomic.Pointer[func() *config.Config]{}}
}

// follow makes the handler scrub with the config get returns.
func (h *scrubHandler) follow(get func() *config.Config) { h.cfg.Store(&get) }

func (h *scrubHandler) current() *config.Config {
	if f := h.cfg.Load(); f != nil {
		return (*f)()
	}
	return nil
}

func (h *scrubHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *scrubHandler) Handle(ctx context.Context, rec slog.Record) error {
	c := h.current() // nil before the config is loaded: URLs are scrubbed still
	out := slog.NewRecord(rec.Time, rec.Level, c.Scrub(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(scrubAttr(c, a))
		return true
	})
	return h.inner.Handle(ctx, out)
}

func (h *scrubHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := h.current()
	scrubbed := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		scrubbed[i] = scrubAttr(c, a)
	}
	attrs = scrubbed
	return &scrubHandler{inner: h.inner.WithAttrs(attrs), cfg: h.cfg}
}

func (h *scrubHandler) WithGroup(name string) slog.Handler {
	return &scrubHandler{inner: h.inner.WithGroup(name), cfg: h.cfg}
}

// scrubAttr returns a with the secrets in its value hidden; a value that
// holds none is kept as it is (an error stays an error).
func scrubAttr(c *config.Config, a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, c.Scrub(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]any, len(g))
		for i, x := range g {
			out[i] = scrubAttr(c, x)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		var text string
		if err, ok := v.Any().(error); ok {
			text = err.Error()
		} else {
			text = fmt.Sprintf("%+v", v.Any())
		}
		if s := c.Scrub(text); s != text {
			return slog.String(a.Key, s)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

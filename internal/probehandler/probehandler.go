// Package probehandler serves /probe?target=…&scenario=…: one probe per
// request, run while Prometheus waits, its result on a registry of its own,
// the way the blackbox exporter works. A Prometheus with its own service
// discovery then drives probes of as many replicas as it finds; the
// calibration of each replica, model and scenario is kept across requests
// by the long-lived prober.
package probehandler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/prober"
)

// Runner prepares (calibrates, cached) and runs probes; *prober.Prober is
// one.
type Runner interface {
	Prepare(ctx context.Context, t prober.Target, model string, s prober.Scenario) (*prober.Prepared, error)
	Run(ctx context.Context, t prober.Target, prep *prober.Prepared) prober.Result
}

// Options are the handler's dependencies.
type Options struct {
	Runner Runner
	// Config returns the current config (targets, scenarios, the probe
	// section); it is read on every request, so reloads apply at once.
	Config func() *config.Config
	// Logger; nil discards. Each request's lines also go to ?debug=true.
	Logger *slog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// CalibrationTimeout bounds a calibration, which goes on after a
	// request that timed out waiting for it, so that the next scrape finds
	// it cached (default 5m).
	CalibrationTimeout time.Duration
}

// Handler serves /probe.
type Handler struct{ opts Options }

// New returns the /probe handler.
func New(opts Options) *Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.CalibrationTimeout <= 0 {
		opts.CalibrationTimeout = 5 * time.Minute
	}
	return &Handler{opts: opts}
}

// scrapeTimeoutHeader is where Prometheus says how long it waits.
const scrapeTimeoutHeader = "X-Prometheus-Scrape-Timeout-Seconds"

// ServeHTTP runs one probe and answers its metrics.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	debug := q.Get("debug") == "true"
	var logBuf bytes.Buffer
	logger := slog.New(teeHandler{h.opts.Logger.Handler(), slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug})}).
		With("target", q.Get("target"), "scenario", q.Get("scenario"))

	cfg := h.opts.Config()
	target, scenario, err := cfg.ProbeTarget(q.Get("target"), q.Get("scenario"))
	if err != nil {
		logger.Debug("bad probe request", "err", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	defer target.Client.CloseIdleConnections()

	timeout, err := h.timeout(r, cfg, scenario)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()

	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	start := h.opts.Now()
	logger.Debug("probe starting", "url", target.BaseURL, "timeout", timeout)
	res := h.probe(ctx, logger, target, scenario, m)
	m.observe(&res, h.opts.Now().Sub(start))
	logResult(logger, &res)

	if debug {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "Logs for the probe:\n%s\n\nMetrics that would have been returned:\n", cfg.Scrub(logBuf.String()))
		mfs, err := reg.Gather()
		if err != nil {
			fmt.Fprintf(w, "# gather: %v\n", err)
		}
		for _, mf := range mfs {
			if _, err := expfmt.MetricFamilyToText(w, mf); err != nil {
				fmt.Fprintf(w, "# write: %v\n", err)
			}
		}
		return
	}
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true}).ServeHTTP(w, r)
}

// timeout is the scrape timeout Prometheus sent minus probe.timeout_offset,
// capped by the scenario's own timeout.
func (h *Handler) timeout(r *http.Request, cfg *config.Config, s prober.Scenario) (time.Duration, error) {
	timeout := s.Timeout
	v := r.Header.Get(scrapeTimeoutHeader)
	if v == "" {
		return timeout, nil
	}
	secs, err := config.ParseScrapeTimeout(v) // finite, > 0, at most a day
	if err != nil {
		return 0, err
	}
	d := time.Duration(secs*float64(time.Second)) - time.Duration(cfg.Probe.TimeoutOffset)
	if d <= 0 {
		// Leave the probe a little time rather than none.
		d = time.Duration(secs * float64(time.Second) / 2)
	}
	if timeout <= 0 || d < timeout {
		timeout = d
	}
	return timeout, nil
}

// probe calibrates (or finds the calibration cached) and runs the probe. A
// calibration outlives a request that stops waiting for it, so that the
// next request can use it: a large scenario may need longer than one
// scrape timeout to size its prompt.
func (h *Handler) probe(ctx context.Context, logger *slog.Logger, t prober.Target, s prober.Scenario, m *metrics) prober.Result {
	type prepared struct {
		prep *prober.Prepared
		err  error
	}
	calCtx, calCancel := context.WithTimeout(context.WithoutCancel(ctx), h.opts.CalibrationTimeout)
	done := make(chan prepared, 1)
	calStart := h.opts.Now()
	go func() {
		defer calCancel()
		p, err := h.opts.Runner.Prepare(calCtx, t, t.Model, s)
		done <- prepared{p, err}
	}()
	var p prepared
	select {
	case p = <-done:
	case <-ctx.Done():
		logger.Debug("still calibrating when the probe's time ran out; the calibration goes on and is cached for the next request",
			"waited", h.opts.Now().Sub(calStart))
		return prober.Result{Target: t.Name, Model: t.Model, Scenario: s.Name, API: s.APIOn(t), RequestedTokens: s.OutputTokens,
			Start: calStart, Kind: prober.KindError, Reason: prober.ReasonTimeout,
			Err: fmt.Errorf("calibration not finished within the probe's timeout: %w", ctx.Err())}
	}
	calTime := h.opts.Now().Sub(calStart)
	m.setCalibration(calTime)
	if p.err != nil {
		reason := prober.ReasonCalibration
		var re *prober.ReasonError
		var he *prober.HTTPError
		switch {
		case errors.As(p.err, &re):
			reason = re.Reason
		case errors.As(p.err, &he):
			reason = he.Reason()
		}
		logger.Debug("calibration failed", "reason", reason, "err", p.err)
		return prober.Result{Target: t.Name, Model: t.Model, Scenario: s.Name, API: s.APIOn(t), RequestedTokens: s.OutputTokens,
			Start: calStart, Kind: prober.KindError, Reason: reason, Err: p.err}
	}
	logger.Debug("prompt calibrated", "model", p.prep.Model, "method", p.prep.Method,
		"prompt_tokens", p.prep.PromptTokens, "words", p.prep.Words, "max_model_len", p.prep.MaxModelLen,
		"took", calTime)
	// Its span says it is a /probe request: it waits for no engine span,
	// and is exported at tracing.sweep_export_ratio.
	return h.opts.Runner.Run(prober.WithRequestKind(ctx, prober.RequestProbe), t, p.prep)
}

func logResult(logger *slog.Logger, r *prober.Result) {
	if r.Kind == prober.KindError {
		logger.Info("probe failed", "model", r.Model, "reason", r.Reason, "err", r.Err)
		return
	}
	args := []any{"model", r.Model, "result", r.Kind, "prompt_tokens", r.PromptTokens,
		"output_tokens", r.OutputTokens, "requested_tokens", r.RequestedTokens, "response_id", r.ResponseID}
	if r.Kind == prober.KindSuccess {
		args = append(args, "ttft", r.TTFT(), "itl", r.ITL(), "decode_tokens_per_second", r.DecodeSpeed(),
			"e2e", r.E2E(), "cache_hit", r.CacheHit())
	}
	logger.Debug("probe finished", args...)
}

// teeHandler sends each record to two handlers: the daemon's log (at its
// level) and the request's debug buffer (everything).
type teeHandler struct{ a, b slog.Handler }

func (t teeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return t.a.Enabled(ctx, l) || t.b.Enabled(ctx, l)
}

func (t teeHandler) Handle(ctx context.Context, r slog.Record) error {
	var errs []error
	if t.a.Enabled(ctx, r.Level) {
		errs = append(errs, t.a.Handle(ctx, r.Clone()))
	}
	if t.b.Enabled(ctx, r.Level) {
		errs = append(errs, t.b.Handle(ctx, r))
	}
	return errors.Join(errs...)
}

func (t teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return teeHandler{t.a.WithAttrs(as), t.b.WithAttrs(as)}
}

func (t teeHandler) WithGroup(name string) slog.Handler {
	return teeHandler{t.a.WithGroup(name), t.b.WithGroup(name)}
}

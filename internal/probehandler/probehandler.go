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
	"strconv"
	"sync"
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

// SlotFunc takes one of the in-flight slots the scheduler keeps for the
// configured target named target, waiting until ctx ends
// (prober.Scheduler.TrySlot). known is false when the scheduler has no such
// target (or none runs): /probe then keeps a slot of its own for it.
type SlotFunc func(ctx context.Context, target string) (release func(), ok, known bool)

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
	// Slot takes a configured target's in-flight slot from the running
	// scheduler; nil: /probe keeps slots of its own for every target, of
	// global.max_in_flight_per_target each.
	Slot SlotFunc
	// Holds, when set, refuses a probe of a target a sweep holds (503).
	Holds *prober.Holds
}

// Handler serves /probe.
type Handler struct {
	opts    Options
	refused *prometheus.CounterVec

	mu       sync.Mutex
	running  int                      // requests admitted and not yet done (with calibrations they left)
	slots    map[string]chan struct{} // /probe's own slots per base URL; only those in use
	slotRefs map[string]int
	calls    map[calKey]*calCall // calibrations in flight: one per target and scenario
	calAsked int                 // requests that asked for a calibration, started or joined (for tests)
}

// Reasons a request is refused besides config.ProbeRefusalReasons.
const (
	refusedTimeoutHeader = "timeout_header" // a bad X-Prometheus-Scrape-Timeout-Seconds (400)
	refusedConcurrency   = "concurrency"    // probe.max_concurrent requests already running (429)
	refusedTargetBusy    = "target_busy"    // no in-flight slot of the target freed in time (429)
	refusedHeld          = "held"           // a sweep holds the target (503)
)

// RefusalReasons lists every reason label of
// slaprobe_probe_requests_refused_total.
func RefusalReasons() []string {
	return append(append([]string(nil), config.ProbeRefusalReasons...),
		refusedTimeoutHeader, refusedConcurrency, refusedTargetBusy, refusedHeld)
}

// New returns the /probe handler.
func New(opts Options) *Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	h := &Handler{opts: opts, slots: map[string]chan struct{}{}, slotRefs: map[string]int{}, calls: map[calKey]*calCall{},
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "slaprobe", Name: "probe_requests_refused_total",
			Help: "/probe requests answered without a probe, by reason: malformed (400), not allowed (403), over probe.max_concurrent or the target's in-flight limit (429), target held by a sweep (503).",
		}, []string{"reason"})}
	for _, r := range RefusalReasons() {
		h.refused.WithLabelValues(r)
	}
	return h
}

// Collector is slaprobe_probe_requests_refused_total, for the daemon's
// registry.
func (h *Handler) Collector() prometheus.Collector { return h.refused }

// refuse answers a request without probing and counts it; nothing else is
// kept of it.
func (h *Handler) refuse(w http.ResponseWriter, status int, reason, msg string, retryAfter time.Duration) {
	h.refused.WithLabelValues(reason).Inc()
	h.opts.Logger.Debug("probe request refused", "reason", reason, "status", status)
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(max(time.Second, retryAfter).Seconds())))
	}
	http.Error(w, msg, status)
}

// scrapeTimeoutHeader is where Prometheus says how long it waits.
const scrapeTimeoutHeader = "X-Prometheus-Scrape-Timeout-Seconds"

// heldRetryAfter is the Retry-After of a probe refused because a sweep
// holds its target.
const heldRetryAfter = time.Minute

// ServeHTTP runs one probe and answers its metrics.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	debug := q.Get("debug") == "true"
	cfg := h.opts.Config()
	target, scenario, err := cfg.ProbeTarget(q.Get("target"), q.Get("scenario"))
	if err != nil {
		var pr *config.ProbeRefusal
		if errors.As(err, &pr) {
			h.refuse(w, pr.Status, pr.Reason, pr.Msg, 0)
		} else {
			h.refuse(w, http.StatusBadRequest, config.RefusedMalformed, err.Error(), 0)
		}
		return
	}
	defer target.Client.CloseIdleConnections()

	timeout, err := h.timeout(r, cfg, scenario)
	if err != nil {
		h.refuse(w, http.StatusBadRequest, refusedTimeoutHeader, err.Error(), 0)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()

	l, status, reason, msg := h.admit(ctx, cfg, target)
	if l == nil {
		retry := time.Second
		if reason == refusedHeld {
			retry = heldRetryAfter
		}
		h.refuse(w, status, reason, msg, retry)
		return
	}
	defer l.done()

	var logBuf bytes.Buffer
	logger := slog.New(teeHandler{h.opts.Logger.Handler(), slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug})}).
		With("target", target.Name, "scenario", scenario.Name)
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	start := h.opts.Now()
	logger.Debug("probe starting", "url", target.BaseURL, "timeout", timeout)
	res := h.probe(ctx, logger, target, scenario, m, l, timeout)
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
	if err == nil && secs > maxScrapeTimeout.Seconds() {
		err = fmt.Errorf("header %s=%.40q; expected a number of seconds above 0 and at most %.0f", scrapeTimeoutHeader, v, maxScrapeTimeout.Seconds())
	}
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

// maxScrapeTimeout bounds the scrape timeout a request may announce.
const maxScrapeTimeout = time.Hour

// probe calibrates (or finds the calibration cached) and runs the probe.
// One calibration runs per target and scenario, shared by the requests
// that want it. It may outlive the request that started it by at most
// timeout, so that the next scrape finds it cached (a large scenario may
// need longer than one scrape to size its prompt); it keeps that request's
// admission (l) until it ends, so what /probe runs stays within its caps.
func (h *Handler) probe(ctx context.Context, logger *slog.Logger, t prober.Target, s prober.Scenario, m *metrics, l *lease, timeout time.Duration) prober.Result {
	calStart := h.opts.Now()
	c := h.calibration(ctx, t, s, l, timeout)
	var p calResult
	select {
	case <-c.done:
		p = c.res
	case <-ctx.Done():
		logger.Debug("still calibrating when the probe's time ran out; the calibration goes on for at most the probe's timeout and is cached for the next request",
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

package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/mdlayher/vsock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/net/netutil"

	"github.com/slaprobe/slaprobe/internal/tracing/webconfig"
	"github.com/slaprobe/slaprobe/internal/webguard"
)

// The main web listener's limits (docs/reliability.md, "The main web
// listener"), the OTLP receivers' in kind: what a slow, large or
// numerous caller can hold.
const (
	// MaxConns bounds the open connections per listener; more wait in
	// the kernel's accept queue until one closes. Prometheus holds one
	// per scrape in progress: in the fleet mode, one per replica it
	// drives /probe for at once.
	MaxConns = 256
	// MaxHeaderBytes bounds a request's header block (Go's default is
	// 1 MiB). Go's server allows 4 KiB more before it answers 431.
	MaxHeaderBytes = 64 << 10
	// WebReadHeaderTimeout bounds reading a request's headers: a client
	// that drips them (slowloris) is cut off.
	WebReadHeaderTimeout = 10 * time.Second
	// webReadTimeout bounds reading a whole request; none has a body
	// worth the name.
	webReadTimeout = 30 * time.Second
	// webWriteTimeout runs from the end of the request's headers and
	// bounds every answer but /probe's (see probeWriteTimeout).
	webWriteTimeout = 60 * time.Second
	// webIdleTimeout closes a keep-alive connection without a request;
	// Prometheus scrapes every 15 s to 1 min.
	webIdleTimeout = 2 * time.Minute
	// probeWriteMargin is what /probe may take beyond its longest
	// scenario timeout: the answer itself.
	probeWriteMargin = 10 * time.Second
)

// Why the main web listener refused a request before any endpoint saw it:
// the `reason` label of slaprobe_web_requests_refused_total.
var webRefusedReasons = []string{webguard.Unauthenticated, webguard.Throttled}

// webGuard is what --web.config.file asks of the main listener (TLS, basic
// auth, response headers), read once at start, and the listener's limits.
// exporter-toolkit's own server checks basic auth with one bcrypt
// comparison at a time and a 100-entry cache that wrong passwords evict,
// so a flood of them holds up Prometheus's scrape; the daemon serves the
// file itself instead: TLS from exporter-toolkit's TLS config (the
// certificate and key are read again at every handshake), basic auth on
// webguard's budget with known-good credentials remembered.
type webGuard struct {
	path    string
	tls     *tls.Config // nil: plain text
	http2   bool
	headers map[string]string
	basic   *webguard.BasicAuth // nil: no basic auth

	refused *prometheus.CounterVec
}

// newWebGuard reads the web configuration file of flags, if any.
func newWebGuard(flags *web.FlagConfig) (*webGuard, error) {
	g := &webGuard{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "slaprobe", Name: "web_requests_refused_total",
			Help: "Requests the main web listener refused before any endpoint saw them, by reason: " +
				"unauthenticated (no or wrong basic auth credentials: 401), " +
				"throttled (unknown credentials while the password checks' CPU budget is spent: 503 with Retry-After).",
		}, []string{"reason"}),
	}
	for _, r := range webRefusedReasons {
		g.refused.WithLabelValues(r)
	}
	if flags == nil || flags.WebConfigFile == nil || *flags.WebConfigFile == "" {
		return g, nil
	}
	g.path = *flags.WebConfigFile
	c, err := webconfig.Parse(g.path)
	if err != nil {
		return nil, fmt.Errorf("--web.config.file=%s: %w", g.path, err)
	}
	g.http2, g.headers = c.HTTPConfig.HTTP2, c.HTTPConfig.Header
	if webconfig.HasTLS(&c.TLSConfig) {
		if g.tls, err = web.ConfigToTLSConfig(&c.TLSConfig); err != nil {
			return nil, fmt.Errorf("--web.config.file=%s: tls_server_config: %w", g.path, err)
		}
	}
	if len(c.Users) > 0 {
		if g.basic, err = webguard.NewBasicAuth(c.Users); err != nil {
			return nil, fmt.Errorf("--web.config.file=%s: %w", g.path, err)
		}
	}
	return g, nil
}

// collectors are the guard's metrics: refusals, and the bcrypt time the
// password checks spent (which webguard.Share bounds).
func (g *webGuard) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		g.refused,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "slaprobe", Name: "web_password_check_seconds_total",
			Help: "CPU time the main web listener spent checking basic auth passwords (bcrypt): " +
				"at most 2.5 s plus 0.3 of a core (the budget, and the reserve for clients whose passwords never failed); " +
				"known-good credentials are remembered.",
		}, func() float64 {
			if g.basic == nil {
				return 0
			}
			return g.basic.Spent().Seconds()
		}),
	}
}

// unauthenticated reports whether r may skip basic auth: the liveness and
// readiness checks, which say nothing but "Healthy" and "Ready", so that
// Kubernetes probes work with auth on.
func unauthenticated(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		(r.URL.Path == "/-/healthy" || r.URL.Path == "/-/ready")
}

// wrap puts the response headers, basic auth and /probe's longer write
// deadline in front of next.
func (g *webGuard) wrap(next http.Handler, probeWrite func() time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range g.headers {
			w.Header().Set(k, v)
		}
		if g.basic != nil && !unauthenticated(r) {
			reason := webguard.Unauthenticated
			if user, pass, ok := r.BasicAuth(); ok {
				source, _, _ := net.SplitHostPort(r.RemoteAddr)
				reason = g.basic.CheckFrom(source, user, pass)
			}
			switch reason {
			case "":
			case webguard.Throttled:
				g.refused.WithLabelValues(reason).Inc()
				w.Header().Set("Retry-After", "1")
				http.Error(w, "too many password checks; retry later", http.StatusServiceUnavailable)
				return
			default:
				g.refused.WithLabelValues(reason).Inc()
				w.Header().Set("WWW-Authenticate", `Basic realm="slaprobe"`)
				http.Error(w, http.StatusText(http.StatusUnauthorized), http.StatusUnauthorized)
				return
			}
		}
		if r.URL.Path == "/probe" {
			// A probe may take its scenario's timeout; the server's
			// write timeout would cut it off.
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(probeWrite()))
		}
		next.ServeHTTP(w, r)
	})
}

// probeWriteTimeout is the write deadline of a /probe answer: the longest
// scenario timeout, which bounds a probe whatever the scrape timeout says,
// and a margin; never less than the other answers'.
func (d *Daemon) probeWriteTimeout() time.Duration {
	longest := time.Duration(0)
	for _, s := range d.cfg.Get().AllScenarios() {
		longest = max(longest, s.Timeout)
	}
	return max(webWriteTimeout, longest+probeWriteMargin)
}

// webServer is the main listener's server with its limits.
func (d *Daemon) webServer() *http.Server {
	srv := &http.Server{
		Handler:           d.guard.wrap(d.mux, d.probeWriteTimeout),
		ReadHeaderTimeout: WebReadHeaderTimeout,
		ReadTimeout:       webReadTimeout,
		WriteTimeout:      webWriteTimeout,
		IdleTimeout:       webIdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		// Cut-off clients and failed handshakes go to the debug log.
		ErrorLog: slog.NewLogLogger(d.logger.With("component", "web").Handler(), slog.LevelDebug),
	}
	if d.guard.tls != nil {
		srv.TLSConfig = d.guard.tls.Clone()
		if !d.guard.http2 {
			srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
		}
	}
	return srv
}

// serveWeb serves srv on every listener, each capped at MaxConns
// connections, and returns the first error.
func (d *Daemon) serveWeb(srv *http.Server, ls []net.Listener) <-chan error {
	errs := make(chan error, len(ls))
	for _, l := range ls {
		d.logger.Info("Listening on", "address", l.Addr().String())
		d.logger.Info(map[bool]string{false: "TLS is disabled.", true: "TLS is enabled."}[srv.TLSConfig != nil],
			"http2", srv.TLSConfig != nil && d.guard.http2, "address", l.Addr().String(),
			"basic_auth", d.guard.basic != nil, "max_connections", MaxConns)
		capped := netutil.LimitListener(l, MaxConns)
		go func() {
			if srv.TLSConfig != nil {
				errs <- srv.ServeTLS(capped, "", "")
			} else {
				errs <- srv.Serve(capped)
			}
		}()
	}
	return errs
}

// openSpecialListeners opens what Listen leaves to Run: systemd's sockets
// (--web.systemd-socket) and vsock:// addresses.
func (d *Daemon) openSpecialListeners() ([]net.Listener, error) {
	w := d.opts.Web
	if w.WebSystemdSocket != nil && *w.WebSystemdSocket {
		all, err := activation.Listeners()
		if err != nil {
			return nil, fmt.Errorf("--web.systemd-socket: %w", err)
		}
		var ls []net.Listener
		for _, l := range all {
			if l != nil {
				ls = append(ls, l)
			}
		}
		if len(ls) == 0 {
			return nil, errors.New("--web.systemd-socket: no socket activation file descriptors found")
		}
		return ls, nil
	}
	var ls []net.Listener
	for _, a := range *w.WebListenAddresses {
		var l net.Listener
		var err error
		if strings.HasPrefix(a, "vsock://") {
			var port uint32
			if port, err = vsockPort(a); err == nil {
				l, err = vsock.Listen(port, nil)
			}
		} else {
			l, err = net.Listen("tcp", a)
		}
		if err != nil {
			for _, x := range ls {
				x.Close()
			}
			return nil, fmt.Errorf("listen on %s: %w", a, err)
		}
		ls = append(ls, l)
	}
	return ls, nil
}

// vsockPort reads the port of vsock://:PORT.
func vsockPort(a string) (uint32, error) {
	u, err := url.Parse(a)
	if err != nil {
		return 0, err
	}
	_, p, err := net.SplitHostPort(u.Host)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(p, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("port %q: expected a number up to %d", p, uint32(1<<32-1))
	}
	return uint32(n), nil
}

// shutdownWeb stops srv, giving answers in progress 5 s.
func shutdownWeb(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
}

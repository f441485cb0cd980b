package tracing

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/exporter-toolkit/web"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/slaprobe/slaprobe/internal/tracing/webconfig"
	"github.com/slaprobe/slaprobe/internal/webguard"
)

// Why an export was refused: the `reason` label of
// slaprobe_otlp_exports_refused_total.
const (
	// RefusedUnauthenticated: no basic auth credentials, or wrong ones.
	// HTTP 401, gRPC Unauthenticated.
	RefusedUnauthenticated = webguard.Unauthenticated
	// RefusedThrottled: the credentials are not known good and the
	// password checks' CPU budget is spent (a flood of wrong passwords).
	// HTTP 503, gRPC Unavailable: both are retried by OpenTelemetry SDKs.
	RefusedThrottled = webguard.Throttled
)

// Password checks draw on a budget of bcrypt time, with known-good
// credentials remembered: webguard.BasicAuth, shared with the main web
// listener.

// ReceiverAuth is the OTLP receivers' TLS and basic auth, read from an
// exporter-toolkit web configuration file (tracing.receiver_web_config_file,
// the format of --web.config.file): tls_server_config (certificate and key,
// client_ca_file and client_auth_type for client certificates),
// basic_auth_users (bcrypt hashes) and http_server_config. It applies to
// both receivers: TLS to gRPC and HTTP alike; basic auth from the HTTP
// Authorization header or the gRPC `authorization` metadata, both
// `Basic base64(user:password)`. The file is read once, at start; the
// certificate and key files are read again at every handshake, so a renewed
// certificate needs no restart.
type ReceiverAuth struct {
	tls            *tls.Config // nil: plain text
	clientCertAuth bool        // client certificates are required and verified
	http2          bool
	headers        map[string]string
	basic          *webguard.BasicAuth // nil: no basic auth
}

// TLS reports whether the receivers serve TLS.
func (a *ReceiverAuth) TLS() bool { return a != nil && a.tls != nil }

// BasicAuth reports whether the receivers ask for basic auth.
func (a *ReceiverAuth) BasicAuth() bool { return a != nil && a.basic != nil }

// ClientCertificates reports whether the receivers require a client
// certificate signed by the configured CA.
func (a *ReceiverAuth) ClientCertificates() bool { return a != nil && a.clientCertAuth }

// Authenticates reports whether a client must prove who it is: basic auth
// or a verified client certificate. TLS alone does not.
func (a *ReceiverAuth) Authenticates() bool { return a.BasicAuth() || a.ClientCertificates() }

// LoadReceiverAuth reads the web configuration file at path.
func LoadReceiverAuth(path string) (*ReceiverAuth, error) {
	c, err := webconfig.Read(path)
	if err != nil {
		return nil, err
	}
	a := &ReceiverAuth{http2: c.HTTPConfig.HTTP2, headers: c.HTTPConfig.Header}
	if webconfig.HasTLS(&c.TLSConfig) {
		if a.tls, err = web.ConfigToTLSConfig(&c.TLSConfig); err != nil {
			return nil, fmt.Errorf("tls_server_config: %w", err)
		}
		a.clientCertAuth = a.tls.ClientAuth == tls.RequireAndVerifyClientCert
	}
	if len(c.Users) > 0 {
		if a.basic, err = webguard.NewBasicAuth(c.Users); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// grpcAuthOptions are the gRPC server's TLS credentials and the basic auth
// check that needs bcrypt: grpcAuthTap refuses a stream without
// credentials, or with credentials it can settle without a bcrypt
// comparison (known good, or throttled), before the message is read and
// before it takes an export slot; the interceptor checks the rest, outside
// the connection's I/O goroutine.
func (r *Receiver) grpcAuthOptions() []grpc.ServerOption {
	a := r.auth
	var opts []grpc.ServerOption
	if a.TLS() {
		opts = append(opts, grpc.Creds(credentials.NewTLS(a.tls)))
	}
	if !a.BasicAuth() {
		return opts
	}
	return append(opts,
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			md, _ := metadata.FromIncomingContext(ctx)
			user, pass, ok := grpcCredentials(md)
			if !ok {
				return nil, r.refuseGRPC(RefusedUnauthenticated)
			}
			if reason := a.basic.Check(user, pass); reason != "" {
				return nil, r.refuseGRPC(reason)
			}
			return h(ctx, req)
		}),
	)
}

// grpcAuthTap refuses a gRPC stream, before its message is read, when the
// receiver asks for basic auth and the stream's credentials are missing or
// can be refused without a bcrypt comparison.
func (r *Receiver) grpcAuthTap(info *tap.Info) error {
	if !r.auth.BasicAuth() {
		return nil
	}
	user, pass, ok := grpcCredentials(info.Header)
	if !ok {
		return r.refuseGRPC(RefusedUnauthenticated)
	}
	if settled, reason := r.auth.basic.Quick(user, pass); settled && reason != "" {
		return r.refuseGRPC(reason)
	}
	return nil
}

// refuseGRPC counts a refused gRPC export and returns its status.
func (r *Receiver) refuseGRPC(reason string) error {
	r.refused.WithLabelValues(receiverGRPC, reason).Inc()
	if reason == RefusedThrottled {
		return status.Error(codes.Unavailable, "OTLP/gRPC: too many password checks; retry later")
	}
	return status.Error(codes.Unauthenticated, "OTLP/gRPC: send the authorization metadata `Basic base64(user:password)` with a valid user and password")
}

// grpcCredentials reads basic auth credentials from the `authorization`
// metadata, parsed as net/http parses them (RFC 7617).
func grpcCredentials(md metadata.MD) (user, pass string, ok bool) {
	v := md.Get("authorization")
	if len(v) != 1 {
		return "", "", false
	}
	return (&http.Request{Header: http.Header{"Authorization": v}}).BasicAuth()
}

// authHTTP puts the web configuration's response headers and basic auth in
// front of next; TLS is the server's (useHTTPTLS).
func (r *Receiver) authHTTP(next http.Handler) http.Handler {
	a := r.auth
	if a == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		for k, v := range a.headers {
			w.Header().Set(k, v)
		}
		if a.basic != nil {
			reason := RefusedUnauthenticated
			if user, pass, ok := req.BasicAuth(); ok {
				reason = a.basic.Check(user, pass)
			}
			switch reason {
			case "":
			case RefusedThrottled:
				r.refused.WithLabelValues(receiverHTTP, reason).Inc()
				// 503, not 429: OpenTelemetry's Python exporter (vLLM's)
				// retries 5xx and 408 only.
				w.Header().Set("Retry-After", retryAfter)
				http.Error(w, "OTLP/HTTP: too many password checks; retry later", http.StatusServiceUnavailable)
				return
			default:
				r.refused.WithLabelValues(receiverHTTP, reason).Inc()
				w.Header().Set("WWW-Authenticate", `Basic realm="slaprobe OTLP receiver"`)
				http.Error(w, "OTLP/HTTP: basic auth with a valid user and password required", http.StatusUnauthorized)
				return
			}
		}
		next.ServeHTTP(w, req)
	})
}

// useHTTPTLS makes srv serve TLS (ServeTLS with no file names) when the
// web configuration has it, honouring http_server_config.http2.
func (r *Receiver) useHTTPTLS(srv *http.Server) {
	if !r.auth.TLS() {
		return
	}
	srv.TLSConfig = r.auth.tls.Clone()
	// Failed handshakes (no or a wrong client certificate, a plain-text
	// client) go to the debug log, not to stderr.
	srv.ErrorLog = slog.NewLogLogger(r.logger.With("receiver", "OTLP/HTTP").Handler(), slog.LevelDebug)
	if !r.auth.http2 {
		srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
}

// ListensOnEveryInterface reports whether addr (host:port, as configured
// or as a listener reports it) is every interface: no host, 0.0.0.0 or ::.
func ListensOnEveryInterface(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

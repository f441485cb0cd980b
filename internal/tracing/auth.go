package tracing

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/crypto/bcrypt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/slaprobe/slaprobe/internal/tracing/webconfig"
)

// Why an export was refused: the `reason` label of
// slaprobe_otlp_exports_refused_total.
const (
	// RefusedUnauthenticated: no basic auth credentials, or wrong ones.
	// HTTP 401, gRPC Unauthenticated.
	RefusedUnauthenticated = "unauthenticated"
	// RefusedThrottled: the credentials are not known good and the
	// password checks' CPU budget is spent (a flood of wrong passwords).
	// HTTP 503, gRPC Unavailable: both are retried by OpenTelemetry SDKs.
	RefusedThrottled = "throttled"
)

// The bound on the CPU that password checks may burn. A bcrypt comparison
// is slow on purpose (tens of milliseconds at cost 10), so a client that sends
// wrong passwords as fast as it can would keep a core busy. Credentials
// that passed once are remembered (as a SHA-256, never in clear), so a
// client with the right password costs one comparison per restart; every
// other comparison runs one at a time and draws on a budget of bcrypt time
// that refills at bcryptShare per second up to bcryptBurst. Once it is
// spent, credentials not yet known good are refused as throttled, unchecked.
const (
	bcryptShare        = 0.25 // seconds of bcrypt per second: a quarter of one core at most
	bcryptBurst        = 2 * time.Second
	maxGoodCredentials = 64
)

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
	basic          *basicAuth // nil: no basic auth
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
		if a.basic, err = newBasicAuth(c.Users); err != nil {
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
			if reason := a.basic.check(user, pass); reason != "" {
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
	if settled, reason := r.auth.basic.quick(user, pass); settled && reason != "" {
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
				reason = a.basic.check(user, pass)
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

// basicAuth checks user and password against bcrypt hashes, in constant
// time over the user names (an unknown user is checked against a hash of
// the same cost), within a bounded CPU budget (see bcryptShare).
type basicAuth struct {
	users   []basicUser
	fake    []byte // the hash an unknown user is checked against
	now     func() time.Time
	compare func(hash, password []byte) error

	bcryptMu sync.Mutex // one comparison at a time

	mu     sync.Mutex
	budget time.Duration // bcrypt time left
	filled time.Time     // when budget was last refilled
	good   map[[sha256.Size]byte]struct{}
}

type basicUser struct {
	sum  [sha256.Size]byte // of the name, compared in constant time
	hash []byte
}

func newBasicAuth[S ~string](users map[string]S) (*basicAuth, error) {
	b := &basicAuth{
		now: time.Now, compare: bcrypt.CompareHashAndPassword,
		budget: bcryptBurst, good: map[[sha256.Size]byte]struct{}{},
	}
	b.filled = b.now()
	maxCost := bcrypt.MinCost
	for _, u := range slices.Sorted(maps.Keys(users)) {
		h := []byte(users[u])
		cost, err := bcrypt.Cost(h)
		if err != nil {
			return nil, fmt.Errorf("basic_auth_users: user %q: not a bcrypt hash (%v)", u, err)
		}
		maxCost = max(maxCost, cost)
		b.users = append(b.users, basicUser{sum: sha256.Sum256([]byte(u)), hash: h})
	}
	fake, err := bcrypt.GenerateFromPassword([]byte("slaprobe: no such user"), maxCost)
	if err != nil {
		return nil, err
	}
	b.fake = fake
	return b, nil
}

func credentialKey(user, pass string) [sha256.Size]byte {
	return sha256.Sum256([]byte(user + "\x00" + pass))
}

// refill adds the budget earned since the last refill. b.mu is held.
func (b *basicAuth) refill() {
	now := b.now()
	earned := time.Duration(float64(now.Sub(b.filled)) * bcryptShare)
	b.budget = min(bcryptBurst, b.budget+earned)
	b.filled = now
}

// quick settles what needs no bcrypt comparison: credentials known good
// ("" ), or any other while the budget is spent (RefusedThrottled).
func (b *basicAuth) quick(user, pass string) (settled bool, reason string) {
	key := credentialKey(user, pass)
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.good[key]; ok {
		return true, ""
	}
	b.refill()
	if b.budget <= 0 {
		return true, RefusedThrottled
	}
	return false, ""
}

// check returns "" for a known user with its password, else the reason
// to refuse.
func (b *basicAuth) check(user, pass string) string {
	if settled, reason := b.quick(user, pass); settled {
		return reason
	}
	b.bcryptMu.Lock()
	defer b.bcryptMu.Unlock()
	// Settle again: the budget may have gone, or the credentials been
	// found good, while this one waited for its turn.
	if settled, reason := b.quick(user, pass); settled {
		return reason
	}
	hash, known := b.fake, false
	want := sha256.Sum256([]byte(user))
	for _, u := range b.users {
		if subtle.ConstantTimeCompare(u.sum[:], want[:]) == 1 {
			hash, known = u.hash, true
		}
	}
	start := b.now()
	err := b.compare(hash, []byte(pass))
	spent := b.now().Sub(start)

	b.mu.Lock()
	defer b.mu.Unlock()
	b.budget -= spent
	if err != nil || !known {
		return RefusedUnauthenticated
	}
	if len(b.good) >= maxGoodCredentials {
		clear(b.good)
	}
	b.good[credentialKey(user, pass)] = struct{}{}
	return ""
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

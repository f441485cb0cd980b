package tracing

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// What one client, or many, can make the receiver hold (docs/tracing.md,
// "Receiver limits"; docs/reliability.md has the flood that checks them).
//
// Memory ceiling. An export in progress holds at most:
//   - HTTP: its body, read into a buffer that grows to maxExportBytes+1
//     (while it grows, the old half and the new whole: 1.5 × the limit),
//     the gzip reader's window (32 KiB) and, for JSON, the decoder's
//     buffer, which holds the token being read and grows by doubling (2 ×,
//     and the old one while it grows: 1 ×), and that token once read (a
//     string as long as the body at worst: 1 ×): 5.5 × maxExportBytes.
//   - gRPC: the message as received (at most maxExportBytes, grpc-go checks
//     before and after decompression) and, when compressed, the inflated
//     copy: 2 × maxExportBytes, plus a copy when grpc-go's buffer is not
//     one slice: 3 ×.
//
// Spans are handed on one at a time and not kept (otlpwire.go), so nothing
// grows with the number of spans. With maxConcurrentExports per protocol
// the exports in progress hold at most H = 2 × 5.5 × 4 MiB + 2 × 3 × 4 MiB
// = 68 MiB. The process holds more than what is live: Go's heap grows to
// twice its live part before the collector runs (GOGC=100), and grpc-go
// keeps freed message buffers in its pool until the next collections. The
// ceiling is 3 × H = 204 MiB above the daemon's RSS before a flood
// (floodCeilingMiB in cmd/slaprobe/flood_test.go, which holds it);
// connections add little (maxConns per listener, a goroutine and its
// buffers each). docs/reliability.md has the measured figures.
const (
	// maxExportBytes bounds one export, after decompression, on both
	// protocols. An OpenTelemetry SDK's batch is 512 spans, about 1 MiB of
	// vLLM's spans; 4 MiB is also the OpenTelemetry Collector's default
	// for its own OTLP/gRPC receiver.
	maxExportBytes = 4 << 20
	// maxConcurrentExports is the number of exports read at once per
	// protocol; more are answered 503 (HTTP) or UNAVAILABLE (gRPC) at
	// once, both retryable for an OTLP exporter (the Python SDK, vLLM's,
	// retries 503 and UNAVAILABLE but not 429). An engine's exporter sends
	// one export at a time, and decoding one takes milliseconds.
	maxConcurrentExports = 2
	// maxConns bounds the open connections per receiver listener; more
	// wait in the kernel's accept queue until one closes.
	maxConns = 64
	// maxGRPCStreams bounds the exports in progress on one gRPC
	// connection (a client queues more).
	maxGRPCStreams = 4
	// grpcStreamWindow and grpcConnWindow are the HTTP/2 flow-control
	// windows: what a client may send before slaprobe reads it (256 KiB
	// per export, 1 MiB per connection: at 1 ms of round trip, 256 MB/s).
	grpcStreamWindow = 256 << 10
	grpcConnWindow   = 1 << 20

	// readTimeout bounds reading one HTTP request, body included: 4 MiB
	// at 1.2 Mbit/s, a 16 MiB body at 4.5 Mbit/s.
	readTimeout = 30 * time.Second
	// writeTimeout runs from the end of the request's headers, so it
	// covers the read, the decode and the (small) answer.
	writeTimeout = 40 * time.Second
	// idleTimeout closes a keep-alive connection without a request; an
	// engine exports every 5 s.
	idleTimeout = 60 * time.Second
	// headerTimeout bounds reading an HTTP request's headers, and the
	// gRPC connection's handshake.
	headerTimeout = 10 * time.Second
	// retryAfter is what a refused export is told to wait, in seconds.
	retryAfter = "1"
)

// Reasons an export is refused, the `reason` label of
// slaprobe_otlp_exports_refused_total.
const (
	RefusedTooMany    = "too_many"    // maxConcurrentExports in progress
	RefusedTooLarge   = "too_large"   // larger than maxExportBytes once decompressed
	RefusedBadRequest = "bad_request" // not an OTLP trace export: method, media type, encoding, bad body
)

// The `protocol` label of slaprobe_otlp_exports_refused_total.
const (
	receiverGRPC = "grpc"
	receiverHTTP = "http"
)

func newRefusedCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "slaprobe", Name: "otlp_exports_refused_total",
		Help: "OTLP trace exports the receivers refused before taking any span, by protocol (grpc, http) and reason: " +
			"unauthenticated (no or wrong basic auth credentials: HTTP 401, gRPC Unauthenticated), " +
			"throttled (unknown credentials while the password checks' CPU budget is spent: HTTP 503, gRPC Unavailable, both retried), " +
			"too_many (the receiver's concurrent exports were in progress: HTTP 503, gRPC Unavailable, both retried), " +
			"decode_budget (the receivers' time budget for reading and decoding exports was spent: HTTP 503, gRPC Unavailable, both retried), " +
			"too_large (over the size limit once decompressed), bad_request (not an OTLP trace export). " +
			"A failed TLS handshake (a missing or wrong client certificate, a plain-text client) is no export and is not counted.",
	}, []string{"protocol", "reason"})
}

// slots is a counting semaphore that never waits.
type slots chan struct{}

func (s slots) tryAcquire() bool {
	select {
	case s <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s slots) release() { <-s }

// httpServer is the OTLP/HTTP server with its timeouts.
func httpServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: headerTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
}

// grpcOptions are the OTLP/gRPC server's limits. inFlight bounds the
// exports in progress across connections: a stream beyond it, or one that
// meets a spent budget (budget.go), is refused with UNAVAILABLE before its
// message is read (grpc-go reads a unary request whole before any
// interceptor runs), and its slot is freed, and its time charged, when the
// stream ends.
func grpcOptions(inFlight slots, budget *timeBudget, refused *prometheus.CounterVec, authTap func(*tap.Info) error) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxExportBytes),
		grpc.MaxConcurrentStreams(maxGRPCStreams),
		// Static flow-control windows: with grpc-go's dynamic ones a
		// client may send megabytes of an export before the tap's
		// refusal reaches it, all of which is read and thrown away.
		grpc.StaticStreamWindowSize(grpcStreamWindow),
		grpc.StaticConnWindowSize(grpcConnWindow),
		grpc.ConnectionTimeout(headerTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: idleTimeout,
			Time:              30 * time.Second,
			Timeout:           10 * time.Second,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.StatsHandler(refusedSizes{refused}),
		grpc.InTapHandle(func(ctx context.Context, info *tap.Info) (context.Context, error) {
			if err := authTap(info); err != nil {
				return ctx, err
			}
			start, ok := budget.take()
			if !ok {
				refused.WithLabelValues(receiverGRPC, RefusedBudget).Inc()
				return ctx, status.Error(codes.Unavailable, "OTLP/gRPC: the receivers' time budget is spent; retry later")
			}
			if !inFlight.tryAcquire() {
				refused.WithLabelValues(receiverGRPC, RefusedTooMany).Inc()
				return ctx, status.Errorf(codes.Unavailable, "OTLP/gRPC: %d exports in progress; retry later", maxConcurrentExports)
			}
			// The stream's context ends when the export has been answered:
			// the slot's time, reading and inflating included, is charged.
			context.AfterFunc(ctx, func() {
				budget.charge(start)
				inFlight.release()
			})
			return ctx, nil
		}),
	}
}

// refusedSizes counts the gRPC exports grpc-go refused itself, before the
// service saw them: larger than MaxRecvMsgSize, on the wire or inflated
// (RESOURCE_EXHAUSTED, which the service never answers).
type refusedSizes struct{ refused *prometheus.CounterVec }

func (h refusedSizes) HandleRPC(_ context.Context, s stats.RPCStats) {
	if end, ok := s.(*stats.End); ok && status.Code(end.Error) == codes.ResourceExhausted {
		h.refused.WithLabelValues(receiverGRPC, RefusedTooLarge).Inc()
	}
}

func (refusedSizes) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (refusedSizes) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (refusedSizes) HandleConn(context.Context, stats.ConnStats)                       {}

// limitListener accepts at most n connections at once; Accept waits for
// one to close.
func limitListener(ln net.Listener, n int) net.Listener {
	return &limitedListener{Listener: ln, sem: make(slots, n), done: make(chan struct{})}
}

type limitedListener struct {
	net.Listener
	sem       slots
	done      chan struct{}
	closeOnce sync.Once
}

func (l *limitedListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		l.sem.release()
		return nil, err
	}
	return &limitedConn{Conn: c, release: l.sem.release}, nil
}

func (l *limitedListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

package tracing

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Receiver takes OTLP trace exports, over gRPC (port 4317 by convention)
// and HTTP (POST /v1/traces, port 4318; protobuf or JSON, gzip or not), and
// hands their spans to a Joiner, one at a time as it reads them. It stores
// nothing itself, and bounds what clients can make it hold (limits.go).
type Receiver struct {
	j       *Joiner
	logger  *slog.Logger
	grpc    *grpc.Server
	http    *http.Server
	refused *prometheus.CounterVec // slaprobe_otlp_exports_refused_total
	auth    *ReceiverAuth          // TLS and basic auth (auth.go); nil: neither
	// exports in progress, per protocol (maxConcurrentExports each)
	httpSlots, grpcSlots slots
	// the time both receivers may spend on exports (budget.go)
	budget *timeBudget
}

// NewReceiver returns a Receiver feeding j. A nil logger discards; a nil
// auth serves plain text to anyone.
func NewReceiver(j *Joiner, logger *slog.Logger, auth *ReceiverAuth) *Receiver {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &Receiver{j: j, logger: logger, refused: newRefusedCounter(), auth: auth,
		httpSlots: make(slots, maxConcurrentExports), grpcSlots: make(slots, maxConcurrentExports),
		budget: newDecodeBudget()}
	// The tap refuses a stream without valid-looking credentials before it
	// takes one of the export slots, so an unauthenticated flood holds none.
	opts := grpcOptions(r.grpcSlots, r.budget, r.refused, r.grpcAuthTap)
	opts = append(opts, r.grpcAuthOptions()...)
	r.grpc = grpc.NewServer(append(opts, grpc.ForceServerCodecV2(newRawCodec()))...)
	registerTraceService(r.grpc, r.exportGRPC)
	mux := http.NewServeMux()
	// Basic auth runs before the handler takes an export slot.
	mux.Handle("/v1/traces", r.authHTTP(r.HTTPHandler()))
	r.http = httpServer(mux)
	r.useHTTPTLS(r.http)
	return r
}

// Collector exports slaprobe_otlp_exports_refused_total, every series from
// zero.
func (r *Receiver) Collector() prometheus.Collector {
	for _, p := range []string{receiverGRPC, receiverHTTP} {
		for _, reason := range []string{RefusedUnauthenticated, RefusedThrottled, RefusedBudget, RefusedTooMany, RefusedTooLarge, RefusedBadRequest} {
			r.refused.WithLabelValues(p, reason)
		}
	}
	return r.refused
}

// ServeGRPC serves OTLP/gRPC on ln until Close.
func (r *Receiver) ServeGRPC(ln net.Listener) error {
	r.logger.Info("OTLP/gRPC trace receiver listening", "address", ln.Addr().String())
	return r.grpc.Serve(limitListener(ln, maxConns))
}

// ServeHTTP serves OTLP/HTTP (POST /v1/traces) on ln until Close.
func (r *Receiver) ServeHTTP(ln net.Listener) error {
	r.logger.Info("OTLP/HTTP trace receiver listening", "address", ln.Addr().String(), "path", "/v1/traces")
	serve := r.http.Serve
	if r.http.TLSConfig != nil {
		serve = func(ln net.Listener) error { return r.http.ServeTLS(ln, "", "") }
	}
	if err := serve(limitListener(ln, maxConns)); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Close stops both servers, letting exports in progress finish (5 s at most).
func (r *Receiver) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { r.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		r.grpc.Stop()
	}
	_ = r.http.Shutdown(ctx)
}

// exportGRPC takes the bytes of one OTLP/gRPC export.
func (r *Receiver) exportGRPC(_ context.Context, b []byte) error {
	if err := walkOTLPProto(b, yielding(r.addSpan)); err != nil {
		r.refused.WithLabelValues(receiverGRPC, RefusedBadRequest).Inc()
		return status.Errorf(codes.InvalidArgument, "OTLP/gRPC: not a trace export: %v", err)
	}
	return nil
}

// addSpan hands one span to the joiner.
func (r *Receiver) addSpan(s *tracepb.Span) {
	r.j.addResourceSpans([]*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{s}}}}})
}

// HTTPHandler serves OTLP/HTTP trace exports: POST, Content-Type
// application/x-protobuf or application/json, optionally gzip-encoded. It
// answers in the request's encoding, as the OTLP specification asks. At
// most maxConcurrentExports are read at once, within the receivers' time
// budget (budget.go); more are answered 503 with Retry-After before their
// body is read.
func (r *Receiver) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		refuse := func(reason, msg string, code int) {
			r.refused.WithLabelValues(receiverHTTP, reason).Inc()
			http.Error(w, msg, code)
		}
		if req.Method != http.MethodPost {
			r.refused.WithLabelValues(receiverHTTP, RefusedBadRequest).Inc()
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "OTLP/HTTP: POST a trace export to /v1/traces", http.StatusMethodNotAllowed)
			return
		}
		ct, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
		var (
			walk    func([]byte, func(*tracepb.Span)) error
			marshal func(proto.Message) ([]byte, error)
		)
		switch ct {
		case "application/x-protobuf", "application/protobuf":
			walk, marshal = walkOTLPProto, proto.Marshal
		case "application/json":
			walk, marshal = walkOTLPJSON, protojson.Marshal
		default:
			refuse(RefusedBadRequest, fmt.Sprintf("OTLP/HTTP: Content-Type %q; expected application/x-protobuf or application/json", ct), http.StatusUnsupportedMediaType)
			return
		}
		if enc := req.Header.Get("Content-Encoding"); (enc == "" || enc == "identity") && req.ContentLength > maxExportBytes {
			refuse(RefusedTooLarge, fmt.Sprintf("OTLP/HTTP: export of %d bytes, larger than %d", req.ContentLength, maxExportBytes), http.StatusRequestEntityTooLarge)
			return
		}
		start, ok := r.budget.take()
		if !ok {
			r.refused.WithLabelValues(receiverHTTP, RefusedBudget).Inc()
			w.Header().Set("Retry-After", retryAfter)
			http.Error(w, "OTLP/HTTP: the receivers' time budget is spent; retry later", http.StatusServiceUnavailable)
			return
		}
		if !r.httpSlots.tryAcquire() {
			r.refused.WithLabelValues(receiverHTTP, RefusedTooMany).Inc()
			w.Header().Set("Retry-After", retryAfter)
			http.Error(w, fmt.Sprintf("OTLP/HTTP: %d exports in progress; retry later", maxConcurrentExports), http.StatusServiceUnavailable)
			return
		}
		defer func() {
			r.budget.charge(start)
			r.httpSlots.release()
		}()
		var body io.Reader = req.Body
		switch enc := req.Header.Get("Content-Encoding"); enc {
		case "", "identity":
		case "gzip":
			gz, err := gzip.NewReader(req.Body)
			if err != nil {
				refuse(RefusedBadRequest, "OTLP/HTTP: bad gzip body: "+err.Error(), http.StatusBadRequest)
				return
			}
			defer gz.Close()
			body = gz
		default:
			refuse(RefusedBadRequest, fmt.Sprintf("OTLP/HTTP: Content-Encoding %q; expected gzip or none", enc), http.StatusUnsupportedMediaType)
			return
		}
		b, err := readBody(body, req.ContentLength, req.Header.Get("Content-Encoding") == "gzip")
		if err != nil {
			refuse(RefusedBadRequest, "OTLP/HTTP: reading the body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if len(b) > maxExportBytes {
			refuse(RefusedTooLarge, fmt.Sprintf("OTLP/HTTP: export larger than %d bytes", maxExportBytes), http.StatusRequestEntityTooLarge)
			return
		}
		if err := walk(b, yielding(r.addSpan)); err != nil {
			refuse(RefusedBadRequest, "OTLP/HTTP: not a trace export: "+err.Error(), http.StatusBadRequest)
			return
		}
		out, _ := marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", ct)
		_, _ = w.Write(out)
	})
}

// traceIDOf reads a 16-byte OTLP trace id.
func traceIDOf(b []byte) (trace.TraceID, bool) {
	var id trace.TraceID
	if len(b) != len(id) {
		return id, false
	}
	copy(id[:], b)
	return id, id.IsValid()
}

// readBody reads at most maxExportBytes+1 bytes of an export. The buffer
// starts at the declared length when there is one (uncompressed) and grows
// by doubling to the limit, so it is never more than twice what was read.
func readBody(body io.Reader, contentLength int64, gzipped bool) ([]byte, error) {
	size := int64(64 << 10)
	if !gzipped && contentLength > 0 {
		size = contentLength + 1
	}
	b := make([]byte, 0, min(size, maxExportBytes+1))
	for {
		if len(b) == cap(b) {
			if len(b) > maxExportBytes {
				return b, nil
			}
			b = append(make([]byte, 0, min(2*cap(b), maxExportBytes+1)), b...)
		}
		n, err := body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if gzipped {
			runtime.Gosched() // inflating is work: let a probe's goroutine in (yieldEvery)
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

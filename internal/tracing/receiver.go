package tracing

import (
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// maxExportBytes bounds one OTLP/HTTP export body (after decompression).
const maxExportBytes = 16 << 20

// Receiver takes OTLP trace exports, over gRPC (port 4317 by convention)
// and HTTP (POST /v1/traces, port 4318; protobuf or JSON, gzip or not), and
// hands their spans to a Joiner. It stores nothing itself.
type Receiver struct {
	j      *Joiner
	logger *slog.Logger
	grpc   *grpc.Server
	http   *http.Server

	auth    *ReceiverAuth          // TLS and basic auth (auth.go); nil: neither
	refused *prometheus.CounterVec // slaprobe_otlp_exports_refused_total
}

// NewReceiver returns a Receiver feeding j. A nil logger discards; a nil
// auth serves plain text to anyone.
func NewReceiver(j *Joiner, logger *slog.Logger, auth *ReceiverAuth) *Receiver {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &Receiver{j: j, logger: logger, auth: auth, refused: newRefusedCounter()}
	r.grpc = grpc.NewServer(append([]grpc.ServerOption{grpc.MaxRecvMsgSize(maxExportBytes)}, r.grpcAuthOptions()...)...)
	coltracepb.RegisterTraceServiceServer(r.grpc, traceService{j: j})
	mux := http.NewServeMux()
	mux.Handle("/v1/traces", r.authHTTP(r.HTTPHandler()))
	r.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	r.useHTTPTLS(r.http)
	return r
}

// ServeGRPC serves OTLP/gRPC on ln until Close.
func (r *Receiver) ServeGRPC(ln net.Listener) error {
	r.logger.Info("OTLP/gRPC trace receiver listening", "address", ln.Addr().String())
	return r.grpc.Serve(ln)
}

// ServeHTTP serves OTLP/HTTP (POST /v1/traces) on ln until Close.
func (r *Receiver) ServeHTTP(ln net.Listener) error {
	r.logger.Info("OTLP/HTTP trace receiver listening", "address", ln.Addr().String(), "path", "/v1/traces")
	serve := r.http.Serve
	if r.http.TLSConfig != nil {
		serve = func(ln net.Listener) error { return r.http.ServeTLS(ln, "", "") }
	}
	if err := serve(ln); !errors.Is(err, http.ErrServerClosed) {
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

type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	j *Joiner
}

func (s traceService) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.j.addResourceSpans(req.GetResourceSpans())
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// HTTPHandler serves OTLP/HTTP trace exports: POST, Content-Type
// application/x-protobuf or application/json, optionally gzip-encoded. It
// answers in the request's encoding, as the OTLP specification asks.
func (r *Receiver) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "OTLP/HTTP: POST a trace export to /v1/traces", http.StatusMethodNotAllowed)
			return
		}
		ct, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
		var (
			unmarshal func([]byte, proto.Message) error
			marshal   func(proto.Message) ([]byte, error)
		)
		switch ct {
		case "application/x-protobuf", "application/protobuf":
			unmarshal, marshal = proto.Unmarshal, proto.Marshal
		case "application/json":
			unmarshal, marshal = unmarshalOTLPJSON, protojson.Marshal
		default:
			http.Error(w, fmt.Sprintf("OTLP/HTTP: Content-Type %q; expected application/x-protobuf or application/json", ct), http.StatusUnsupportedMediaType)
			return
		}
		var body io.Reader = req.Body
		switch enc := req.Header.Get("Content-Encoding"); enc {
		case "", "identity":
		case "gzip":
			gz, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, "OTLP/HTTP: bad gzip body: "+err.Error(), http.StatusBadRequest)
				return
			}
			defer gz.Close()
			body = gz
		default:
			http.Error(w, fmt.Sprintf("OTLP/HTTP: Content-Encoding %q; expected gzip or none", enc), http.StatusUnsupportedMediaType)
			return
		}
		b, err := io.ReadAll(io.LimitReader(body, maxExportBytes+1))
		if err != nil {
			http.Error(w, "OTLP/HTTP: reading the body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if len(b) > maxExportBytes {
			http.Error(w, fmt.Sprintf("OTLP/HTTP: export larger than %d bytes", maxExportBytes), http.StatusRequestEntityTooLarge)
			return
		}
		var export coltracepb.ExportTraceServiceRequest
		if err := unmarshal(b, &export); err != nil {
			http.Error(w, "OTLP/HTTP: not a trace export: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.j.addResourceSpans(export.GetResourceSpans())
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

// unmarshalOTLPJSON decodes an OTLP/JSON export. OTLP/JSON differs from the
// protobuf JSON mapping in one point that matters here: trace and span ids
// are hex strings, not base64. So the ids are rewritten to base64 before
// protojson reads the message.
func unmarshalOTLPJSON(b []byte, m proto.Message) error {
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return err
	}
	hexIDsToBase64(doc)
	fixed, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return protojson.Unmarshal(fixed, m)
}

// hexIDsToBase64 rewrites every traceId, spanId and parentSpanId value that
// is a hex id, at any depth (spans and their links); a base64 one (a client
// that used the protobuf JSON mapping) has another length and is kept.
func hexIDsToBase64(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			switch k {
			case "traceId", "spanId", "parentSpanId":
				// 32 or 16 hex digits; base64 of 16 or 8 bytes is 24 or 12 characters.
				if s, ok := e.(string); ok && (len(s) == 32 || len(s) == 16) {
					if raw, err := hex.DecodeString(s); err == nil {
						x[k] = base64.StdEncoding.EncodeToString(raw)
					}
				}
			default:
				hexIDsToBase64(e)
			}
		}
	case []any:
		for _, e := range x {
			hexIDsToBase64(e)
		}
	}
}

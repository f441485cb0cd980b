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
	"time"

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
}

// NewReceiver returns a Receiver feeding j. A nil logger discards.
func NewReceiver(j *Joiner, logger *slog.Logger) *Receiver {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &Receiver{j: j, logger: logger}
	r.grpc = grpc.NewServer(grpc.MaxRecvMsgSize(maxExportBytes))
	coltracepb.RegisterTraceServiceServer(r.grpc, traceService{j: j})
	mux := http.NewServeMux()
	mux.Handle("/v1/traces", r.HTTPHandler())
	r.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
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
	if err := r.http.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
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
			unmarshal, marshal = protojson.Unmarshal, protojson.Marshal
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

package tracing

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// Export protocols.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// ExportOptions say where probe spans go.
type ExportOptions struct {
	// Endpoint is an OTLP URL (http://tempo:4317 for gRPC,
	// http://tempo:4318/v1/traces for HTTP); empty exports nothing.
	Endpoint string
	// Protocol is ProtocolGRPC (default) or ProtocolHTTP.
	Protocol string
	// Version is slaprobe's, for the service.version resource attribute.
	Version string
}

// NewTracerProvider returns the provider of probe spans: every span sampled
// (the traceparent a probe sends must ask the engine to trace it), the
// joiner told of every probe (when j is not nil), and the spans exported to
// o.Endpoint in batches (when set). Shut it down to send the last batch.
func NewTracerProvider(o ExportOptions, j *Joiner) (*sdktrace.TracerProvider, error) {
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithResource(resource.NewSchemaless(
			semconv.ServiceName("slaprobe"), attribute.String("service.version", o.Version))),
	}
	if j != nil {
		opts = append(opts, sdktrace.WithSpanProcessor(j.SpanProcessor()))
	}
	if o.Endpoint != "" {
		var (
			exp *otlptrace.Exporter
			err error
		)
		switch o.Protocol {
		case "", ProtocolGRPC:
			exp, err = otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpointURL(o.Endpoint))
		case ProtocolHTTP:
			exp, err = otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(o.Endpoint))
		default:
			return nil, fmt.Errorf("tracing.export_protocol=%q; expected %q or %q", o.Protocol, ProtocolGRPC, ProtocolHTTP)
		}
		if err != nil {
			return nil, fmt.Errorf("tracing.export_endpoint=%q: %w", o.Endpoint, err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(2*time.Second)))
	}
	return sdktrace.NewTracerProvider(opts...), nil
}

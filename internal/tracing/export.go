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

	"github.com/slaprobe/slaprobe/prober"
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
	// SweepRatio is the share of sweep and /probe requests whose span is
	// sampled (0 to 1): exported when Endpoint is set, and sent with a
	// sampled traceparent, so an engine that samples by its parent
	// (vLLM does) traces only those. Scheduled probes are always sampled.
	SweepRatio float64
}

// kindSampler samples every scheduled probe's span (its traceparent must
// ask the engine to trace it) and a share of the sweep and /probe ones.
type kindSampler struct {
	sweep sdktrace.Sampler
}

func newKindSampler(ratio float64) kindSampler {
	return kindSampler{sweep: sdktrace.TraceIDRatioBased(ratio)}
}

func (s kindSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	for _, kv := range p.Attributes {
		if string(kv.Key) == prober.AttrRequestKind && !prober.RequestKind(kv.Value.AsString()).Recorded() {
			return s.sweep.ShouldSample(p)
		}
	}
	return sdktrace.AlwaysSample().ShouldSample(p)
}

func (s kindSampler) Description() string {
	return "slaprobe: scheduled probes always, sweep and /probe requests " + s.sweep.Description()
}

// NewTracerProvider returns the provider of probe spans: every scheduled
// probe's span sampled (the traceparent a probe sends must ask the engine
// to trace it), sweep and /probe ones at o.SweepRatio, the joiner told of
// every scheduled probe (when j is not nil), and the sampled spans exported
// to o.Endpoint in batches (when set), a probe's once its join is settled.
// Shut it down to send the last batch.
func NewTracerProvider(o ExportOptions, j *Joiner) (*sdktrace.TracerProvider, error) {
	if o.SweepRatio < 0 || o.SweepRatio > 1 {
		return nil, fmt.Errorf("tracing.sweep_export_ratio=%v; expected 0 to 1", o.SweepRatio)
	}
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithSampler(newKindSampler(o.SweepRatio)),
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
		var sp sdktrace.SpanProcessor = sdktrace.NewBatchSpanProcessor(exp, sdktrace.WithBatchTimeout(2*time.Second))
		if j != nil {
			sp = j.HoldExport(sp)
		}
		opts = append(opts, sdktrace.WithSpanProcessor(sp))
	}
	return sdktrace.NewTracerProvider(opts...), nil
}

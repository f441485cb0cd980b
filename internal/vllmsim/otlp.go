package vllmsim

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// vLLM's span and attribute names (vllm/tracing.py): one SERVER span per request, sent when the
// request ends, its latencies in seconds.
const (
	SpanLLMRequest = "llm_request"

	AttrResponseModel       = "gen_ai.response.model"
	AttrRequestID           = "gen_ai.request.id"
	AttrRequestMaxTokens    = "gen_ai.request.max_tokens"
	AttrRequestN            = "gen_ai.request.n"
	AttrUsagePromptTokens   = "gen_ai.usage.prompt_tokens"
	AttrUsageCompletionToks = "gen_ai.usage.completion_tokens"
	AttrLatencyTimeInQueue  = "gen_ai.latency.time_in_queue"
	AttrLatencyTTFT         = "gen_ai.latency.time_to_first_token"
	AttrLatencyE2E          = "gen_ai.latency.e2e"
	AttrLatencyPrefill      = "gen_ai.latency.time_in_model_prefill"
	AttrLatencyDecode       = "gen_ai.latency.time_in_model_decode"
	AttrLatencyInference    = "gen_ai.latency.time_in_model_inference"
)

// spanBatchTimeout is how long spans wait to be sent. vLLM uses the SDK's batch processor (5 s);
// a second keeps tests short while the spans still arrive after the response, as they do.
const spanBatchTimeout = time.Second

// tracer sends the engine's llm_request spans; nil when OTLPTracesEndpoint is empty.
type tracer struct {
	tp *sdktrace.TracerProvider
	t  trace.Tracer
}

// otlpProtocol resolves the protocol like the OpenTelemetry SDK's environment does.
func otlpProtocol(configured string) string {
	for _, p := range []string{configured, os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")} {
		if p != "" {
			return p
		}
	}
	return "grpc"
}

func newTracer(cfg Config) (*tracer, error) {
	if cfg.OTLPTracesEndpoint == "" {
		return nil, nil
	}
	var (
		exp *otlptrace.Exporter
		err error
	)
	switch p := otlpProtocol(cfg.OTLPTracesProtocol); p {
	case "grpc":
		exp, err = otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpointURL(cfg.OTLPTracesEndpoint))
	case "http/protobuf":
		exp, err = otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(cfg.OTLPTracesEndpoint))
	default:
		return nil, fmt.Errorf("otlp_traces_protocol: got %q, want \"grpc\" or \"http/protobuf\"", p)
	}
	if err != nil {
		return nil, fmt.Errorf("otlp_traces_endpoint %q: %w", cfg.OTLPTracesEndpoint, err)
	}
	res := resource.NewSchemaless(semconv.ServiceName("vllm"), attribute.String("vllm.simulated", "true"))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(spanBatchTimeout)),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
	)
	return &tracer{tp: tp, t: tp.Tracer("vllm.llm_engine")}, nil
}

// shutdown sends the spans still waiting, for up to 5 s.
func (t *tracer) shutdown() {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = t.tp.Shutdown(ctx)
}

// requestSpan sends the llm_request span of a finished request, as vLLM does: from its arrival to
// its end, in the trace of its traceparent, latencies in seconds.
func (t *tracer) requestSpan(tr Trace, model string) {
	if t == nil || tr.Submitted.IsZero() {
		return
	}
	ctx := context.Background()
	if tr.TraceParent != "" {
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(http.Header{"Traceparent": {tr.TraceParent}}))
	}
	end := tr.Done
	if end.IsZero() {
		end = time.Now()
	}
	sec := func(a, b time.Time) float64 { return b.Sub(a).Seconds() }
	attrs := []attribute.KeyValue{
		attribute.String(AttrResponseModel, model),
		attribute.String(AttrRequestID, tr.ID),
		attribute.Int(AttrRequestN, 1),
		attribute.Int(AttrUsagePromptTokens, tr.PromptTokens),
		attribute.Int(AttrUsageCompletionToks, tr.CompletionTokens),
		attribute.Float64(AttrLatencyE2E, sec(tr.Arrived, end)),
	}
	if tr.MaxTokens > 0 {
		attrs = append(attrs, attribute.Int(AttrRequestMaxTokens, tr.MaxTokens))
	}
	if !tr.Admitted.IsZero() {
		attrs = append(attrs, attribute.Float64(AttrLatencyTimeInQueue, sec(tr.Submitted, tr.Admitted)))
	}
	if !tr.EngineFirstToken.IsZero() {
		attrs = append(attrs,
			attribute.Float64(AttrLatencyTTFT, sec(tr.Arrived, tr.EngineFirstToken)),
			attribute.Float64(AttrLatencyPrefill, sec(tr.Admitted, tr.EngineFirstToken)))
		if !tr.EngineLastToken.IsZero() {
			attrs = append(attrs,
				attribute.Float64(AttrLatencyDecode, sec(tr.EngineFirstToken, tr.EngineLastToken)),
				attribute.Float64(AttrLatencyInference, sec(tr.Admitted, tr.EngineLastToken)))
		}
	}
	_, span := t.t.Start(ctx, SpanLLMRequest, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(tr.Arrived), trace.WithAttributes(attrs...))
	span.End(trace.WithTimestamp(end))
}

package app

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/prometheus/common/version"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/tracing"
)

// addTracing sets up the probes' spans and, when configured, the OTLP
// receiver whose engine spans settle the engine timing of probes whose
// response carried none. gRPC, when given, is an open listener for the
// OTLP/gRPC receiver that replaces tc.OTLPGRPCListenAddress (the demo).
func (a *App) addTracing(tc config.TracingConfig, grpcLn net.Listener) error {
	d, logger := a.Daemon, a.Daemon.Logger().With("component", "tracing")
	var j *tracing.Joiner
	if tc.Receives() || grpcLn != nil {
		j = tracing.NewJoiner(time.Duration(tc.JoinTimeout))
		if err := d.AddCollector(j.Collector()); err != nil {
			return err
		}
		r := tracing.NewReceiver(j, logger)
		if err := d.AddCollector(r.Collector()); err != nil {
			return err
		}
		var lns []net.Listener
		if grpcLn == nil && tc.OTLPGRPCListenAddress != "" {
			ln, err := net.Listen("tcp", tc.OTLPGRPCListenAddress)
			if err != nil {
				return fmt.Errorf("tracing.otlp_grpc_listen_address=%q: %w", tc.OTLPGRPCListenAddress, err)
			}
			grpcLn = ln
		}
		if grpcLn != nil {
			lns = append(lns, grpcLn)
			go func() {
				if err := r.ServeGRPC(grpcLn); err != nil {
					logger.Error("OTLP/gRPC receiver stopped", "err", err)
				}
			}()
		}
		if tc.OTLPHTTPListenAddress != "" {
			ln, err := net.Listen("tcp", tc.OTLPHTTPListenAddress)
			if err != nil {
				r.Close()
				return fmt.Errorf("tracing.otlp_http_listen_address=%q: %w", tc.OTLPHTTPListenAddress, err)
			}
			lns = append(lns, ln)
			go func() {
				if err := r.ServeHTTP(ln); err != nil {
					logger.Error("OTLP/HTTP receiver stopped", "err", err)
				}
			}()
		}
		a.TraceAddrs = make([]net.Addr, len(lns))
		for i, ln := range lns {
			a.TraceAddrs[i] = ln.Addr()
		}
		a.closers = append(a.closers, r.Close)
		d.SetEngineJoiner(j)
		a.Joiner = j
	}
	tp, err := tracing.NewTracerProvider(tracing.ExportOptions{
		Endpoint: tc.ExportEndpoint, Protocol: tc.ExportProtocol, Version: version.Version,
	}, j)
	if err != nil {
		return err
	}
	if tc.ExportEndpoint != "" {
		logger.Info("exporting probe spans", "endpoint", tc.ExportEndpoint, "protocol", tc.ExportProtocol)
	}
	d.Prober().SetTracerProvider(tp)
	a.closers = append(a.closers, func() { shutdownTracer(tp) })
	return nil
}

// shutdownTracer sends the last batch of probe spans (5 s at most).
func shutdownTracer(tp *sdktrace.TracerProvider) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = tp.Shutdown(ctx)
}

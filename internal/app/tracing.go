package app

import (
	"context"
	"fmt"
	"log/slog"
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
		var auth *tracing.ReceiverAuth
		if tc.ReceiverWebConfigFile != "" {
			var err error
			if auth, err = tracing.LoadReceiverAuth(tc.ReceiverWebConfigFile); err != nil {
				return fmt.Errorf("tracing.receiver_web_config_file=%q: %w", tc.ReceiverWebConfigFile, err)
			}
			logger.Info("OTLP receivers secured", "file", tc.ReceiverWebConfigFile, "tls", auth.TLS(),
				"client_certificates", auth.ClientCertificates(), "basic_auth", auth.BasicAuth(),
				"trust_any_parent", auth.Authenticates())
		}
		j = tracing.NewJoinerWith(tracing.JoinerOptions{
			Timeout: time.Duration(tc.JoinTimeout),
			// An authenticated receiver (basic auth or required client
			// certificates) takes spans from its clients alone: any parent in a
			// probe's trace is the engine's, behind a gateway whose own spans
			// do not reach slaprobe.
			TrustAnyParent: auth.Authenticates(),
			Logger:         logger,
		})
		if err := d.AddCollector(j.Collector()); err != nil {
			return err
		}
		r := tracing.NewReceiver(j, logger, auth)
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
			warnOpenReceiver(logger, ln.Addr().String(), auth)
		}
		a.closers = append(a.closers, r.Close)
		d.SetEngineJoiner(j)
		a.Joiner = j
	}
	tp, err := tracing.NewTracerProvider(tracing.ExportOptions{
		Endpoint: tc.ExportEndpoint, Protocol: tc.ExportProtocol, Version: version.Version,
		SweepRatio: tc.SweepExportRatio,
	}, j)
	if err != nil {
		return err
	}
	if tc.ExportEndpoint != "" {
		logger.Info("exporting probe spans", "endpoint", tc.ExportEndpoint, "protocol", tc.ExportProtocol,
			"sweep_export_ratio", tc.SweepExportRatio)
	}
	d.Prober().SetTracerProvider(tp)
	a.closers = append(a.closers, func() { shutdownTracer(tp) })
	return nil
}

// warnOpenReceiver warns when a receiver at addr takes spans from anyone
// who can reach it: every interface, and neither basic auth nor required
// client certificates. A span sets a probe's queue and prefill, so such a
// client can move the TTFT split and the alert on it. It also warns when
// passwords would cross the network in clear.
func warnOpenReceiver(logger *slog.Logger, addr string, auth *tracing.ReceiverAuth) {
	if !tracing.ListensOnEveryInterface(addr) {
		return
	}
	switch {
	case !auth.Authenticates():
		logger.Warn("the OTLP trace receiver listens on every interface without authentication: anyone who can reach it can post spans that set the probes' engine timing; listen on a loopback address (127.0.0.1:4317 beside the engine) or set tracing.receiver_web_config_file (docs/tracing.md)",
			"address", addr, "tls", auth.TLS())
	case auth.BasicAuth() && !auth.TLS():
		logger.Warn("the OTLP trace receiver listens on every interface with basic auth but without TLS: passwords cross the network in clear; add tls_server_config to tracing.receiver_web_config_file",
			"address", addr)
	}
}

// shutdownTracer sends the last batch of probe spans (5 s at most).
func shutdownTracer(tp *sdktrace.TracerProvider) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = tp.Shutdown(ctx)
}

package config

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"time"

	"github.com/prometheus/common/model"

	"github.com/slaprobe/slaprobe/internal/tracing/webconfig"
)

// TracingConfig configures distributed tracing (docs/tracing.md): the OTLP
// receiver that takes the engines' own spans and joins them to probes, and
// where slaprobe sends its own probe spans. Everything is off by default;
// every probe sends a sampled traceparent and an X-Request-Id either way.
// Read once at start: a change needs a restart.
type TracingConfig struct {
	// OTLPGRPCListenAddress opens an OTLP/gRPC trace receiver (port 4317
	// by convention; 127.0.0.1:4317 beside the engine, anything wider with
	// ReceiverWebConfigFile); point the engine's --otlp-traces-endpoint at it.
	OTLPGRPCListenAddress string `yaml:"otlp_grpc_listen_address"`
	// OTLPHTTPListenAddress opens an OTLP/HTTP receiver (POST /v1/traces,
	// port 4318 by convention).
	OTLPHTTPListenAddress string `yaml:"otlp_http_listen_address"`
	// ReceiverWebConfigFile is an exporter-toolkit web configuration file
	// (the format of --web.config.file) whose TLS (with optional client
	// certificates) and basic auth users apply to both receivers. Relative
	// to the config file's directory. Empty: plain text, no authentication,
	// which is for a loopback address only (slaprobe warns otherwise).
	ReceiverWebConfigFile string `yaml:"receiver_web_config_file"`
	// JoinTimeout is how long a probe whose response carried no engine
	// timing waits for its engine span (default 30s); then it counts as
	// source="none".
	JoinTimeout model.Duration `yaml:"join_timeout"`
	// ExportEndpoint sends each probe's own span to this OTLP endpoint
	// (Tempo, Jaeger, an OpenTelemetry Collector), e.g.
	// http://tempo:4317. Empty sends none.
	ExportEndpoint string `yaml:"export_endpoint"`
	// ExportProtocol is "grpc" (default) or "http/protobuf".
	ExportProtocol string `yaml:"export_protocol"`
	// SweepExportRatio is the share of sweep and /probe requests whose span
	// is sampled: exported (with ExportEndpoint) and sent with a sampled
	// traceparent, so the engine traces it. 0 to 1, default 0.01.
	// Scheduled probes are always sampled.
	SweepExportRatio float64 `yaml:"sweep_export_ratio"`
}

// DefaultTracingConfig: no receiver, no export, a 30 s join timeout, one
// sweep or /probe span in a hundred sampled.
func DefaultTracingConfig() TracingConfig {
	return TracingConfig{JoinTimeout: model.Duration(30 * time.Second), ExportProtocol: "grpc", SweepExportRatio: 0.01}
}

// Receives reports whether a receiver is configured.
func (t TracingConfig) Receives() bool {
	return t.OTLPGRPCListenAddress != "" || t.OTLPHTTPListenAddress != ""
}

type plainTracing TracingConfig

// UnmarshalYAML sets the defaults of `tracing` and validates it.
func (t *TracingConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*t = DefaultTracingConfig()
	if err := unmarshal((*plainTracing)(t)); err != nil {
		return err
	}
	return t.Validate()
}

// Validate reports the first problem, naming the field, its value and what
// was expected.
func (t TracingConfig) Validate() error {
	for _, f := range []struct{ name, v string }{
		{"otlp_grpc_listen_address", t.OTLPGRPCListenAddress},
		{"otlp_http_listen_address", t.OTLPHTTPListenAddress},
	} {
		if f.v == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(f.v); err != nil {
			return fmt.Errorf("tracing.%s=%q; expected host:port, e.g. 127.0.0.1:4317 (%v)", f.name, f.v, err)
		}
	}
	if t.OTLPGRPCListenAddress != "" && t.OTLPGRPCListenAddress == t.OTLPHTTPListenAddress {
		return fmt.Errorf("tracing.otlp_grpc_listen_address and otlp_http_listen_address are both %q; expected two addresses", t.OTLPGRPCListenAddress)
	}
	if j := time.Duration(t.JoinTimeout); j <= 0 || j > 10*time.Minute {
		return fmt.Errorf("tracing.join_timeout=%s; expected more than 0 and at most 10m", t.JoinTimeout)
	}
	if t.ExportEndpoint != "" {
		u, err := url.Parse(t.ExportEndpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("tracing.export_endpoint=%q; expected an http:// or https:// URL, e.g. http://tempo:4317", RedactURL(t.ExportEndpoint))
		}
		if u.User != nil || hasUserinfo(t.ExportEndpoint) {
			// The exporter sends no credentials from the URL, and slaprobe logs
			// the endpoint and shows it on /config.
			return fmt.Errorf("tracing.export_endpoint=%q carries credentials; expected a URL without user:password@ (the span exporter does not send them, and the endpoint is logged and shown on /config)", RedactURL(t.ExportEndpoint))
		}
	}
	if r := t.SweepExportRatio; math.IsNaN(r) || r < 0 || r > 1 {
		return fmt.Errorf("tracing.sweep_export_ratio=%v; expected a number from 0 to 1, e.g. 0.01", r)
	}
	switch t.ExportProtocol {
	case "grpc", "http/protobuf":
	default:
		return fmt.Errorf("tracing.export_protocol=%q; expected grpc or http/protobuf", t.ExportProtocol)
	}
	return nil
}

// checkTracingFiles resolves tracing.receiver_web_config_file against dir,
// the config file's directory, and validates the file it names.
func (c *Config) checkTracingFiles(dir string) error {
	t := &c.Tracing
	if t.ReceiverWebConfigFile == "" {
		return nil
	}
	if dir != "" && !filepath.IsAbs(t.ReceiverWebConfigFile) {
		t.ReceiverWebConfigFile = filepath.Join(dir, t.ReceiverWebConfigFile)
	}
	if !t.Receives() {
		return fmt.Errorf("tracing.receiver_web_config_file=%q, but no receiver is configured; expected otlp_grpc_listen_address or otlp_http_listen_address too", t.ReceiverWebConfigFile)
	}
	if _, err := webconfig.Read(t.ReceiverWebConfigFile); err != nil {
		return fmt.Errorf("tracing.receiver_web_config_file=%q: %v; expected an exporter-toolkit web configuration file (tls_server_config, basic_auth_users with bcrypt hashes), as for --web.config.file", t.ReceiverWebConfigFile, err)
	}
	return nil
}

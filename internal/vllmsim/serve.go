package vllmsim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"gopkg.in/yaml.v3"
)

// LoadConfigFile decodes a YAML file over cfg (fields absent from the file
// keep their value), rejecting unknown fields with their line.
func LoadConfigFile(path string, cfg *Config) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Serve serves the engine's API on ln until ctx is done, then shuts down
// gracefully (5 s at most). It returns nil after ctx ends.
func (e *Engine) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: e.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	}
}

// ListenAndServe runs an engine of cfg on address until ctx is done: the
// `slaprobe sim` command. It logs the engine's shape once it listens, and
// returns an error naming what failed (the config, the address, serving).
func ListenAndServe(ctx context.Context, cfg Config, address string, logger *slog.Logger) error {
	eng, err := New(cfg, logger.With("component", "sim"))
	if err != nil {
		return fmt.Errorf("invalid simulator config: %w", err)
	}
	defer eng.Close()
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", address, err)
	}
	logger.Info("simulated vLLM engine listening", "address", ln.Addr().String(), "model", cfg.ModelName,
		"max_model_len", cfg.MaxModelLen, "max_num_seqs", cfg.MaxNumSeqs,
		"kv_cache_tokens", cfg.KVCacheTokens, "prefix_caching", cfg.EnablePrefixCaching,
		"per_request_metrics", cfg.EnablePerRequestMetrics, "otlp_traces_endpoint", cfg.OTLPTracesEndpoint)
	if err := eng.Serve(ctx, ln); err != nil {
		return fmt.Errorf("simulator stopped: %w", err)
	}
	return nil
}

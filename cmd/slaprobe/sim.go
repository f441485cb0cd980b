package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
)

func init() {
	def := vllmsim.DefaultConfig()
	cmd := app.Command("sim", "Serve the simulated vLLM engine alone: an OpenAI-compatible streaming API, /v1/models, /tokenize and vLLM's /metrics, no GPU needed.")
	listen := cmd.Flag("sim.listen-address", "Address the simulated engine listens on.").Default(":8000").String()
	file := cmd.Flag("sim.config.file",
		"YAML file setting any field of the simulator's config (model_name, max_num_seqs, decode_base, faults, …); the flags below override it.").
		PlaceHolder("PATH").String()
	var set struct{ model, seqs, maxLen, seed, scale, step, reasoning bool }
	model := cmd.Flag("sim.model", "Served model name.").Default(def.ModelName).IsSetByUser(&set.model).String()
	seqs := cmd.Flag("sim.max-num-seqs", "Most requests decoding at once; the rest wait in the queue.").
		Default(strconv.Itoa(def.MaxNumSeqs)).IsSetByUser(&set.seqs).Int()
	maxLen := cmd.Flag("sim.max-model-len", "Context window in tokens, reported by /v1/models.").
		Default(strconv.Itoa(def.MaxModelLen)).IsSetByUser(&set.maxLen).Int()
	seed := cmd.Flag("sim.seed", "Seed of every random choice; the same seed gives the same run.").
		Default(strconv.FormatUint(def.Seed, 10)).IsSetByUser(&set.seed).Uint64()
	scale := cmd.Flag("sim.time-scale", "Multiplier of every modelled duration: 0.1 runs ten times faster than the modelled GPU.").
		Default(strconv.FormatFloat(def.TimeScale, 'g', -1, 64)).IsSetByUser(&set.scale).Float64()
	step := cmd.Flag("sim.tokens-per-step", "Tokens per decode step per request; above 1 mimics MTP / speculative decoding (multi-token chunks).").
		Default(strconv.Itoa(def.TokensPerStep)).IsSetByUser(&set.step).Int()
	reasoning := cmd.Flag("sim.reasoning-tokens", "Leading output tokens sent as reasoning, as a thinking model does.").
		Default(strconv.Itoa(def.ReasoningTokens)).IsSetByUser(&set.reasoning).Int()

	register(cmd, func() int {
		logger := newLogger()
		cfg := vllmsim.DefaultConfig()
		if *file != "" {
			if err := loadSimConfig(*file, &cfg); err != nil {
				logger.Error("cannot load the simulator config", "err", err)
				return 1
			}
		}
		// Flags win over the file only when given.
		if set.model {
			cfg.ModelName = *model
		}
		if set.seqs {
			cfg.MaxNumSeqs = *seqs
		}
		if set.maxLen {
			cfg.MaxModelLen = *maxLen
		}
		if set.seed {
			cfg.Seed = *seed
		}
		if set.scale {
			cfg.TimeScale = *scale
		}
		if set.step {
			cfg.TokensPerStep = *step
		}
		if set.reasoning {
			cfg.ReasoningTokens = *reasoning
		}
		eng, err := vllmsim.New(cfg, logger.With("component", "sim"))
		if err != nil {
			logger.Error("invalid simulator config", "err", err)
			return 1
		}
		defer eng.Close()

		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			logger.Error("cannot listen", "address", *listen, "err", err)
			return 1
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		logger.Info("simulated vLLM engine listening", "address", ln.Addr().String(), "model", cfg.ModelName,
			"max_model_len", cfg.MaxModelLen, "max_num_seqs", cfg.MaxNumSeqs)
		if err := serveUntil(ctx, ln, eng.Handler()); err != nil {
			logger.Error("simulator stopped", "err", err)
			return 1
		}
		return 0
	})
}

// loadSimConfig decodes a YAML file over cfg, rejecting unknown fields.
func loadSimConfig(path string, cfg *vllmsim.Config) error {
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

// serveUntil serves h on ln until ctx is done, then shuts down gracefully.
func serveUntil(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
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

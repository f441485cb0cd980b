package main

import (
	"context"
	"strconv"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
)

func addSim(c *cli) {
	def := vllmsim.DefaultConfig()
	cmd := c.app.Command("sim", "Serve the simulated vLLM engine alone: an OpenAI-compatible streaming API, /v1/models, /tokenize and vLLM's /metrics, no GPU needed.")
	listen := cmd.Flag("sim.listen-address", "Address the simulated engine listens on.").Default(":8000").String()
	file := cmd.Flag("sim.config.file",
		"YAML file setting any field of the simulator's config (model_name, max_num_seqs, decode_base, faults, …); the flags below override it.").
		PlaceHolder("PATH").String()
	model := overrideFlag(cmd.Flag("sim.model", "Served model name.").Default(def.ModelName), (*kingpin.FlagClause).String)
	seqs := overrideFlag(cmd.Flag("sim.max-num-seqs", "Most requests decoding at once; the rest wait in the queue.").
		Default(strconv.Itoa(def.MaxNumSeqs)), (*kingpin.FlagClause).Int)
	maxLen := overrideFlag(cmd.Flag("sim.max-model-len", "Context window in tokens, reported by /v1/models.").
		Default(strconv.Itoa(def.MaxModelLen)), (*kingpin.FlagClause).Int)
	seed := overrideFlag(cmd.Flag("sim.seed", "Seed of every random choice; the same seed gives the same run.").
		Default(strconv.FormatUint(def.Seed, 10)), (*kingpin.FlagClause).Uint64)
	scale := overrideFlag(cmd.Flag("sim.time-scale", "Multiplier of every modelled duration: 0.1 runs ten times faster than the modelled GPU.").
		Default(strconv.FormatFloat(def.TimeScale, 'g', -1, 64)), (*kingpin.FlagClause).Float64)
	step := overrideFlag(cmd.Flag("sim.tokens-per-step", "Tokens per decode step per request; above 1 mimics MTP / speculative decoding (multi-token chunks).").
		Default(strconv.Itoa(def.TokensPerStep)), (*kingpin.FlagClause).Int)
	reasoning := overrideFlag(cmd.Flag("sim.reasoning-tokens", "Leading output tokens sent as reasoning, as a thinking model does.").
		Default(strconv.Itoa(def.ReasoningTokens)), (*kingpin.FlagClause).Int)
	kvTokens := overrideFlag(cmd.Flag("sim.kv-cache-tokens",
		"KV cache size in tokens (16-token blocks), shared by running requests and the prefix cache: finished requests' blocks stay cached until new tokens need them, least recently freed first; running requests that outgrow it are preempted. At least --sim.max-model-len.").
		Default(strconv.Itoa(def.KVCacheTokens)), (*kingpin.FlagClause).Int)
	prefix := overrideFlag(cmd.Flag("sim.enable-prefix-caching",
		"Automatic prefix caching of prompt and generated tokens' full blocks, as vLLM v1 does (on by default; --no-sim.enable-prefix-caching turns it off).").
		Default(strconv.FormatBool(def.EnablePrefixCaching)), (*kingpin.FlagClause).Bool)
	details := overrideFlag(cmd.Flag("sim.enable-prompt-tokens-details",
		"Report cached prompt tokens in usage.prompt_tokens_details.cached_tokens (Responses: input_tokens_details; Messages: cache_read_input_tokens), as vLLM's --enable-prompt-tokens-details does (on by default here; off by default in vLLM).").
		Default(strconv.FormatBool(def.EnablePromptTokensDetails)), (*kingpin.FlagClause).Bool)
	perReq := overrideFlag(cmd.Flag("sim.enable-per-request-metrics",
		"Add vLLM's per-request `metrics` object (queue_time_ms, time_to_first_token_ms, generation_time_ms, mean_itl_ms, tokens_per_second) to the final usage chunk, as vLLM's --enable-per-request-metrics does."),
		(*kingpin.FlagClause).Bool)
	otlpEndpoint := overrideFlag(cmd.Flag("sim.otlp-traces-endpoint",
		"Send one llm_request span per request, with vLLM's attribute names, to this OTLP endpoint (vLLM's --otlp-traces-endpoint), e.g. http://127.0.0.1:4317. The protocol is grpc unless OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf.").
		PlaceHolder("URL"), (*kingpin.FlagClause).String)

	c.command(cmd, func(ctx context.Context) int {
		logger := c.logger()
		cfg := vllmsim.DefaultConfig()
		if *file != "" {
			if err := vllmsim.LoadConfigFile(*file, &cfg); err != nil {
				logger.Error("cannot load the simulator config", "err", err)
				return 1
			}
		}
		model.apply(&cfg.ModelName)
		seqs.apply(&cfg.MaxNumSeqs)
		maxLen.apply(&cfg.MaxModelLen)
		seed.apply(&cfg.Seed)
		scale.apply(&cfg.TimeScale)
		step.apply(&cfg.TokensPerStep)
		reasoning.apply(&cfg.ReasoningTokens)
		kvTokens.apply(&cfg.KVCacheTokens)
		prefix.apply(&cfg.EnablePrefixCaching)
		details.apply(&cfg.EnablePromptTokensDetails)
		perReq.apply(&cfg.EnablePerRequestMetrics)
		otlpEndpoint.apply(&cfg.OTLPTracesEndpoint)
		if err := vllmsim.ListenAndServe(ctx, cfg, *listen, logger); err != nil {
			logger.Error("simulated engine failed", "err", err)
			return 1
		}
		return 0
	})
}

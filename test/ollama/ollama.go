// Package ollama runs a real inference engine for tests: Ollama v0.17.4 (llama.cpp's ggml on CPU),
// serving a tiny llama-architecture model with random weights, on a free loopback port, with its own
// temporary model store, stopped when the test ends.
//
// `make test-deps` (scripts/test-deps.sh) builds `ollama` and `tinymodel` (the generator of the
// model) from the versions pinned in test/tools/ollama/go.mod into .tools/bin/. Tests that need them
// call Start, or SkipIfMissing first; without them they skip, unless SLAPROBE_REQUIRE_DEPS=1 (set by
// `make test`), where they fail instead.
//
// What the engine does and lacks (no /tokenize, no /metrics, ignore_eos ignored, prompts longer than
// the context cut silently) is in test/ollama/README.md.
package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/test/testproc"
)

const (
	// Version is the Ollama release pinned in test/tools/ollama/go.mod.
	Version = "v0.17.4"
	// EnvBinary and EnvTinyModel name explicit paths to the two programs.
	EnvBinary    = "SLAPROBE_OLLAMA"
	EnvTinyModel = "SLAPROBE_TINYMODEL"
	// Model is the name the model is created under; /v1/models lists it as Model + ":latest".
	Model = "tiny"

	startTimeout = 60 * time.Second
)

// Options configures one engine. Zero values take the defaults noted.
type Options struct {
	// ContextLength is OLLAMA_CONTEXT_LENGTH, the context window the engine gives each request;
	// longer prompts are cut to it. Default 8192.
	ContextLength int
	// Parallel is OLLAMA_NUM_PARALLEL, the requests decoded at once; default 4.
	Parallel int
	// EOSLogit is tinymodel's -eos-logit: "" or "never" (the default) forbids EOS, so every answer
	// is exactly max_tokens long; a number lets the model end answers early (about -1: ~30 tokens on
	// average; higher ends them sooner).
	EOSLogit string
	// Layers and Embedding size the model (tinymodel -layers, -embd); defaults 1 and 64. A bigger
	// model makes each token cost more compute, so timings are less dominated by the server's own
	// per-token overhead.
	Layers, Embedding int
	// FlashAttention turns on OLLAMA_FLASH_ATTENTION; off by default: on CPU it halves prefill speed.
	FlashAttention bool
	// Debug turns on OLLAMA_DEBUG: the engine then logs, for every request, how much of the prompt
	// it took from the KV cache of the slot it ran in (CacheLoads).
	Debug bool
	// Threads is the model's num_thread, the CPU threads the engine computes with; default 1, which
	// leaves the other core of a 2-core machine to the client and the engine's own HTTP side, so
	// that a client's timestamps are not delayed by the engine's compute threads.
	Threads int
}

// Server is a running engine with the model created.
type Server struct {
	URL   string // base URL, http://127.0.0.1:<port>, without /v1
	Model string // the model's name as /v1/models lists it
	Port  int

	bin  string
	env  []string
	proc *testproc.Process
}

// Logs returns the tail of the engine's log.
func (s *Server) Logs() string { return s.proc.Logs() }

// SkipIfMissing skips the test when ollama or tinymodel cannot be found, saying how to get them, and
// returns their paths. With SLAPROBE_REQUIRE_DEPS=1 a missing program fails the test instead.
func SkipIfMissing(t testing.TB) (ollama, tinymodel string) {
	t.Helper()
	ollama = testproc.SkipIfMissing(t, "ollama", EnvBinary, "ollama "+Version)
	tinymodel = testproc.SkipIfMissing(t, "tinymodel", EnvTinyModel, "tinymodel (test/tools/ollama/cmd/tinymodel)")
	return ollama, tinymodel
}

// Start writes the model, starts `ollama serve` on a free loopback port with its own model store,
// creates the model and loads it (so the first probe does not pay for loading). The engine is
// stopped when the test ends; its log is printed if the test failed.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	bin, gen := SkipIfMissing(t)
	// The engine computes flat out on a core: no timing check of another package runs beside it.
	testproc.Quiet(t)
	if opts.ContextLength == 0 {
		opts.ContextLength = 8192
	}
	if opts.Parallel == 0 {
		opts.Parallel = 4
	}
	if opts.EOSLogit == "" {
		opts.EOSLogit = "never"
	}
	if opts.Layers == 0 {
		opts.Layers = 1
	}
	if opts.Embedding == 0 {
		opts.Embedding = 64
	}
	if opts.Threads == 0 {
		opts.Threads = 1
	}
	dir := t.TempDir()
	modelDir := filepath.Join(dir, "model")
	out, err := exec.Command(gen, "-out", modelDir, "-eos-logit", opts.EOSLogit,
		"-layers", strconv.Itoa(opts.Layers), "-embd", strconv.Itoa(opts.Embedding)).CombinedOutput()
	if err != nil {
		t.Fatalf("tinymodel: %v\n%s", err, out)
	}

	var s *Server
	for try := 0; ; try++ {
		port, err := testproc.FreePort()
		if err != nil {
			t.Fatalf("ollama: pick a free port: %v", err)
		}
		s, err = start(bin, port, dir, opts)
		if err == nil {
			break
		}
		// Another process may have taken the port between FreePort and the engine's listen.
		if try >= 2 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatalf("ollama: %v", err)
		}
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("ollama serve log (tail):\n%s", s.Logs())
		}
	})
	modelfile := filepath.Join(modelDir, "Modelfile")
	f, err := os.OpenFile(modelfile, os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = fmt.Fprintf(f, "PARAMETER num_thread %d\n", opts.Threads)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatalf("ollama: Modelfile: %v", err)
	}
	create := exec.Command(bin, "create", Model, "-f", modelfile)
	create.Env = s.env
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("ollama create: %v\n%s\n%s", err, out, s.Logs())
	}
	s.Model = Model + ":latest"
	if err := s.load(); err != nil {
		t.Fatalf("ollama: load %s: %v\n%s", s.Model, err, s.Logs())
	}
	return s
}

func start(bin string, port int, dir string, opts Options) (*Server, error) {
	s := &Server{
		URL:  "http://127.0.0.1:" + strconv.Itoa(port),
		Port: port,
		bin:  bin,
	}
	fa := "false"
	if opts.FlashAttention {
		fa = "true"
	}
	// Only what the engine needs: a HOME of its own keeps it from reading or writing the user's
	// ~/.ollama (its key pair lives there).
	s.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"OLLAMA_HOST=127.0.0.1:" + strconv.Itoa(port),
		"OLLAMA_MODELS=" + filepath.Join(dir, "models"),
		"OLLAMA_CONTEXT_LENGTH=" + strconv.Itoa(opts.ContextLength),
		"OLLAMA_NUM_PARALLEL=" + strconv.Itoa(opts.Parallel),
		"OLLAMA_KEEP_ALIVE=-1",
		"OLLAMA_FLASH_ATTENTION=" + fa,
		"OLLAMA_NOPRUNE=1",
	}
	if opts.Debug {
		s.env = append(s.env, "OLLAMA_DEBUG=1")
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = s.env
	proc, err := testproc.Start(cmd)
	if err != nil {
		return nil, err
	}
	s.proc = proc
	if err := proc.WaitHTTP(s.URL+"/api/version", startTimeout, func(status int, _ []byte) bool { return status == http.StatusOK }); err != nil {
		s.Stop()
		return nil, fmt.Errorf("%s serve: %w\n%s", bin, err, s.Logs())
	}
	return s, nil
}

// load asks for a one-token answer, which starts the model's runner.
func (s *Server) load() error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	_, err := s.Chat(ctx, ChatRequest{Prompt: "hello", NumPredict: 1})
	return err
}

// ChatRequest is one request to Ollama's native /api/chat.
type ChatRequest struct {
	Prompt     string
	NumPredict int
}

// ChatResult is what Ollama itself reports of one native /api/chat request: its own timings.
type ChatResult struct {
	PromptEvalCount    int           `json:"prompt_eval_count"`
	PromptEvalDuration time.Duration `json:"prompt_eval_duration"`
	EvalCount          int           `json:"eval_count"`
	EvalDuration       time.Duration `json:"eval_duration"`
	LoadDuration       time.Duration `json:"load_duration"`
	TotalDuration      time.Duration `json:"total_duration"`
	DoneReason         string        `json:"done_reason"`
}

// DecodeSpeed is Ollama's own generation speed of the request: eval_count / eval_duration.
func (r ChatResult) DecodeSpeed() float64 {
	if r.EvalDuration <= 0 {
		return 0
	}
	return float64(r.EvalCount) / r.EvalDuration.Seconds()
}

// Chat sends a non-streaming native /api/chat request and returns the engine's own timings.
// truncate is off: a prompt longer than the context is an error there, not cut.
func (s *Server) Chat(ctx context.Context, r ChatRequest) (ChatResult, error) {
	body, _ := json.Marshal(map[string]any{
		"model":    s.Model,
		"stream":   false,
		"truncate": false,
		"messages": []map[string]string{{"role": "user", "content": r.Prompt}},
		"options":  map[string]any{"num_predict": r.NumPredict},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/api/chat", bytes.NewReader(body))
	if err != nil {
		return ChatResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ChatResult{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return ChatResult{}, fmt.Errorf("/api/chat: HTTP %d: %s", resp.StatusCode, b)
	}
	var out ChatResult
	if err := json.Unmarshal(b, &out); err != nil {
		return ChatResult{}, fmt.Errorf("/api/chat: %w: %.200s", err, b)
	}
	return out, nil
}

// Stop stops the engine now (Start also does when the test ends). The runner it started is its
// child and goes with it.
func (s *Server) Stop() { s.proc.Stop(5 * time.Second) }

// CacheLoad is what the engine's runner logged of one request's use of its prompt cache (with
// Options.Debug): the slot it ran in, the prompt's length in tokens, and how many of them it
// took from the KV cache the slot held (its "used"; the rest were prefilled).
type CacheLoad struct {
	Slot, Prompt, Used int
}

var cacheLoadLine = regexp.MustCompile(`msg="loading cache slot" id=(\d+) cache=\d+ prompt=(\d+) used=(\d+)`)

// CacheLoads returns the requests' cache loads still in the tail of the engine's log, oldest
// first; none without Options.Debug.
func (s *Server) CacheLoads() []CacheLoad {
	var out []CacheLoad
	for _, m := range cacheLoadLine.FindAllStringSubmatch(s.Logs(), -1) {
		slot, _ := strconv.Atoi(m[1])
		prompt, _ := strconv.Atoi(m[2])
		used, _ := strconv.Atoi(m[3])
		out = append(out, CacheLoad{Slot: slot, Prompt: prompt, Used: used})
	}
	return out
}

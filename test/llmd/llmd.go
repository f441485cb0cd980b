// Package llmd runs the pinned third-party llm-d-inference-sim for tests: offline, on a free loopback
// port, killed when the test ends.
//
// The binary is built by `make test-deps` (scripts/test-deps.sh) from the version pinned in
// test/tools/go.mod. Tests that need it call Start, or SkipIfMissing first; without the binary they
// skip, unless SLAPROBE_REQUIRE_DEPS=1 (set by `make test`), where they fail instead.
//
// What the simulator does and does not do is in test/llmd/README.md.
package llmd

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/test/testproc"
)

const (
	// Version is the llm-d-inference-sim release pinned in test/tools/go.mod.
	Version = "v0.10.2"
	// BinaryName is the simulator's executable name.
	BinaryName = "llm-d-inference-sim"
	// EnvBinary names an explicit path to the simulator; it wins over every other place.
	EnvBinary = "SLAPROBE_LLMD_SIM"
	// EnvRequire, when "1", turns a missing simulator into a test failure instead of a skip.
	EnvRequire = testproc.EnvRequire
	// DefaultModel is the served model name. It is not a Hugging Face model, and the simulator
	// also runs with --force-dummy-tokenizer, so it never looks for a tokenizer on the network.
	DefaultModel = "llmd-sim-model"

	startTimeout = 30 * time.Second
	startTries   = 3
)

// Options configures one simulator process. Zero values take the defaults noted.
type Options struct {
	Model       string        // served model name; default DefaultModel
	TTFT        time.Duration // --time-to-first-token (constant, whatever the prompt length)
	ITL         time.Duration // --inter-token-latency (the sleep before every token but the first)
	MaxNumSeqs  int           // --max-num-seqs; default 8
	MaxModelLen int           // --max-model-len, reported by /v1/models and /tokenize; default 8192
	// Echo answers with the last message's text instead of random sentences (--mode echo).
	// Echo ignores max_tokens and ignore_eos: keep the default random mode for exact output lengths.
	Echo bool
	Seed int64 // --seed; default 1, so runs are repeatable
	// PrefillOverhead and PrefillPerToken make TTFT grow with the uncached prompt
	// (overhead + n × per-token). They apply only when TTFT is zero.
	PrefillOverhead time.Duration
	PrefillPerToken time.Duration
	// LoadFactor (--time-factor-under-load, ≥ 1) stretches TTFT and ITL linearly with the number of
	// running requests, up to this factor at MaxNumSeqs. Default 1: latency ignores load.
	LoadFactor float64
	// KVCache turns on the simulated prefix cache (--enable-kvcache): a repeated prompt prefix then
	// reports usage.prompt_tokens_details.cached_tokens > 0 and vllm:prefix_cache_hits grows.
	KVCache   bool
	BlockSize int      // --block-size for KVCache (8, 16, 32, 64 or 128); default 16
	Args      []string // extra flags, appended last
	// Port to listen on; 0 picks a free one. Set it to restart a simulator with other options
	// where its clients already point.
	Port int
}

// Server is a running simulator.
type Server struct {
	URL   string // base URL, http://127.0.0.1:<port>, without /v1
	Model string // served model name
	Port  int
	Args  []string // the command line it was started with, binary excluded

	proc *testproc.Process
}

// Logs returns the tail of the simulator's output (klog lines on stderr).
func (s *Server) Logs() string { return s.proc.Logs() }

// Binary finds the simulator: $SLAPROBE_LLMD_SIM, then <repo>/.tools/bin/llm-d-inference-sim, then PATH.
// When $SLAPROBE_LLMD_SIM is set but is not an executable file, it returns that path and false.
func Binary() (string, bool) { return testproc.Binary(BinaryName, EnvBinary) }

// SkipIfMissing skips the test when the simulator cannot be found, saying how to get it, and returns
// its path otherwise. With SLAPROBE_REQUIRE_DEPS=1 a missing simulator fails the test instead.
func SkipIfMissing(t testing.TB) string {
	t.Helper()
	return testproc.SkipIfMissing(t, BinaryName, EnvBinary, "llm-d-inference-sim "+Version)
}

// Start runs the simulator on a free loopback port and waits until it serves /v1/models.
// The process is killed when the test ends; its log is printed if the test failed.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	bin := SkipIfMissing(t)
	opts = opts.withDefaults()

	var lastErr error
	for try := 0; try < startTries; try++ {
		port, err := opts.Port, error(nil)
		if port == 0 {
			port, err = testproc.FreePort()
		}
		if err != nil {
			t.Fatalf("llmd: pick a free port: %v", err)
		}
		s, err := start(bin, port, opts)
		if err == nil {
			t.Cleanup(func() {
				s.stop()
				if t.Failed() {
					t.Logf("llm-d-inference-sim %s log (tail):\n%s", strings.Join(s.Args, " "), s.Logs())
				}
			})
			return s
		}
		lastErr = err
		// Another process may have taken the port between freePort and the simulator's listen. A fixed
		// port may still be held by the process just stopped: wait a little.
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
		if opts.Port != 0 {
			time.Sleep(500 * time.Millisecond)
		}
	}
	t.Fatalf("llmd: %v", lastErr)
	return nil
}

func (o Options) withDefaults() Options {
	if o.Model == "" {
		o.Model = DefaultModel
	}
	if o.MaxNumSeqs == 0 {
		o.MaxNumSeqs = 8
	}
	if o.MaxModelLen == 0 {
		o.MaxModelLen = 8192
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.LoadFactor == 0 {
		o.LoadFactor = 1
	}
	if o.BlockSize == 0 {
		o.BlockSize = 16
	}
	return o
}

// args builds the command line. Every flag is spelled out so that the simulator's defaults
// (for example max-num-seqs 5, max-model-len 1024) never leak into a test by surprise.
func (o Options) args(port int) []string {
	mode := "random"
	if o.Echo {
		mode = "echo"
	}
	a := []string{
		"--port=" + strconv.Itoa(port),
		"--model=" + o.Model,
		// Without it, the simulator asks huggingface.co whether the model exists, and for a real
		// model would need a tokenizer render service; the network is not there in tests.
		"--force-dummy-tokenizer",
		"--mode=" + mode,
		"--max-num-seqs=" + strconv.Itoa(o.MaxNumSeqs),
		"--max-model-len=" + strconv.Itoa(o.MaxModelLen),
		"--time-to-first-token=" + o.TTFT.String(),
		"--inter-token-latency=" + o.ITL.String(),
		"--prefill-overhead=" + o.PrefillOverhead.String(),
		"--prefill-time-per-token=" + o.PrefillPerToken.String(),
		"--time-factor-under-load=" + strconv.FormatFloat(o.LoadFactor, 'g', -1, 64),
		"--seed=" + strconv.FormatInt(o.Seed, 10),
	}
	if o.KVCache {
		a = append(a,
			"--enable-kvcache",
			"--block-size="+strconv.Itoa(o.BlockSize),
			// No KV-event publishing: it would dial tcp://127.0.0.1:5557.
			"--zmq-endpoint=",
		)
	}
	return append(a, o.Args...)
}

func start(bin string, port int, opts Options) (*Server, error) {
	s := &Server{
		URL:   "http://127.0.0.1:" + strconv.Itoa(port),
		Model: opts.Model,
		Port:  port,
		Args:  opts.args(port),
	}
	cmd := exec.Command(bin, s.Args...)
	cmd.Env = append(os.Environ(), "POD_IP=127.0.0.1") // the KV cache refuses to start without it
	proc, err := testproc.Start(cmd)
	if err != nil {
		return nil, err
	}
	s.proc = proc
	// The simulator exits with status 0 on a configuration error, so an early exit is a failure
	// whatever its status.
	if err := proc.WaitHTTP(s.URL+"/v1/models", startTimeout, func(status int, body []byte) bool {
		return status == http.StatusOK && bytes.Contains(body, []byte(strconv.Quote(s.Model)))
	}); err != nil {
		s.stop()
		return nil, fmt.Errorf("%s %s: %w\n%s", bin, strings.Join(s.Args, " "), err, s.Logs())
	}
	return s, nil
}

// Stop kills the simulator now (Start also does when the test ends); its port is free afterwards.
func (s *Server) Stop() { s.stop() }

// stop kills the process: a graceful stop would wait up to 30 s for requests still generating,
// and the simulator keeps generating after a client disconnects.
func (s *Server) stop() { s.proc.Stop(0) }

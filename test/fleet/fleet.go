// Package fleet runs a real fleet for the alerting tests: Ollama engines (test/ollama) behind the
// test gateway (test/gateway), `slaprobe run` probing them, and the path a page travels
// (test/alerting): a real Prometheus evaluating the generated rules and a real Alertmanager routing
// to a webhook. The tests drive a real cause on the fleet (an overloaded engine, a killed one, a
// slowed one, a router without affinity) and check which page arrives.
package fleet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/slaprobe/slaprobe/test/alerting"
	"github.com/slaprobe/slaprobe/test/gateway"
	"github.com/slaprobe/slaprobe/test/ollama"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// Scrape is the scrape and rule evaluation interval of the fleet's Prometheus.
const Scrape = time.Second

// Stack is slaprobe with the path a page travels: Prometheus scraping it with the rules loaded,
// Alertmanager, and the webhook Alertmanager notifies.
type Stack struct {
	Slaprobe     *testproc.Process
	SlaprobeAddr string // host:port of slaprobe's web server
	Prom         *alerting.Prometheus
	Alertmanager string // host:port
	Hook         *alerting.Webhook
}

// StartStack starts `slaprobe run` on the config (YAML), the webhook, Alertmanager routing to it, and
// Prometheus scraping slaprobe every Scrape with the rule file rules and sending to Alertmanager.
// Everything stops when the test ends.
func StartStack(t testing.TB, ctx context.Context, slaprobeConfig string, rules []byte) *Stack {
	t.Helper()
	promBin := alerting.PrometheusBinary(t)
	amBin := alerting.AlertmanagerBinary(t)
	bin := BuildSlaprobe(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "slaprobe.yml")
	if err := os.WriteFile(cfg, []byte(slaprobeConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Stack{Hook: &alerting.Webhook{}}
	s.Slaprobe = alerting.StartProcess(t, "slaprobe run", bin, "run", "--config.file="+cfg, "--web.listen-address=127.0.0.1:0")
	s.SlaprobeAddr = alerting.WaitListening(t, ctx, s.Slaprobe)
	hook := httptest.NewServer(s.Hook)
	t.Cleanup(hook.Close)
	s.Alertmanager = alerting.StartAlertmanager(t, ctx, amBin, dir, hook.URL)
	ruleFile := filepath.Join(dir, "slaprobe.rules.yml")
	if err := os.WriteFile(ruleFile, rules, 0o644); err != nil {
		t.Fatal(err)
	}
	iv := Scrape.String()
	static := func(addr string) []map[string][]string { return []map[string][]string{{"targets": {addr}}} }
	promCfg, err := yaml.Marshal(map[string]any{
		"global":     map[string]string{"scrape_interval": iv, "scrape_timeout": iv, "evaluation_interval": iv},
		"rule_files": []string{ruleFile},
		"alerting":   map[string]any{"alertmanagers": []map[string]any{{"static_configs": static(s.Alertmanager)}}},
		// job="slaprobe" is what the rules select, as in deploy/prometheus.yml. Ollama has no /metrics.
		"scrape_configs": []map[string]any{{"job_name": "slaprobe", "static_configs": static(s.SlaprobeAddr)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Prom = alerting.StartPrometheus(t, ctx, promBin, t.TempDir(), promCfg, "--rules.alert.resend-delay=1s")
	return s
}

var slaprobeBuild struct {
	once sync.Once
	path string
	err  error
}

// BuildSlaprobe builds ./cmd/slaprobe once per test process, as the image does (-trimpath), and
// returns its path.
func BuildSlaprobe(t testing.TB) string {
	t.Helper()
	slaprobeBuild.once.Do(func() {
		root, ok := testproc.RepoRoot()
		if !ok {
			slaprobeBuild.err = fmt.Errorf("no repository root above the working directory")
			return
		}
		dir, err := os.MkdirTemp("", "slaprobe-fleet-")
		if err != nil {
			slaprobeBuild.err = err
			return
		}
		bin := filepath.Join(dir, "slaprobe")
		testproc.SeesTree()
		cmd := exec.Command("go", "build", "-buildvcs=false", "-trimpath", "-o", bin, "./cmd/slaprobe")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			slaprobeBuild.err = fmt.Errorf("go build ./cmd/slaprobe: %v\n%s", err, out)
			return
		}
		slaprobeBuild.path = bin
	})
	if slaprobeBuild.err != nil {
		t.Fatal(slaprobeBuild.err)
	}
	return slaprobeBuild.path
}

// Router is a gateway whose policy can be swapped while it serves (round-robin to affinity and
// back), as an operator changes a router's config.
type Router struct {
	URL      string
	backends []string
	gw       atomic.Pointer[gateway.Gateway]
}

// NewRouter serves a gateway with the policy over the backends' base URLs until the test ends.
func NewRouter(t testing.TB, policy gateway.Policy, backends ...string) *Router {
	t.Helper()
	r := &Router{backends: backends}
	r.SetPolicy(t, policy)
	r.URL, _ = testproc.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { r.gw.Load().ServeHTTP(w, req) }))
	return r
}

// SetPolicy routes the requests that arrive from now on with a new gateway of that policy.
func (r *Router) SetPolicy(t testing.TB, policy gateway.Policy) {
	t.Helper()
	g, err := gateway.New(policy, r.backends...)
	if err != nil {
		t.Fatal(err)
	}
	r.gw.Store(g)
}

// Gateway is the gateway now serving.
func (r *Router) Gateway() *gateway.Gateway { return r.gw.Load() }

// CacheReporter serves a proxy in front of an engine started with ollama.Options.Debug that adds the
// engine's own count of the prompt tokens it took from its KV cache to each streamed answer's usage,
// as `usage.prompt_tokens_details.cached_tokens` (what vLLM reports with
// --enable-prompt-tokens-details). Ollama computes that count for every request and logs it
// (`loading cache slot … prompt=P used=U`, ollama.Server.CacheLoads) but leaves it out of usage; the
// proxy finds the latest such line whose prompt length is the answer's usage.prompt_tokens. Requests
// of the same prompt length on the same engine at once would be told apart wrongly: give each engine
// one conversation at a time. Matched and Unmatched count the usages it could and could not match.
type CacheReporter struct {
	URL                string
	Matched, Unmatched atomic.Int64
	srv                *ollama.Server
}

// NewCacheReporter serves a CacheReporter for srv until the test ends.
func NewCacheReporter(t testing.TB, srv *ollama.Server) *CacheReporter {
	t.Helper()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	c := &CacheReporter{srv: srv}
	p := httputil.NewSingleHostReverseProxy(u)
	p.FlushInterval = -1
	p.ModifyResponse = func(resp *http.Response) error {
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			resp.Body = &usageRewriter{body: resp.Body, r: bufio.NewReader(resp.Body), c: c}
		}
		return nil
	}
	c.URL, _ = testproc.Serve(t, p)
	return c
}

// cached returns the engine's count of cached tokens of the latest request of that prompt length.
func (c *CacheReporter) cached(prompt int) (int, bool) {
	loads := c.srv.CacheLoads()
	for i := len(loads) - 1; i >= 0; i-- {
		if loads[i].Prompt == prompt {
			return loads[i].Used, true
		}
	}
	return 0, false
}

// usageRewriter passes an SSE stream through line by line, adding cached_tokens to the usage chunk.
type usageRewriter struct {
	body    io.ReadCloser
	r       *bufio.Reader
	pending []byte
	c       *CacheReporter
}

func (u *usageRewriter) Read(p []byte) (int, error) {
	if len(u.pending) == 0 {
		line, err := u.r.ReadBytes('\n')
		if len(line) == 0 {
			return 0, err
		}
		u.pending = u.c.rewrite(line)
	}
	n := copy(p, u.pending)
	u.pending = u.pending[n:]
	return n, nil
}

func (u *usageRewriter) Close() error { return u.body.Close() }

func (c *CacheReporter) rewrite(line []byte) []byte {
	data, ok := bytes.CutPrefix(line, []byte("data: "))
	if !ok || !bytes.Contains(data, []byte(`"usage"`)) {
		return line
	}
	var chunk map[string]any
	if json.Unmarshal(data, &chunk) != nil {
		return line
	}
	usage, ok := chunk["usage"].(map[string]any)
	if !ok {
		return line
	}
	prompt, ok := usage["prompt_tokens"].(float64)
	if !ok {
		return line
	}
	used, ok := c.cached(int(prompt))
	if !ok {
		c.Unmatched.Add(1)
		return line
	}
	c.Matched.Add(1)
	usage["prompt_tokens_details"] = map[string]any{"cached_tokens": used}
	b, err := json.Marshal(chunk)
	if err != nil {
		return line
	}
	return append(append([]byte("data: "), b...), '\n')
}

// Load keeps streams requests at once in flight on the engine, each asking for answer tokens (the
// model never ends an answer early unless started with an EOSLogit), until ctx ends: more requests
// than the engine has slots (ollama.Options.Parallel) queue. It returns how many completed when ctx
// ends (wait on the returned function).
func Load(ctx context.Context, srv *ollama.Server, streams, answer int) (wait func() int) {
	var wg sync.WaitGroup
	var done atomic.Int64
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				_, err := srv.Chat(ctx, ollama.ChatRequest{Prompt: fmt.Sprintf("load %d.%d: tell me a long story", i, n), NumPredict: answer})
				if err == nil {
					done.Add(1)
				}
			}
		}()
	}
	return func() int { wg.Wait(); return int(done.Load()) }
}

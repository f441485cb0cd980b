package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/test/gateway"
	"github.com/slaprobe/slaprobe/test/ollama"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// rolloutCanaries are TestRolloutGatesOnOllama's targets: one Ollama serves them all, each through
// a test gateway of its own. slow stretches every byte of every answer to that factor × the time
// the engine took to send it (gateway.SetSlow: TTFT, each token gap and E2E); errors answers that
// share of requests, evenly spread, 503 before they reach the engine.
var rolloutCanaries = []struct {
	name         string
	slow, errors float64
}{
	{"stable", 1, 0},
	{"canary-same", 1, 0},
	{"canary-slow10", 1.1, 0},
	{"canary-slow", 1.3, 0},
	{"canary-errors", 1, 0.3},
}

// rolloutOllamaWant is what each check must say in make test's one window, by canary. The scenario's
// thresholds (TTFT 2 s, ITL 100 ms) lie far above what this engine takes (tens of ms), as a user's
// SLO would: a slower canary keeps its goodput, and only the TTFT ratio sees a slowdown. The p95 of
// ~30 probes on a real engine is noisy: over 10 windows the identical canary read 0.77 to 1.16
// (native) and failed the run's bound (1.1) once, the 10 % slower one 0.87 to 1.32, the 30 % slower
// one 1.18 to 1.79 (a second run: 0.79 to 1.28, 0.87 to 1.73, 1.22 to 1.95), and in one make
// test beside another test 1.0999. So make test's one window slows canary-slow threefold
// (rolloutMakeTestSlow; twofold read 1.36 and 1.98 in two runs here), which keeps it well above the
// bound, and judges the ratio on it alone; SLAPROBE_ROLLOUTS_LONG=1 measures how often each check
// fails each canary at 10 % and 30 %.
var rolloutOllamaWant = map[string]map[string]bool{
	"canary-same":   {"goodput-share-drop": true, "success-share-drop": true},
	"canary-slow10": {"goodput-share-drop": true, "success-share-drop": true},
	"canary-slow":   {"goodput-share-drop": true, "ttft-p95-ratio": false, "success-share-drop": true},
	"canary-errors": {"goodput-share-drop": false, "success-share-drop": false},
}

// rolloutMakeTestSlow is canary-slow's factor in make test's one window.
const rolloutMakeTestSlow = 3.0

// TestRolloutGatesOnOllama runs the Argo Rollouts and Flagger templates of deploy/rollouts, as their
// controllers render them, on a real Prometheus against a real engine: Ollama (llama.cpp on one CPU
// thread) behind five gateways, stable and four canaries (identical, 10 % slower, 30 % slower, 30 %
// errors), probed every second (jitter ±50 %, so that the targets' probes do not queue in a fixed
// order); each query is evaluated over 30 s windows and judged with the bounds the rendered file
// gives. make test judges one window, with canary-slow three times as slow; SLAPROBE_ROLLOUTS_LONG=1 evaluates 10 consecutive ones, logs,
// per check and canary, the share of windows that failed with its exact 95 % interval, and asks
// (native histograms) at most 2 failures of the identical canary and 8 or more of the 30 % slower.
func TestRolloutGatesOnOllama(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real engine, slaprobe and Prometheus for about a minute")
	}
	ollama.SkipIfMissing(t)
	windows := 1
	if os.Getenv(EnvRolloutsLong) == "1" {
		windows = 10
	}
	srv := ollama.Start(t, ollama.Options{Layers: 2, Embedding: 256})
	bin := buildSlaprobe(t, repoRoot(t))
	ctx, cancel := context.WithTimeout(context.Background(), rolloutsBudget+time.Duration(windows)*30*time.Second)
	t.Cleanup(cancel)
	var targets []rolloutTarget
	for _, c := range rolloutCanaries {
		gw, err := gateway.New(gateway.RoundRobin, srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		slow := c.slow
		if windows == 1 && c.name == "canary-slow" {
			slow = rolloutMakeTestSlow
		}
		if err := gw.SetSlow(1, slow); err != nil {
			t.Fatal(err)
		}
		var h http.Handler = gw
		if c.errors > 0 {
			h = failing(gw, c.errors)
		}
		front := httptest.NewServer(h)
		t.Cleanup(front.Close)
		targets = append(targets, rolloutTarget{c.name, front.URL})
	}
	vals := rolloutGates(t, ctx, bin, targets, "{jitter: 0.5}", "{ttft: 2s, itl: 100ms}", windows)
	if windows == 1 {
		// The ratio is judged on native histograms only: from classic buckets
		// the 30 % slower canary read 1.03 in one window of 20.
		var judged, logged []rolloutValue
		for _, r := range vals {
			if r.mode != native.name && r.q.Check == "ttft-p95-ratio" {
				logged = append(logged, r)
			} else {
				judged = append(judged, r)
			}
		}
		judgeRollouts(t, judged, rolloutOllamaWant)
		judgeRollouts(t, logged, nil)
		return
	}
	judgeRollouts(t, vals, nil)
	type key struct{ mode, engine, check, canary string }
	fails, n := map[key]int{}, map[key]int{}
	vs := map[key][]float64{}
	for _, r := range vals {
		k := key{r.mode, r.q.Engine, r.q.Check, r.q.Canary}
		n[k]++
		if r.err != nil || !r.q.passes(r.v) {
			fails[k]++
		}
		vs[k] = append(vs[k], r.v)
	}
	var keys []key
	for k := range n {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		return fmt.Sprint(a.check, a.canary, a.mode, a.engine) < fmt.Sprint(b.check, b.canary, b.mode, b.engine)
	})
	for _, k := range keys {
		lo, hi := testproc.ClopperPearson(fails[k], n[k])
		v := vs[k]
		sort.Float64s(v)
		t.Logf("%-18s %-14s %-7s %-7s failed %2d of %d windows (95 %% interval %3.0f–%3.0f %%), values %.3f…%.3f, median %.3f",
			k.check, k.canary, k.mode, k.engine, fails[k], n[k], 100*lo, 100*hi, v[0], v[len(v)-1], v[len(v)/2])
	}
	// Asserted on native histograms only: classic buckets bias the ratio
	// (the identical canary failed 1 and 3 windows of 10 in two runs).
	for _, k := range keys {
		if k.mode != native.name {
			continue
		}
		if k.canary == "canary-same" && fails[k] > 2 {
			t.Errorf("%s %s %s failed the identical canary in %d of %d windows", k.mode, k.engine, k.check, fails[k], n[k])
		}
		if k.canary == "canary-slow" && k.check == "ttft-p95-ratio" && fails[k] < n[k]-2 {
			t.Errorf("%s %s %s caught the 30 %% slower canary in %d of %d windows", k.mode, k.engine, k.check, fails[k], n[k])
		}
	}
}

// failing answers a share of the streamed requests (probes), evenly spread (every one whose count
// crosses a multiple of 1/share), with a 503 before it reaches next. The non-streamed ones pass:
// without /tokenize, slaprobe sizes its prompts with max_tokens: 1 requests, and a canary whose
// sizing failed would fail every probe, not a share.
func failing(next http.Handler, share float64) http.Handler {
	var count atomic.Uint64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"stream":true`)) {
			n := float64(count.Add(1) - 1)
			if math.Floor((n+1)*share) != math.Floor(n*share) {
				http.Error(w, "canary: injected failure", http.StatusServiceUnavailable)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

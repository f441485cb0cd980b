package prober_test

// The accuracy checks again, against the pinned third-party
// llm-d-inference-sim v0.10.2 (package test/llmd; what it does is in
// docs/testing.md). Its tokenizer (about one token per word, "### role: "
// chat rendering) and its streaming code are not ours, so passing here shows
// the prober does not just agree with our own simulator.
//
// What it lacks shapes the checks: no continuous usage (tokens come from the
// final usage), no cache_salt (a nonce in the first block keeps the prefix
// cache cold), one token per chunk, the role chunk sent right before the
// first token. Its TTFT and ITL are time.Sleep, so it only ever adds time:
// about 1 ms to TTFT and 0.25–0.35 ms to every token on this machine. The
// timing checks never accept less than the configured value (ITL: 0.5 %
// below, see llmdCheckTiming), and above it the 2 ms + 1 % (TTFT, over
// the simulator's own, prompt-dependent time, measured) and 2 % (ITL).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/prober"
	"github.com/slaprobe/slaprobe/test/llmd"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// llmdTarget starts the simulator and returns a target on it whose client
// goes through rec (nil: a plain client).
func llmdTarget(t *testing.T, opts llmd.Options, rec *accTransport) (*llmd.Server, prober.Target) {
	t.Helper()
	srv := llmd.Start(t, opts)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	t.Cleanup(tr.CloseIdleConnections)
	var rt http.RoundTripper = tr
	if rec != nil {
		rec.base = tr
		rt = rec
	}
	return srv, prober.Target{Name: "llmd", BaseURL: srv.URL, Model: srv.Model, Client: &http.Client{Transport: rt}}
}

// TestLLMDAccuracyPromptLength: calibration converges with the simulator's
// tokenizer (about one token per word, where ours counts a word as one token
// per started four letters): usage.prompt_tokens is within ±1 % (±8) of the
// scenario for 1K and 4K prompts on both APIs.
func TestLLMDAccuracyPromptLength(t *testing.T) {
	llmd.SkipIfMissing(t)
	srv, target := llmdTarget(t, llmd.Options{}, nil)
	for _, api := range []prober.API{prober.APIChat, prober.APICompletions} {
		for _, in := range []int{1024, 4096} {
			t.Run(fmt.Sprintf("%s_%d", api, in), func(t *testing.T) {
				target := target
				target.API = api
				p := prober.New(nil, prober.SystemClock{})
				prep := accPrepare(t, p, target, accScenario(in, 4))
				tol := prober.PromptTolerance(in)
				if prep.Method != prober.CalibrationTokenize {
					t.Errorf("calibrated with %q, want %q (the simulator has /tokenize)", prep.Method, prober.CalibrationTokenize)
				}
				for i := 0; i < 2; i++ {
					res := p.Run(context.Background(), target, prep)
					if res.Kind != prober.KindSuccess {
						t.Fatalf("probe: %s/%s: %v\n%s", res.Kind, res.Reason, res.Err, srv.Logs())
					}
					if d := res.PromptTokens - in; d < -tol || d > tol || !res.PromptLengthOK {
						t.Errorf("usage.prompt_tokens %d, want %d ± %d", res.PromptTokens, in, tol)
					}
					if res.PromptTokens != prep.PromptTokens {
						t.Errorf("usage.prompt_tokens %d, /tokenize counted %d", res.PromptTokens, prep.PromptTokens)
					}
				}
				t.Logf("%d words → %d tokens (want %d ± %d)", prep.Words, prep.PromptTokens, in, tol)
			})
		}
	}
}

// llmdITLOvershoot bounds how far above its configured inter-token latency llm-d-inference-sim
// v0.10.2 may stream: it sleeps at least the configured gap and then writes, so it is always a little
// late, and later when the cores are shared (+1.8 % to +2.1 % with other test packages running beside
// it on 2 cores). That lateness is the simulator's, which is why slaprobe's own ITL accuracy is held to
// accITLRel against a client reading the same bytes (TestAccuracyTiming, TestOllamaAccuracy); here the
// configured value is only an upper bound's anchor.
const llmdITLOvershoot = 0.03

// llmdCheckTiming checks one probe against the simulator's configured TTFT
// and ITL.
//
//   - TTFT: the simulator sleeps the configured TTFT after receiving the
//     request, and the prober's t0 is before the request is written, so the
//     measured TTFT is never shorter than configured (one-sided bound). On top
//     of the sleep the simulator spends time of its own on the request, which
//     grows with the prompt: measured against an instance configured with
//     TTFT = 0 (base), it is 0.5–0.9 ms at 256 tokens, 1.0–2.3 ms at 1K and
//     5.4–6.6 ms at 4K here (its JSON decoding and regex tokenizer), so the
//     ≈1 ms of docs/testing.md holds for short prompts only. The truth is
//     configured + base, and the measured TTFT must be within the issue's
//     2 ms + 1 % of it.
//   - ITL: every token after the first follows a sleep of the configured ITL,
//     so the server-side span is at least (n−1)×ITL. The client's span can be
//     shorter only if the first token was stamped later after its write than
//     the last was, by at most a fraction of a millisecond over n−1 intervals:
//     0.5 % below is allowed for that. Above, llmdITLOvershoot (3 %): the
//     simulator's 0.25–0.35 ms per token (0.6–0.9 % at 40 ms) on idle cores,
//     more on shared ones.
func llmdCheckTiming(res *prober.Result, ttft, base, itl time.Duration, errorf func(string, ...any)) {
	got, truth := res.TTFT(), ttft+base
	if got < ttft {
		errorf("TTFT %v, shorter than the configured %v", got, ttft)
	}
	if d := got - truth; absDur(d) > ttftTol(ttft) {
		errorf("TTFT %v vs configured %v + simulator overhead %v: off by %v, tolerance %v", got, ttft, base, d, ttftTol(ttft))
	}
	lo, hi := time.Duration(float64(itl)*(1-0.005)), time.Duration(float64(itl)*(1+llmdITLOvershoot))
	if got := res.ITL(); got < lo || got > hi {
		errorf("ITL %v, want within [%v, %v] (configured %v)", got, lo, hi, itl)
	}
}

// llmdBaseTTFT is the median TTFT of three probes of s against an instance
// configured with TTFT = ITL = 0: the simulator's own time for this prompt.
func llmdBaseTTFT(t *testing.T, api prober.API, s prober.Scenario) time.Duration {
	t.Helper()
	_, target := llmdTarget(t, llmd.Options{}, nil)
	target.API = api
	p := prober.New(nil, prober.SystemClock{})
	s.OutputTokens = 2
	prep := accPrepare(t, p, target, s)
	var ds []time.Duration
	for i := 0; i < 3; i++ {
		res := p.Run(context.Background(), target, prep)
		if res.Kind != prober.KindSuccess {
			t.Fatalf("baseline probe: %s/%s: %v", res.Kind, res.Reason, res.Err)
		}
		ds = append(ds, res.TTFT())
	}
	slices.Sort(ds)
	return ds[1]
}

// TestLLMDAccuracyTiming: TTFT and ITL match --time-to-first-token and
// --inter-token-latency, output length is exact with ignore_eos, and the
// role-only chunk, which this simulator writes right before the first token,
// is not taken for it.
func TestLLMDAccuracyTiming(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time probes against llm-d-inference-sim")
	}
	llmd.SkipIfMissing(t)
	testproc.Quiet(t) // the simulator's own overhead is measured first, and must be measured quiet too
	const (
		ttft = 200 * time.Millisecond
		itl  = 40 * time.Millisecond
		out  = 24
	)
	cases := []struct {
		api prober.API
		in  int
	}{
		{prober.APIChat, 1024},
		{prober.APICompletions, 1024},
		{prober.APIChat, 4096},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s_%d", tc.api, tc.in), func(t *testing.T) {
			s := accScenario(tc.in, out)
			base := llmdBaseTTFT(t, tc.api, s)
			rec := &accTransport{}
			srv, target := llmdTarget(t, llmd.Options{TTFT: ttft, ITL: itl}, rec)
			target.API = tc.api
			p := prober.New(nil, prober.SystemClock{})
			prep := accPrepare(t, p, target, s)
			accAttempts(t, func(errorf func(string, ...any)) {
				for i := 0; i < 2; i++ {
					res := p.Run(context.Background(), target, prep)
					if res.Kind != prober.KindSuccess {
						errorf("probe: %s/%s: %v\n%s", res.Kind, res.Reason, res.Err, srv.Logs())
						return
					}
					if res.OutputTokens != out || res.FinishReason != "length" || res.ContinuousUsage || res.FirstChunkTokens != 1 {
						errorf("output: %d tokens (want %d), finish %q, continuous usage %v, first chunk %d",
							res.OutputTokens, out, res.FinishReason, res.ContinuousUsage, res.FirstChunkTokens)
					}
					if !res.CachedReported || res.CachedTokens != 0 {
						errorf("cached tokens %d (reported %v), want 0", res.CachedTokens, res.CachedReported)
					}
					roleLead := time.Duration(0)
					if tc.api == prober.APIChat {
						rec.mu.Lock()
						first, firstAt := string(rec.firstBytes), rec.firstReadAt
						rec.mu.Unlock()
						// The role chunk is the first thing on the wire (with
						// the headers, after TTFT); the first token follows.
						if !strings.HasPrefix(first, "data: ") || !strings.Contains(first, `"role":"assistant"`) {
							errorf("first body bytes are not the role chunk: %.300q", first)
						}
						if firstAt.After(res.FirstToken) {
							errorf("role chunk stamped after the first token")
						}
						roleLead = res.FirstToken.Sub(firstAt)
					}
					llmdCheckTiming(&res, ttft, base, itl, errorf)
					t.Logf("probe %d: P=%d TTFT %v (configured %+v, base %v), ITL %v (%+.2f%%), role chunk %v before the first token",
						i, res.PromptTokens, res.TTFT().Round(time.Microsecond), (res.TTFT() - ttft).Round(time.Microsecond),
						base.Round(time.Microsecond), res.ITL().Round(time.Microsecond), 100*relErr(res.ITL(), itl), roleLead.Round(time.Microsecond))
				}
			})
		})
	}
}

// TestLLMDAccuracyColdPrefill: with the simulator's prefix cache on, repeated
// probes report no cached tokens (it ignores cache_salt; the nonce in the
// first block is what keeps them cold), while a replay of a probe's exact body
// is served from the cache.
func TestLLMDAccuracyColdPrefill(t *testing.T) {
	llmd.SkipIfMissing(t)
	rec := &accTransport{keepBodies: true}
	_, target := llmdTarget(t, llmd.Options{KVCache: true}, rec)
	p := prober.New(nil, prober.SystemClock{})
	prep := accPrepare(t, p, target, accScenario(1024, 4))
	for i := 0; i < 3; i++ {
		res := p.Run(context.Background(), target, prep)
		if res.Kind != prober.KindSuccess {
			t.Fatalf("probe %d: %s/%s: %v", i, res.Kind, res.Reason, res.Err)
		}
		if !res.CachedReported || res.CachedTokens != 0 || res.CacheHit() {
			t.Errorf("probe %d: %d cached tokens (reported %v), want 0", i, res.CachedTokens, res.CachedReported)
		}
	}
	rec.mu.Lock()
	bodies := slices.Clone(rec.bodies)
	rec.mu.Unlock()
	if len(bodies) < 3 {
		t.Fatalf("%d probe bodies recorded", len(bodies))
	}
	if got := accReplayCached(t, &http.Client{Transport: rec.base}, target.BaseURL, prober.APIChat, bodies[len(bodies)-1]); got < 16 {
		t.Errorf("replayed body: %d cached tokens, want the prompt's whole blocks (the cache is on)", got)
	}
}

// TestLLMDAccuracyHTTPErrors: the simulator's X-Return-Error header makes it
// answer that status before any stream; the probe fails with the matching
// reason.
func TestLLMDAccuracyHTTPErrors(t *testing.T) {
	llmd.SkipIfMissing(t)
	_, target := llmdTarget(t, llmd.Options{}, nil)
	p := prober.New(nil, prober.SystemClock{})
	prep := accPrepare(t, p, target, accScenario(1024, 4))
	for _, c := range []struct {
		status string
		want   prober.Reason
	}{{"429", prober.ReasonHTTP4xx}, {"400", prober.ReasonHTTP4xx}, {"503", prober.ReasonHTTP5xx}, {"500", prober.ReasonHTTP5xx}} {
		tg := target
		tg.Headers = map[string]string{"X-Return-Error": c.status}
		res := p.Run(context.Background(), tg, prep)
		if res.Kind != prober.KindError || res.Reason != c.want {
			t.Errorf("X-Return-Error %s: %s/%q (%v), want error/%q", c.status, res.Kind, res.Reason, res.Err, c.want)
		}
	}
}

// noIgnoreEOS is a transport that drops ignore_eos and min_tokens from
// generation requests before they reach the simulator: the simulator then
// behaves like a server without them (Ollama, TGI) and picks the answer's
// length itself.
type noIgnoreEOS struct{ base http.RoundTripper }

func (n noIgnoreEOS) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "completions") || req.Body == nil {
		return n.base.RoundTrip(req)
	}
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, err
	}
	delete(body, "ignore_eos")
	delete(body, "min_tokens")
	b, _ = json.Marshal(body)
	out := req.Clone(req.Context())
	out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return n.base.RoundTrip(out)
}

// TestLLMDShortAnswers: without ignore_eos the third-party simulator chooses
// each answer's length. Short probes keep their TTFT, and their ITL from
// MinDecodeTokens tokens on, within the timing checks of a full answer.
func TestLLMDShortAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time probes against llm-d-inference-sim")
	}
	llmd.SkipIfMissing(t)
	testproc.Quiet(t) // the simulator's own overhead is measured first, and must be measured quiet too
	const (
		ttft = 50 * time.Millisecond
		itl  = 40 * time.Millisecond // the simulator adds 0.25–0.35 ms a token: under 1 % here
	)
	s := accScenario(512, 64)
	base := llmdBaseTTFT(t, prober.APIChat, s)
	srv, target := llmdTarget(t, llmd.Options{TTFT: ttft, ITL: itl}, nil)
	target.Client = &http.Client{Transport: noIgnoreEOS{base: target.Client.Transport}}
	p := prober.New(nil, prober.SystemClock{})
	prep := accPrepare(t, p, target, s)
	accAttempts(t, func(errorf func(string, ...any)) {
		short, decoded := 0, 0
		for i := 0; i < 6; i++ {
			res := p.Run(context.Background(), target, prep)
			switch res.Kind {
			case prober.KindSuccess:
				continue
			case prober.KindShortOutput:
			default:
				errorf("probe %d: %s/%s: %v\n%s", i, res.Kind, res.Reason, res.Err, srv.Logs())
				continue
			}
			short++
			if !res.Timed() || res.FinishReason != "stop" {
				errorf("probe %d: %d tokens, finish %q, timed %v", i, res.OutputTokens, res.FinishReason, res.Timed())
				continue
			}
			if d := res.TTFT() - (ttft + base); res.TTFT() < ttft || absDur(d) > ttftTol(ttft) {
				errorf("probe %d: TTFT %v, configured %v + simulator overhead %v", i, res.TTFT(), ttft, base)
			}
			if res.DecodeMeasured() {
				decoded++
				llmdCheckTiming(&res, ttft, base, itl, errorf)
			}
			t.Logf("probe %d: %d of %d tokens, TTFT %v, ITL %v (measured %v)", i, res.OutputTokens, s.OutputTokens,
				res.TTFT().Round(time.Microsecond), res.ITL().Round(time.Microsecond), res.DecodeMeasured())
		}
		if short < 3 || decoded < 2 {
			errorf("%d short answers of 6, %d with ITL: the simulator should pick shorter answers without ignore_eos", short, decoded)
		}
	})
}

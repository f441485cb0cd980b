package prober_test

// The accuracy checks again, against the pinned third-party
// llm-d-inference-sim v0.10.2 (package test/llmd; what it does is in
// test/llmd/README.md). Its tokenizer (about one token per word, "### role: "
// chat rendering) and its streaming code are not ours, so passing here shows
// the prober does not just agree with our own simulator.
//
// What it lacks shapes the checks: no continuous usage (tokens come from the
// final usage), no cache_salt (a nonce in the first block keeps the prefix
// cache cold), one token per chunk, the role chunk sent right before the
// first token. Its TTFT and ITL are time.Sleep plus its own work, so it only
// ever adds time, and how much depends on the machine: about 1 ms to TTFT and
// 0.25–0.35 ms to every token on one, 5–10 ms to TTFT on another. So the
// timing checks judge slaprobe against the independent client (indep_test.go)
// timing the very same requests, and keep the configured values only as loose
// sanity bounds (llmdCheckTiming).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
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
	return srv, prober.Target{Name: "llmd", API: prober.APIChat, BaseURL: srv.URL, Model: srv.Model, Client: &http.Client{Transport: rt}}
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

// llmdSlack bounds how far above its configured TTFT and ITL the simulator
// may answer before a probe is taken for a broken run rather than a late
// timer: a sanity bound only, since how late its timer runs is the machine's.
const llmdSlack = 0.25

// llmdObserved starts the simulator behind the independent client: the
// target's requests go from slaprobe (through rec, when not nil, then wrap's
// transport) to the client, which passes them on and times the answers.
func llmdObserved(t *testing.T, opts llmd.Options, rec *accTransport, wrap func(http.RoundTripper) http.RoundTripper) (*llmd.Server, prober.Target, *indepClient) {
	t.Helper()
	srv := llmd.Start(t, opts)
	up := &http.Transport{Proxy: nil}
	t.Cleanup(up.CloseIdleConnections)
	ic := &indepClient{upstream: srv.URL, client: &http.Client{Transport: up}}
	proxy := httptest.NewServer(ic)
	t.Cleanup(proxy.Close)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	t.Cleanup(tr.CloseIdleConnections)
	var rt http.RoundTripper = tr
	if wrap != nil {
		rt = wrap(rt)
	}
	if rec != nil {
		rec.base = rt
		rt = rec
	}
	return srv, prober.Target{Name: "llmd", API: prober.APIChat, BaseURL: proxy.URL, Model: srv.Model, Client: &http.Client{Transport: rt}}, ic
}

// llmdCheckTiming checks one probe's TTFT and ITL against obs, the
// independent client's timing of the same request: TTFT within 2 ms + 1 %
// and ITL within 2 %, the prober's accuracy tolerances (the client's t0 is a
// moment after slaprobe's and it sees each line a moment before slaprobe
// does: a loopback hop each way). Against the configured values only
// loosely: the simulator sleeps at least the configured time, so neither side
// may see less (ITL: 0.5 % below, for the stamping of n−1 intervals), and at
// most llmdSlack more.
func llmdCheckTiming(res *prober.Result, obs indepTiming, ttft, itl time.Duration, errorf func(string, ...any)) {
	got := res.TTFT()
	if d := got - obs.ttft; absDur(d) > ttftTol(obs.ttft) {
		errorf("TTFT %v, independent client %v: off by %v, tolerance %v", got, obs.ttft, d, ttftTol(obs.ttft))
	}
	if hi := ttft + time.Duration(llmdSlack*float64(ttft)); got < ttft || obs.ttft < ttft || got > hi {
		errorf("TTFT %v (independent client %v), want within [%v, %v] of the configured %v", got, obs.ttft, ttft, hi, ttft)
	}
	if !res.DecodeMeasured() {
		return
	}
	if e := relErr(res.ITL(), obs.itl); math.Abs(e) > accITLRel {
		errorf("ITL %v, independent client %v: off by %+.2f%%, tolerance %.0f%%", res.ITL(), obs.itl, 100*e, 100*accITLRel)
	}
	lo, hi := time.Duration(float64(itl)*(1-0.005)), itl+time.Duration(llmdSlack*float64(itl))
	if got := res.ITL(); got < lo || got > hi {
		errorf("ITL %v (independent client %v), want within [%v, %v] of the configured %v", got, obs.itl, lo, hi, itl)
	}
}

// llmdLogTiming logs one probe beside the independent client's timing.
func llmdLogTiming(t *testing.T, i int, res *prober.Result, obs indepTiming, ttft, itl time.Duration, extra string) {
	t.Helper()
	us := func(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
	t.Logf("probe %d: P=%d, %d of %d tokens | TTFT slaprobe %v, independent client %v (%+v; configured %v, %+v) | ITL slaprobe %v, client %v (%+.2f%%; configured %v, %+.2f%%)%s",
		i, res.PromptTokens, res.OutputTokens, obs.outputTokens, us(res.TTFT()), us(obs.ttft), us(res.TTFT()-obs.ttft), ttft, us(obs.ttft-ttft),
		us(res.ITL()), us(obs.itl), 100*relErr(res.ITL(), obs.itl), itl, 100*relErr(obs.itl, itl), extra)
}

// TestLLMDAccuracyTiming: on every probe, TTFT and ITL agree with the
// independent client's timing of the same request, output length is exact
// with ignore_eos, and the role-only chunk, which this simulator writes right
// before the first token, is not taken for it. The configured
// --time-to-first-token and --inter-token-latency are loose bounds only.
func TestLLMDAccuracyTiming(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time probes against llm-d-inference-sim")
	}
	llmd.SkipIfMissing(t)
	testproc.QuietLight(t) // tolerances of a few milliseconds
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
			rec := &accTransport{}
			srv, target, ic := llmdObserved(t, llmd.Options{TTFT: ttft, ITL: itl}, rec, nil)
			target.API = tc.api
			p := prober.New(nil, prober.SystemClock{})
			prep := accPrepare(t, p, target, s)
			testproc.TimingAttempts(t, func(errorf func(string, ...any)) {
				for i := 0; i < 2; i++ {
					k := ic.settled(t)
					res := p.Run(context.Background(), target, prep)
					if res.Kind != prober.KindSuccess {
						errorf("probe: %s/%s: %v\n%s", res.Kind, res.Reason, res.Err, srv.Logs())
						return
					}
					obs := ic.timing(t, k)
					if res.OutputTokens != out || obs.outputTokens != out || res.FinishReason != "length" || res.ContinuousUsage || res.FirstChunkTokens != 1 {
						errorf("output: %d tokens (independent client %d, want %d), finish %q, continuous usage %v, first chunk %d",
							res.OutputTokens, obs.outputTokens, out, res.FinishReason, res.ContinuousUsage, res.FirstChunkTokens)
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
					llmdCheckTiming(&res, obs, ttft, itl, errorf)
					llmdLogTiming(t, i, &res, obs, ttft, itl, fmt.Sprintf(" | role chunk %v before the first token", roleLead.Round(time.Microsecond)))
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
// MinDecodeTokens tokens on, within the timing checks of a full answer:
// against the independent client's timing of the same requests.
func TestLLMDShortAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time probes against llm-d-inference-sim")
	}
	llmd.SkipIfMissing(t)
	testproc.QuietLight(t) // tolerances of a few milliseconds
	const (
		ttft = 50 * time.Millisecond
		itl  = 40 * time.Millisecond
	)
	s := accScenario(512, 64)
	srv, target, ic := llmdObserved(t, llmd.Options{TTFT: ttft, ITL: itl}, nil,
		func(rt http.RoundTripper) http.RoundTripper { return noIgnoreEOS{base: rt} })
	p := prober.New(nil, prober.SystemClock{})
	prep := accPrepare(t, p, target, s)
	testproc.TimingAttempts(t, func(errorf func(string, ...any)) {
		short, decoded := 0, 0
		for i := 0; i < 6; i++ {
			k := ic.settled(t)
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
			obs := ic.timing(t, k)
			if !res.Timed() || res.FinishReason != "stop" || res.OutputTokens != obs.outputTokens {
				errorf("probe %d: %d tokens (independent client %d), finish %q, timed %v", i, res.OutputTokens, obs.outputTokens, res.FinishReason, res.Timed())
				continue
			}
			if res.DecodeMeasured() {
				decoded++
			}
			llmdCheckTiming(&res, obs, ttft, itl, errorf)
			llmdLogTiming(t, i, &res, obs, ttft, itl, fmt.Sprintf(" | ITL measured %v", res.DecodeMeasured()))
		}
		if short < 3 || decoded < 2 {
			errorf("%d short answers of 6, %d with ITL: the simulator should pick shorter answers without ignore_eos", short, decoded)
		}
	})
}

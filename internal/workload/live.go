package workload

// This file holds the live mix: the length mix of the engine's own
// traffic over the last window, read from its length histograms, and a
// probe shape drawing from it (workload: live).

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/slaprobe/slaprobe/internal/engine"
	"github.com/slaprobe/slaprobe/prober"
)

// vLLM's histograms of prompt and generated tokens per finished request.
// The live mix reads the families the table of the page's engine names
// (engine.LengthFamilies): these on a vLLM page, SGLang's on an SGLang one.
const (
	VLLMPromptTokens     = "vllm:request_prompt_tokens"
	VLLMGenerationTokens = "vllm:request_generation_tokens"
)

// CumHist is a cumulative histogram as exported: counts at or below each
// upper bound (the last +Inf), summed over the engine's label sets.
type CumHist struct {
	Upper []float64
	Cum   []float64
}

// Hist is a histogram over a window: requests per bucket (lower, Upper[i]].
type Hist struct {
	Upper  []float64
	Counts []float64
}

// Total is the requests counted.
func (h Hist) Total() float64 {
	var n float64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// ParseLengthHistograms reads the engine's prompt and generation length
// histograms from Prometheus text exposition: the families its engine's
// table names (engine.LengthFamilies). An engine without them (llama.cpp
// server) is an error saying so; each live probe is then a failed probe of
// reason calibration naming it.
func ParseLengthHistograms(r io.Reader) (prompt, output CumHist, err error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return prompt, output, fmt.Errorf("parse metrics: %w", err)
	}
	promptNames, outputNames, why, err := engine.LengthFamilies(fams)
	if err != nil {
		return prompt, output, err
	}
	get := func(names []string) (CumHist, error) {
		var f *dto.MetricFamily
		for _, n := range names {
			if f = fams[n]; f != nil {
				break
			}
		}
		if f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
			return CumHist{}, fmt.Errorf("no histogram %s in the engine's metrics (%s)", names[0], why)
		}
		sum := map[float64]float64{}
		for _, m := range f.GetMetric() {
			h := m.GetHistogram()
			inf := false
			for _, b := range h.GetBucket() {
				sum[b.GetUpperBound()] += float64(b.GetCumulativeCount())
				inf = inf || math.IsInf(b.GetUpperBound(), 1)
			}
			if !inf { // the text format lists the +Inf bucket; the count is the same
				sum[math.Inf(1)] += float64(h.GetSampleCount())
			}
		}
		var c CumHist
		for ub := range sum {
			c.Upper = append(c.Upper, ub)
		}
		sort.Float64s(c.Upper)
		for _, ub := range c.Upper {
			c.Cum = append(c.Cum, sum[ub])
		}
		return c, nil
	}
	if prompt, err = get(promptNames); err != nil {
		return
	}
	output, err = get(outputNames)
	return
}

// Since is the window from earlier to c: requests per bucket. An engine
// that restarted (a count went down) or changed its buckets counts from
// zero.
func (c CumHist) Since(earlier CumHist) Hist {
	h := Hist{Upper: c.Upper, Counts: make([]float64, len(c.Cum))}
	same := len(earlier.Cum) == len(c.Cum)
	for i := range c.Cum {
		if same && (earlier.Upper[i] != c.Upper[i] || earlier.Cum[i] > c.Cum[i]) {
			same = false
		}
	}
	prev := 0.0
	for i, v := range c.Cum {
		if same {
			v -= earlier.Cum[i]
		}
		h.Counts[i] = max(v-prev, 0)
		prev = v
	}
	return h
}

// draw picks a bucket by its count and a length in it, log-uniformly
// between its bounds (the +Inf bucket: up to twice its lower bound).
func (h Hist) draw(rng *rand.Rand) int {
	total := h.Total()
	x := rng.Float64() * total
	for i, c := range h.Counts {
		if x >= c && i < len(h.Counts)-1 {
			x -= c
			continue
		}
		lo := 0.0
		if i > 0 {
			lo = h.Upper[i-1]
		}
		hi := h.Upper[i]
		if math.IsInf(hi, 1) {
			hi = 2 * max(lo, 1)
		}
		lo = max(lo, 0.5)
		v := math.Exp(math.Log(lo) + rng.Float64()*(math.Log(hi)-math.Log(lo)))
		return max(int(math.Ceil(v)), 1)
	}
	return 1
}

// LiveMix is the engine's length mix over a window.
type LiveMix struct {
	Prompt, Output Hist
	Window         time.Duration // the time the mix covers
	Requests       float64       // requests finished in it
}

// snapshot is one scrape of the histograms.
type snapshot struct {
	at             time.Time
	prompt, output CumHist
}

// Live learns a target's length mix from its engine's /metrics and draws
// probes from it. The prompt and answer lengths are drawn apart: the engine's
// histograms do not say which went together.
type Live struct {
	Window time.Duration // the mix covers the last Window; default 15m
	// Refresh is how often the metrics are read; default Window/10, at
	// least 10 s.
	Refresh time.Duration
	Client  *http.Client
	Seed    uint64
	Now     func() time.Time // default time.Now

	mu      sync.Mutex
	targets map[string]*liveTarget // by metrics URL
}

type liveTarget struct {
	snaps []snapshot
	mix   LiveMix
	read  time.Time
	err   error
	rng   *rand.Rand
}

// DefaultLiveWindow is Live.Window's default.
const DefaultLiveWindow = 15 * time.Minute

func (l *Live) window() time.Duration {
	if l.Window > 0 {
		return l.Window
	}
	return DefaultLiveWindow
}

func (l *Live) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// MetricsURL is where a target's engine metrics are read: its
// metrics_url when set, else its base URL's /metrics, as vLLM serves them.
func MetricsURL(t prober.Target) string {
	if t.MetricsURL != "" {
		return t.MetricsURL
	}
	return strings.TrimSuffix(strings.TrimSuffix(t.BaseURL, "/"), "/v1") + "/metrics"
}

// Mix returns t's current mix, reading the engine's metrics first when the
// last read is older than Refresh.
func (l *Live) Mix(ctx context.Context, t prober.Target) (LiveMix, error) {
	url := MetricsURL(t)
	l.mu.Lock()
	if l.targets == nil {
		l.targets = map[string]*liveTarget{}
	}
	lt := l.targets[url]
	if lt == nil {
		lt = &liveTarget{rng: rand.New(rand.NewPCG(l.Seed, 0x11fe))}
		l.targets[url] = lt
	}
	refresh := l.Refresh
	if refresh <= 0 {
		refresh = max(l.window()/10, 10*time.Second)
	}
	now := l.now()
	due := lt.read.IsZero() || now.Sub(lt.read) >= refresh
	l.mu.Unlock()
	if due {
		s, err := l.scrape(ctx, t, url)
		l.mu.Lock()
		lt.read, lt.err = now, err
		if err == nil {
			s.at = now
			lt.add(s, l.window())
		}
		l.mu.Unlock()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if lt.mix.Requests == 0 {
		if lt.err != nil {
			return LiveMix{}, lt.err
		}
		return lt.mix, fmt.Errorf("workload: live: the engine at %s finished no request in the last %s (or it was read once only)", url, l.window())
	}
	return lt.mix, nil
}

// Cached returns t's mix as last read, without reading the engine: the
// status page's view of a mix that a background loop keeps fresh with Mix.
// read is when the engine was last read (zero: never).
func (l *Live) Cached(t prober.Target) (mix LiveMix, read time.Time, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lt := l.targets[MetricsURL(t)]
	if lt == nil {
		return LiveMix{}, time.Time{}, nil
	}
	return lt.mix, lt.read, lt.err
}

// Retain forgets the mixes of every target whose metrics URL is not in
// urls: a reader kept across reloads holds only the current targets'.
func (l *Live) Retain(urls map[string]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for u := range l.targets {
		if !urls[u] {
			delete(l.targets, u)
		}
	}
}

// add keeps s and the snapshots the window needs, and computes the mix from
// the newest snapshot at least a window old (else the oldest) to s.
func (lt *liveTarget) add(s snapshot, window time.Duration) {
	lt.snaps = append(lt.snaps, s)
	// Keep the newest snapshot that is at least window old, and all after it.
	first := 0
	for i := range lt.snaps {
		if s.at.Sub(lt.snaps[i].at) >= window {
			first = i
		}
	}
	lt.snaps = lt.snaps[first:]
	base := lt.snaps[0]
	if len(lt.snaps) == 1 {
		lt.mix = LiveMix{}
		return
	}
	p := s.prompt.Since(base.prompt)
	lt.mix = LiveMix{Prompt: p, Output: s.output.Since(base.output), Window: s.at.Sub(base.at), Requests: p.Total()}
}

func (l *Live) scrape(ctx context.Context, t prober.Target, url string) (snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return snapshot{}, err
	}
	for k, v := range t.Headers {
		req.Header.Set(k, v)
	}
	c := l.Client
	if c == nil {
		c = t.Client
	}
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return snapshot{}, fmt.Errorf("workload: live: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return snapshot{}, fmt.Errorf("workload: live: GET %s: HTTP %d", url, resp.StatusCode)
	}
	p, o, err := ParseLengthHistograms(&pageCap{r: resp.Body, left: MaxLivePage})
	if err != nil {
		return snapshot{}, fmt.Errorf("workload: live: %s: %w", url, err)
	}
	return snapshot{prompt: p, output: o}, nil
}

// MaxLivePage bounds one read of an engine's metrics for the live mix, as
// the engine watcher bounds its own: a vLLM page is tens of KiB, and the
// daemon reads every target's for the status page.
const MaxLivePage = 4 << 20

// pageCap fails once more than left bytes came, rather than parse a
// truncated page.
type pageCap struct {
	r    io.Reader
	left int64
}

func (c *pageCap) Read(p []byte) (int, error) {
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	if c.left -= int64(n); c.left < 0 {
		return 0, fmt.Errorf("metrics page longer than %d bytes; an engine's page is tens of KiB: check metrics_url", MaxLivePage)
	}
	return n, err
}

// Draw draws one prompt and one answer length from t's current mix.
func (l *Live) Draw(ctx context.Context, t prober.Target) (in, out int, err error) {
	mix, err := l.Mix(ctx, t)
	if err != nil {
		return 0, 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	rng := l.targets[MetricsURL(t)].rng
	return mix.Prompt.draw(rng), max(mix.Output.draw(rng), 2), nil
}

// LiveShape is the prober.Shaper of a workload: live scenario.
type LiveShape struct {
	Live     *Live
	MinInput int
	MaxInput int // 0: no limit
}

// Next draws one probe for t from its engine's live mix.
func (s *LiveShape) Next(t prober.Target) (prober.SharedPrefix, string, error) {
	in, out, err := s.Live.Draw(context.Background(), t)
	if err != nil {
		return prober.SharedPrefix{}, "", err
	}
	in = max(in, s.MinInput, 1)
	if s.MaxInput > 0 {
		in = min(in, s.MaxInput)
	}
	return prober.SharedPrefix{InputTokens: in, OutputTokens: out, BlockTokens: DefaultBlockTokens}, ClassOf(in).Name, nil
}

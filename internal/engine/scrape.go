package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ErrNoEngineMetrics means the endpoint answered with valid exposition text
// that holds no vLLM, SGLang or llama.cpp server family: it is not an
// engine we can read.
var ErrNoEngineMetrics = errors.New("no vLLM, SGLang or llama.cpp server metrics (vllm:, sglang:, llamacpp:) in the exposition")

// NoEngineError is ErrNoEngineMetrics with the families the page did hold
// (a few, sorted), so the one log line about it says what answered: another
// application's metrics, a proxy's, an engine slaprobe cannot read.
type NoEngineError struct {
	Seen  []string // at most maxSeenFamilies names, each at most maxSeenName bytes
	Total int      // families on the page
}

const (
	maxSeenFamilies = 8
	maxSeenName     = 80
)

func noEngineError(fams map[string]*dto.MetricFamily) *NoEngineError {
	return noEngineErrorOf(familyNames(fams))
}

func familyNames(fams map[string]*dto.MetricFamily) []string {
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	return names
}

func (e *NoEngineError) Error() string {
	seen := "none"
	if e.Total > 0 {
		seen = strings.Join(e.Seen, ", ")
		if e.Total > len(e.Seen) {
			seen += fmt.Sprintf(", … (%d in all)", e.Total)
		}
	}
	return "no engine signals: " + ErrNoEngineMetrics.Error() + "; families seen: " + seen
}

// Is makes errors.Is(err, ErrNoEngineMetrics) hold.
func (e *NoEngineError) Is(target error) bool { return target == ErrNoEngineMetrics }

// acceptHeader asks for the classic text format. prometheus_client (vLLM,
// SGLang) would otherwise answer OpenMetrics to a client that offers it,
// and the text parser reads counters there under different family names.
const acceptHeader = "text/plain;version=0.0.4;q=1,*/*;q=0.1"

// Scrape fetches url with client and parses it into a Snapshot stamped with
// the time the response arrived. A nil client means http.DefaultClient; the
// deadline comes from ctx. No redirect is followed, whatever the client's
// CheckRedirect: a 3xx fails the scrape and names its Location, so the
// client's credentials never go to another origin. Parse bounds the page.
func Scrape(ctx context.Context, client *http.Client, url string) (Snapshot, error) {
	return scrapeAt(ctx, client, url, time.Now)
}

func scrapeAt(ctx context.Context, client *http.Client, url string, now func() time.Time) (Snapshot, error) {
	client = noRedirect(client)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Snapshot{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	req.Header.Set("Accept", acceptHeader)
	resp, err := client.Do(req)
	if err != nil {
		return Snapshot{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	// Stamp the snapshot when the answer arrived: the engine's gauges were
	// read at about this time, not when the body finished parsing.
	at := now()
	if err := redirectError(resp); err != nil {
		return Snapshot{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return Snapshot{}, fmt.Errorf("scrape %s: HTTP %s", url, resp.Status)
	}
	snap, err := Parse(resp.Body)
	if err != nil {
		return Snapshot{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	snap.Time = at
	return snap, nil
}

// Parse reads Prometheus text exposition into a Snapshot (Time left zero).
// It returns ErrNoEngineMetrics when no known family is present, and
// ErrPageTooLarge past maxBodyBytes. Only the families slaprobe reads are
// parsed: the others are dropped line by line as the page streams in
// (filter.go), so memory follows what is kept, not the page.
func Parse(r io.Reader) (Snapshot, error) {
	// The zero TextParser has no name validation scheme and panics on the
	// first name it checks. vLLM and SGLang names contain ':', which the
	// legacy scheme allows in metric names; UTF-8 also accepts whatever a
	// proxy or a newer engine may put in label names.
	p := expfmt.NewTextParser(model.UTF8Validation)
	f := newPageFilter(&capReader{r: r, left: maxBodyBytes})
	fams, err := p.TextToMetricFamilies(f)
	if err != nil {
		if errors.Is(err, ErrPageTooLarge) {
			return Snapshot{}, ErrPageTooLarge
		}
		return Snapshot{}, fmt.Errorf("parse metrics: %w", err)
	}
	has := func(prefix string) bool { return f.prefixes[prefix] || hasPrefix(fams, prefix) }
	return fromFamilies(fams, has, func() *NoEngineError { return f.noEngine(familyNames(fams)) })
}

// Where a prompt token's KV came from, the source label of
// slaprobe_engine_prompt_tokens_by_source_total.
const (
	SourceComputed   = "computed"
	SourceCacheHit   = "cache_hit"
	SourceKVTransfer = "kv_transfer"
)

// FromFamilies builds a Snapshot from parsed metric families.
func FromFamilies(fams map[string]*dto.MetricFamily) (Snapshot, error) {
	has := func(prefix string) bool { return hasPrefix(fams, prefix) }
	return fromFamilies(fams, has, func() *NoEngineError { return noEngineError(fams) })
}

// fromFamilies builds a Snapshot from fams with the table of the flavor
// detected (flavor.go); has says whether the page had a family of an
// engine's prefix, and none builds the error of a page without one.
func fromFamilies(fams map[string]*dto.MetricFamily, has func(prefix string) bool, none func() *NoEngineError) (Snapshot, error) {
	if f := detect(has); f != nil {
		return f.read(fams), nil
	}
	return Snapshot{}, none()
}

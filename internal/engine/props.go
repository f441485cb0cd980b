package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
)

// Props is what llama.cpp server says of itself on GET /props.
type Props struct {
	// ContextSize is the context of one slot, in tokens
	// (default_generation_settings.n_ctx); 0 when not given.
	ContextSize int
	// TotalSlots is the number of requests the server runs at once.
	TotalSlots int
}

// maxPropsBytes bounds what a /props read takes in: llama.cpp's answer is
// a few KiB (its chat template is the largest part).
const maxPropsBytes = 1 << 20

// errNoProps means the server has no /props (404): not llama.cpp's server,
// or a build without it. It is not logged as a failure.
var errNoProps = errors.New("no /props endpoint")

// PropsURL is llama.cpp server's /props beside metricsURL, which must end
// in /metrics (the server serves both at its root); "" otherwise.
func PropsURL(metricsURL string) string {
	base, ok := strings.CutSuffix(metricsURL, "/metrics")
	if !ok {
		return ""
	}
	return base + "/props"
}

// FetchProps reads and checks url's llama.cpp /props. The deadline comes
// from ctx; a nil client means http.DefaultClient.
func FetchProps(ctx context.Context, client *http.Client, url string) (Props, error) {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Props{}, fmt.Errorf("props %s: %w", url, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return Props{}, fmt.Errorf("props %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return Props{}, errNoProps
	}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return Props{}, fmt.Errorf("props %s: HTTP %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPropsBytes+1))
	if err != nil {
		return Props{}, fmt.Errorf("props %s: %w", url, err)
	}
	if len(body) > maxPropsBytes {
		return Props{}, fmt.Errorf("props %s: body over %d bytes", url, maxPropsBytes)
	}
	return parseProps(body)
}

func parseProps(body []byte) (Props, error) {
	var raw struct {
		TotalSlots *float64 `json:"total_slots"`
		Defaults   struct {
			NCtx *float64 `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return Props{}, fmt.Errorf("props: %w", err)
	}
	if raw.TotalSlots == nil {
		return Props{}, errors.New("props: total_slots missing, expected a positive integer")
	}
	n := *raw.TotalSlots
	if n != math.Trunc(n) || n < 1 || n > 1<<20 {
		return Props{}, fmt.Errorf("props: total_slots %v, expected a positive integer", n)
	}
	p := Props{TotalSlots: int(n)}
	if raw.Defaults.NCtx != nil {
		c := *raw.Defaults.NCtx
		if c != math.Trunc(c) || c < 0 || c > 1<<30 {
			return Props{}, fmt.Errorf("props: default_generation_settings.n_ctx %v, expected a non-negative integer", c)
		}
		p.ContextSize = int(c)
	}
	return p, nil
}

// readPropsOnce reads /props the first time the watcher finds llama.cpp
// server metrics; a 404 is skipped quietly, another failure logged once.
func (w *Watcher) readPropsOnce(ctx context.Context, client *http.Client) {
	w.mu.Lock()
	if w.propsTried {
		w.mu.Unlock()
		return
	}
	w.propsTried = true
	w.mu.Unlock()
	url := PropsURL(w.url)
	if url == "" {
		w.logger.Debug("llama.cpp /props not read: the metrics URL does not end in /metrics")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
	defer cancel()
	p, err := FetchProps(ctx, client, url)
	switch {
	case errors.Is(err, errNoProps):
		w.logger.Debug("llama.cpp server has no /props", "url", url)
		return
	case err != nil:
		w.logger.Warn("llama.cpp /props unreadable; slots not exported", "err", err)
		return
	}
	w.mu.Lock()
	w.props, w.hasProps = p, true
	w.mu.Unlock()
}

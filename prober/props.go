package prober

// This file holds llama.cpp server's GET /props: its per-slot context size
// stands in for max_model_len, which its /v1/models does not give.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
)

// Props is what llama.cpp server says of itself on GET /props.
type Props struct {
	// ContextSize is the context of one slot, in tokens
	// (default_generation_settings.n_ctx); 0 when not given.
	ContextSize int
	// TotalSlots is the number of requests the server runs at once.
	TotalSlots int
}

// MaxPropsBytes bounds what a /props read takes in: llama.cpp's answer is
// a few KiB (its chat template is the largest part).
const MaxPropsBytes = 1 << 20

// ErrNoProps means the server has no /props (404): not llama.cpp's server,
// or a build without it. It is not a failure worth a log line.
var ErrNoProps = errors.New("no /props endpoint")

// ReadProps reads GET {base}/props of t with t's client and headers. The
// deadline comes from ctx.
func ReadProps(ctx context.Context, t Target) (Props, error) {
	url := endpointURL(t.BaseURL, "/props")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Props{}, fmt.Errorf("props %s: %w", url, err)
	}
	req.Header.Set("Accept", "application/json")
	setTargetHeaders(req, t)
	resp, err := targetClient(t).Do(req)
	if err != nil {
		return Props{}, fmt.Errorf("props %s: %w", url, err)
	}
	return ReadPropsResponse(url, resp)
}

// ReadPropsResponse checks and parses resp, an answer of url (a /props),
// and closes its body.
func ReadPropsResponse(url string, resp *http.Response) (Props, error) {
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return Props{}, ErrNoProps
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 { // not followed: reason redirect
		return Props{}, fmt.Errorf("props %s: %w", url, readHTTPError(resp.StatusCode, resp.Header, io.LimitReader(resp.Body, 4096)))
	}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return Props{}, fmt.Errorf("props %s: HTTP %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxPropsBytes+1))
	if err != nil {
		return Props{}, fmt.Errorf("props %s: %w", url, err)
	}
	if len(body) > MaxPropsBytes {
		return Props{}, fmt.Errorf("props %s: body over %d bytes", url, MaxPropsBytes)
	}
	return ParseProps(body)
}

// ParseProps reads llama.cpp's /props body: total_slots must be a positive
// integer, default_generation_settings.n_ctx a non-negative one if given.
func ParseProps(body []byte) (Props, error) {
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

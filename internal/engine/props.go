package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/slaprobe/slaprobe/prober"
)

// Props is what llama.cpp server says of itself on GET /props; the prober
// reads the same endpoint for its context size.
type Props = prober.Props

// maxPropsBytes bounds what a /props read takes in.
const maxPropsBytes = prober.MaxPropsBytes

// errNoProps means the server has no /props (404). It is not logged as a
// failure.
var errNoProps = prober.ErrNoProps

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
// from ctx; a nil client means http.DefaultClient. No redirect is followed.
func FetchProps(ctx context.Context, client *http.Client, url string) (Props, error) {
	client = noRedirect(client) // a 3xx fails, naming its Location (ReadPropsResponse)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Props{}, fmt.Errorf("props %s: %w", url, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return Props{}, fmt.Errorf("props %s: %w", url, err)
	}
	return prober.ReadPropsResponse(url, resp)
}

func parseProps(body []byte) (Props, error) { return prober.ParseProps(body) }

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

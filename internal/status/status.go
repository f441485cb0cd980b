package status

import (
	"bytes"
	"fmt"
	"html/template"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/version"

	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/engine"
	"github.com/slaprobe/slaprobe/internal/gpu"
	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/report/render"
	"github.com/slaprobe/slaprobe/internal/sweeper"
	"github.com/slaprobe/slaprobe/internal/workload"
)

// DefaultWindow is the window of the p50 and tail figures, the one the
// SLA alert rules use.
const DefaultWindow = 15 * time.Minute

// Link is an extra link on the status page (the demo adds the simulated
// engine's metrics).
type Link struct {
	Address, Text, Description string
}

// GPUs is what the page reads of the NVML reader (*gpu.Reader).
type GPUs interface {
	Up() bool
	Devices() []gpu.Device
	Read() gpu.Readings
}

// Options are the page's data sources, injected by the composition root.
// Only Config and Recorder are required; a nil source is shown as absent.
type Options struct {
	// Config is the current config (targets, scenarios, thresholds).
	Config func() *config.Config
	// Recorder holds the recent probes and their log lines.
	Recorder *Recorder
	// NextProbe tells when the scheduler sends the next probe of a
	// scenario on a target.
	NextProbe func(target, scenario string) (time.Time, bool)
	// Disabled reports whether a scenario is disabled on a target because
	// it does not fit the model's max_model_len, and that length.
	Disabled func(target, scenario string) (bool, int)
	// Engine returns the state of a target's engine /metrics; nil when
	// engine metrics are off.
	Engine func(target string) (engine.Status, bool)
	// GPUs is the NVML reader.
	GPUs GPUs
	// Sweeps is the daemon sweep job's state; nil when there is none.
	Sweeps func() sweeper.Snapshot
	// LiveMix returns a target's live length mix as last read
	// (workload.Live.Cached): read is zero when it was never read; nil
	// when engine metrics are off.
	LiveMix func(target string) (mix workload.LiveMix, read time.Time, err error)
	// Ready reports whether the scheduler runs.
	Ready func() bool

	Description string
	Links       []Link
	// Window of the p50 and tail figures; default DefaultWindow.
	Window time.Duration
	// Refresh is the page's reload period; default 10 s, negative: never.
	Refresh time.Duration
	Now     func() time.Time
	Logger  *slog.Logger
}

// Server serves the status page, the probe view and the sweep reports.
type Server struct {
	o       Options
	started time.Time
}

// New returns a Server; o.Config and o.Recorder are required.
func New(o Options) (*Server, error) {
	if o.Config == nil || o.Recorder == nil {
		return nil, fmt.Errorf("status: Config and Recorder are required")
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.Refresh == 0 {
		o.Refresh = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{o: o, started: o.Now()}, nil
}

// Mount adds the Server's endpoints through handle (daemon.Daemon.Handle):
//
//	GET /                                  the status page
//	GET /probes?target=T[&scenario=S]      recent probes of a target, with their log lines
//	GET /sweep/{target}/report.html        the latest daemon sweep of target, as bench writes it
//	GET /sweep/{target}/report.json
func (s *Server) Mount(handle func(pattern string, h http.Handler)) {
	handle("GET /{$}", http.HandlerFunc(s.servePage))
	handle("GET /probes", http.HandlerFunc(s.serveProbes))
	handle("GET /sweep/{target}/report.html", http.HandlerFunc(s.serveReport))
	handle("GET /sweep/{target}/report.json", http.HandlerFunc(s.serveReport))
}

// render executes t into a buffer first, so that a template error is a 500
// rather than half a page.
func (s *Server) render(w http.ResponseWriter, code int, t *template.Template, data any) {
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		s.o.Logger.Error("status page", "err", err)
		http.Error(w, "cannot render the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// Nothing on these pages loads from elsewhere, and nothing runs.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	w.WriteHeader(code)
	_, _ = w.Write(s.scrub(buf.Bytes()))
}

// scrub hides the config's secrets in a page: an error a server answered
// may echo a credential slaprobe sent it.
func (s *Server) scrub(page []byte) []byte {
	cfg := s.o.Config()
	if cfg == nil {
		return page
	}
	return []byte(cfg.Scrub(string(page)))
}

// serveReport serves the latest sweep of a target in the report schema.
func (s *Server) serveReport(w http.ResponseWriter, r *http.Request) {
	target := r.PathValue("target")
	if s.o.Sweeps == nil {
		http.Error(w, "this daemon has no sweep job", http.StatusNotFound)
		return
	}
	var rep *report.Report
	for _, t := range s.o.Sweeps().Targets {
		if t.Target == target {
			rep = t.Result
		}
	}
	if rep == nil {
		http.Error(w, fmt.Sprintf("no sweep of target %q yet: start one with POST /-/sweep?target=%s (sweep.enabled must be true)",
			target, url.QueryEscape(target)), http.StatusNotFound)
		return
	}
	var buf bytes.Buffer
	var err error
	if strings.HasSuffix(r.URL.Path, ".json") {
		w.Header().Set("Content-Type", "application/json")
		err = report.RenderJSON(&buf, rep)
	} else {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		err = render.RenderHTML(&buf, rep)
	}
	if err != nil {
		w.Header().Del("Content-Type")
		http.Error(w, "cannot render the report: "+err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = w.Write(s.scrub(buf.Bytes()))
}

// versionLine names the build: the version stamped by `make build`, else
// what the Go toolchain recorded (a `go run` has no stamp).
func versionLine() string {
	if version.Version != "" {
		s := version.Version
		if version.Revision != "" && version.Revision != "unknown" {
			s += " (revision " + shortRev(version.Revision) + ")"
		}
		return s + ", " + runtime.Version()
	}
	rev := version.GetRevision()
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, st := range bi.Settings {
			if st.Key == "vcs.revision" {
				rev = st.Value
			}
		}
	}
	s := "development build (make build stamps a version)"
	if rev != "" && rev != "unknown" {
		s += ", revision " + shortRev(rev)
	}
	return s + ", " + runtime.Version()
}

func shortRev(r string) string {
	if len(r) > 12 {
		return r[:12]
	}
	return r
}

// ago prints how long before now t was, coarsely.
func ago(now, t time.Time) string {
	return human(now.Sub(t)) + " ago"
}

// human prints a duration for people: "4 s", "3 min 5 s", "2 h 10 min".
func human(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Second:
		return "0 s"
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		m, sec := int(d.Minutes()), int(d.Seconds())%60
		if sec == 0 {
			return fmt.Sprintf("%d min", m)
		}
		return fmt.Sprintf("%d min %d s", m, sec)
	default:
		h, m := int(d.Hours()), int(d.Minutes())%60
		return fmt.Sprintf("%d h %d min", h, m)
	}
}

func clock(t time.Time) string { return t.Format("15:04:05") }

func pct(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.0f %%", v*100)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

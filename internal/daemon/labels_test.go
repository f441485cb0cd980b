package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/prober"
)

// TestLabelValuesOnlyFromConfig points the daemon, with the real prober, at
// servers that put hostile text everywhere they can (/v1/models IDs, chunk
// ids, finish reasons, error messages) and checks that every label value
// slaprobe exports comes from the config or a fixed set. The one value a
// server supplies, a detected model ID, is bounded and printable.
func TestLabelValuesOnlyFromConfig(t *testing.T) {
	eng, err := vllmsim.New(vllmsim.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	simModel := eng.Config().ModelName
	huge := strings.Repeat("m", 10<<10)
	models := func(ids ...string) []byte {
		var data []map[string]any
		for _, id := range ids {
			data = append(data, map[string]any{"id": id, "max_model_len": 1 << 20})
		}
		b, _ := json.Marshal(map[string]any{"object": "list", "data": data})
		return b
	}
	// a: the configured model is served; /v1/models lists junk around it.
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			w.Write(models(huge, "evil\nmodel{x=\"y\"}", simModel))
			return
		}
		eng.Handler().ServeHTTP(w, r)
	}))
	defer a.Close()
	// b: auto-detect; /v1/models lists only IDs that must not become labels,
	// then one that may; the stream is hostile.
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/models":
			w.Write(models(huge, "a\x00b", "ok-model"))
		case strings.HasSuffix(r.URL.Path, "/completions"):
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"id\":\"%s\",\"model\":\"injected\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"%s\"}]}\n\n",
				"chatcmpl-"+strings.Repeat("i", 300), `target=\"pwned\"`)
			fmt.Fprint(w, "event: error\ndata: {\"error\":{\"message\":\"reason=\\\"pwned\\\"\\nscenario=x\"}}\n\n")
		default:
			eng.Handler().ServeHTTP(w, r) // /tokenize
		}
	}))
	defer b.Close()

	dir := t.TempDir()
	path := filepath.Join(dir, "slaprobe.yml")
	writeConfig(t, path, `
global: {scenarios: [chatbot]}
scenarios:
  - {name: chatbot, interval: 1s}
targets:
  - {name: a, url: `+a.URL+`, model: `+simModel+`}
  - {name: b, url: `+b.URL+`}
`)
	d, err := New(Options{ConfigFile: path})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	scrape := func() map[string]*dtoFamily {
		rec := httptest.NewRecorder()
		d.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return parseFamilies(t, rec.Body.String())
	}
	// Wait for a success on a and a failure on b.
	deadline := time.Now().Add(60 * time.Second)
	for {
		fams := scrape()
		if fams["slaprobe_probes_total"].has(`target="a"`, `result="success"`) &&
			fams["slaprobe_probes_total"].has(`target="b"`, `result="error"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no success on a and failure on b within 60 s:\n%s", fams["slaprobe_probes_total"])
		}
		time.Sleep(200 * time.Millisecond)
	}

	allowed := map[string][]string{
		"target":   {"a", "b"},
		"scenario": prober.BuiltinNames(), // the config knows every built-in
		"model":    {simModel, "ok-model", ""},
	}
	for _, r := range prober.Reasons {
		allowed["reason"] = append(allowed["reason"], string(r))
	}
	allowed["reason"] = append(allowed["reason"], prober.ImplausibleReasons...)
	allowed["reason"] = append(allowed["reason"], webRefusedReasons...) // slaprobe_web_requests_refused_total
	allowed["result"] = []string{string(prober.KindSuccess), string(prober.KindError), string(prober.KindShortOutput)}
	for name, f := range scrape() {
		if !strings.HasPrefix(name, "slaprobe_") || name == "slaprobe_build_info" {
			continue
		}
		for _, s := range f.series {
			for ln, lv := range s {
				if ln == "le" || ln == "quantile" {
					continue
				}
				ok, known := allowed[ln]
				if !known {
					// A label the test does not know: it must still be short
					// and printable, and say nothing a server sent.
					if len(lv) > 64 || strings.ContainsAny(lv, "\n\x00\"") || strings.Contains(lv, "pwned") || strings.Contains(lv, "injected") {
						t.Errorf("%s{%s=%q}: a value no config holds", name, ln, lv)
					}
					continue
				}
				if !slices.Contains(ok, lv) {
					t.Errorf("%s{%s=%.80q}: not from the config or a fixed set", name, ln, lv)
				}
			}
		}
	}
}

// dtoFamily is one metric family as label sets, enough for these checks.
type dtoFamily struct {
	series []map[string]string
	text   string
}

func (f *dtoFamily) String() string {
	if f == nil {
		return "<absent>"
	}
	return f.text
}

// has reports whether a series with a non-zero value carries every
// name="value" pair given.
func (f *dtoFamily) has(pairs ...string) bool {
	if f == nil {
		return false
	}
	for _, line := range strings.Split(f.text, "\n") {
		if strings.HasSuffix(line, " 0") {
			continue
		}
		all := true
		for _, p := range pairs {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

func parseFamilies(t *testing.T, body string) map[string]*dtoFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	out := map[string]*dtoFamily{}
	for name, mf := range fams {
		f := &dtoFamily{}
		var lines []string
		for _, m := range mf.GetMetric() {
			ls := map[string]string{}
			var parts []string
			for _, l := range m.GetLabel() {
				ls[l.GetName()] = l.GetValue()
				parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			f.series = append(f.series, ls)
			v := 0.0
			switch {
			case m.Counter != nil:
				v = m.Counter.GetValue()
			case m.Gauge != nil:
				v = m.Gauge.GetValue()
			case m.Histogram != nil:
				v = float64(m.Histogram.GetSampleCount())
			}
			lines = append(lines, fmt.Sprintf("%s{%s} %g", name, strings.Join(parts, ","), v))
		}
		f.text = strings.Join(lines, "\n")
		out[name] = f
	}
	return out
}

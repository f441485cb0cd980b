package engine

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseProps(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       Props
		err        string
	}{
		{"llama.cpp answer", `{"default_generation_settings":{"n_ctx":8192,"temperature":0.8},"total_slots":4,"model_path":"m.gguf","build_info":"b6000"}`,
			Props{ContextSize: 8192, TotalSlots: 4}, ""},
		{"no n_ctx", `{"total_slots":1}`, Props{TotalSlots: 1}, ""},
		{"no total_slots", `{"default_generation_settings":{"n_ctx":8192}}`, Props{}, "total_slots missing"},
		{"zero slots", `{"total_slots":0}`, Props{}, "total_slots 0, expected a positive integer"},
		{"fractional slots", `{"total_slots":1.5}`, Props{}, "total_slots 1.5, expected a positive integer"},
		{"slots as a string", `{"total_slots":"4"}`, Props{}, "props:"},
		{"negative n_ctx", `{"total_slots":2,"default_generation_settings":{"n_ctx":-1}}`, Props{}, "n_ctx -1, expected a non-negative integer"},
		{"not JSON", `<html>`, Props{}, "props:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProps([]byte(tc.body))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestFetchProps(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok/props":
			_, _ = w.Write([]byte(`{"total_slots":3}`))
		case "/big/props":
			_, _ = w.Write([]byte(`{"total_slots":3,"chat_template":"`))
			_, _ = w.Write([]byte(strings.Repeat("x", maxPropsBytes)))
			_, _ = w.Write([]byte(`"}`))
		case "/err/props":
			http.Error(w, "boom", http.StatusInternalServerError)
		case "/slow/props":
			time.Sleep(200 * time.Millisecond)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	if p, err := FetchProps(ctx, srv.Client(), srv.URL+"/ok/props"); err != nil || p.TotalSlots != 3 {
		t.Errorf("ok: %+v, %v", p, err)
	}
	if _, err := FetchProps(ctx, srv.Client(), srv.URL+"/none/props"); !errors.Is(err, errNoProps) {
		t.Errorf("404: err = %v, want errNoProps", err)
	}
	if _, err := FetchProps(ctx, srv.Client(), srv.URL+"/err/props"); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("500: err = %v", err)
	}
	if _, err := FetchProps(ctx, srv.Client(), srv.URL+"/big/props"); err == nil || !strings.Contains(err.Error(), "body over") {
		t.Errorf("over-long body: err = %v, want it refused", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := FetchProps(tctx, srv.Client(), srv.URL+"/slow/props"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow: err = %v, want deadline exceeded", err)
	}
	if got := PropsURL("http://h:8080/metrics"); got != "http://h:8080/props" {
		t.Errorf("PropsURL = %q", got)
	}
	if got := PropsURL("http://h:8080/custom"); got != "" {
		t.Errorf("PropsURL of a URL not ending in /metrics = %q, want empty", got)
	}
}

// A Watcher reads llama.cpp's /props once, when it first finds llamacpp:
// metrics, and not for another engine.
func TestWatcherReadsPropsOnce(t *testing.T) {
	llama := readTestdata(t, "llamacpp.txt")
	vllm := readTestdata(t, "vllm_2026.txt")
	var propsHits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/llama/metrics":
			_, _ = w.Write([]byte(llama))
		case "/vllm/metrics":
			_, _ = w.Write([]byte(vllm))
		case "/llama/props", "/vllm/props":
			propsHits.Add(1)
			_, _ = w.Write([]byte(`{"default_generation_settings":{"n_ctx":4096},"total_slots":2}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	w := NewWatcher("llama", srv.URL+"/llama/metrics", srv.Client(), Options{Clock: clk}, nil)
	for range 3 {
		if _, err := w.Scrape(context.Background()); err != nil {
			t.Fatal(err)
		}
		clk.Add(time.Second)
	}
	st := w.Status()
	if !st.HasProps || st.Props != (Props{ContextSize: 4096, TotalSlots: 2}) || propsHits.Load() != 1 {
		t.Errorf("props %+v (has %v) after %d reads; want slots 2, n_ctx 4096, read once", st.Props, st.HasProps, propsHits.Load())
	}
	v := NewWatcher("vllm", srv.URL+"/vllm/metrics", srv.Client(), Options{Clock: clk}, nil)
	if _, err := v.Scrape(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v.Status().HasProps || propsHits.Load() != 1 {
		t.Errorf("a vLLM target read /props (%d reads)", propsHits.Load())
	}
}

// Only the newest snapshot keeps histograms; a note is logged once.
func TestWatcherHistogramsAndNotes(t *testing.T) {
	page := histPage([]float64{0.1, 0.2}, []float64{0.1, 0.3}) +
		"# TYPE vllm:request_queue_time_seconds histogram\n" +
		"vllm:request_queue_time_seconds_bucket{le=\"1\"} 1\nvllm:request_queue_time_seconds_bucket{le=\"+Inf\"} 2\n" +
		"vllm:request_queue_time_seconds_sum 3\nvllm:request_queue_time_seconds_count 2\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(page)) }))
	defer srv.Close()
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	rec := &recorder{}
	w := NewWatcher("v", srv.URL+"/metrics", srv.Client(), Options{Clock: clk}, slog.New(rec))
	for range 3 {
		if _, err := w.Scrape(context.Background()); err != nil {
			t.Fatal(err)
		}
		clk.Add(time.Second)
	}
	if n := rec.count(slog.LevelWarn); n != 1 {
		t.Errorf("%d warnings for one note seen 3 times, want 1", n)
	}
	snaps := w.Window(time.Hour)
	if len(snaps) != 3 {
		t.Fatalf("%d snapshots, want 3", len(snaps))
	}
	for i, s := range snaps[:2] {
		if s.Hists != nil || s.Notes != nil {
			t.Errorf("snapshot %d of 3 keeps histograms or notes", i)
		}
	}
	last := snaps[2]
	if last.Hists == nil || last.Hists.Phase[PhaseQueue].Count != 2 || last.Hists.TTFT != nil {
		t.Errorf("newest snapshot's histograms = %+v; want the queue phase and no TTFT (bounds differ)", last.Hists)
	}
}

package prober

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

func TestListModels(t *testing.T) {
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			w.WriteHeader(404)
			return
		}
		auth = r.Header.Get("Authorization")
		_, _ = io.WriteString(w, `{"object":"list","data":[
			{"id":"Qwen/Qwen3-30B-A3B","object":"model","root":"Qwen/Qwen3-30B-A3B","max_model_len":32768},
			{"id":"lora-a","object":"model","root":"/adapters/a","parent":"Qwen/Qwen3-30B-A3B","max_model_len":null},
			{"id":"other","object":"model"}]}`)
	}))
	defer srv.Close()
	models, err := ListModels(context.Background(), Target{BaseURL: srv.URL + "/", Client: srv.Client(),
		Headers: map[string]string{"Authorization": "Bearer k"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []ModelInfo{
		{ID: "Qwen/Qwen3-30B-A3B", Root: "Qwen/Qwen3-30B-A3B", MaxModelLen: 32768},
		{ID: "lora-a", Root: "/adapters/a"},
		{ID: "other"},
	}
	if !slices.Equal(models, want) || auth != "Bearer k" {
		t.Fatalf("got %+v (auth %q)", models, auth)
	}
}

func TestListModelsErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("x") {
			return
		}
		w.WriteHeader(401)
		_, _ = io.WriteString(w, `{"error":{"message":"invalid api key"}}`)
	}))
	defer srv.Close()
	_, err := ListModels(context.Background(), Target{BaseURL: srv.URL, Client: srv.Client()})
	if err == nil || !strings.Contains(err.Error(), "invalid api key") || ClassifyError(err) != ReasonHTTP4xx {
		t.Fatalf("err = %v", err)
	}
	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "<html>") }))
	defer srv2.Close()
	if _, err := ListModels(context.Background(), Target{BaseURL: srv2.URL}); err == nil {
		t.Fatal("HTML accepted as a model list")
	}
}

func TestFits(t *testing.T) {
	s := Scenario{InputTokens: 32768, OutputTokens: 1024}
	for mml, want := range map[int]bool{0: true, -1: true, 33792: true, 33791: false, 131072: true} {
		if got := Fits(s, mml); got != want {
			t.Errorf("Fits(%d) = %v, want %v", mml, got, want)
		}
	}
}

func TestChooseModel(t *testing.T) {
	base := ModelInfo{ID: "base", MaxModelLen: 32768}
	lora := ModelInfo{ID: "lora-a", Root: "/adapters/a"}
	other := ModelInfo{ID: "other"}
	for _, tc := range []struct {
		name       string
		models     []ModelInfo
		configured string
		want       ModelInfo
		listed     bool
		err        error
	}{
		{"adapter listed first: the base with a context length", []ModelInfo{lora, base}, "", base, true, nil},
		{"first with a context length", []ModelInfo{base, lora}, "", base, true, nil},
		{"none has a context length: the first", []ModelInfo{other, lora}, "", other, true, nil},
		{"configured and listed", []ModelInfo{base, lora}, "lora-a", lora, true, nil},
		{"configured, not listed", []ModelInfo{base}, "x", ModelInfo{ID: "x"}, false, nil},
		{"configured, empty list", nil, "x", ModelInfo{ID: "x"}, false, nil},
		{"nothing", nil, "", ModelInfo{}, false, ErrNoModel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, listed, err := ChooseModel(tc.models, tc.configured)
			if got != tc.want || listed != tc.listed || err != tc.err {
				t.Fatalf("ChooseModel = %+v, %v, %v; want %+v, %v, %v", got, listed, err, tc.want, tc.listed, tc.err)
			}
		})
	}
}

// A server that lists a LoRA adapter before its base model: probes (through
// Prepare's auto-detection), the scheduler and DetectModel (sweeps, bench)
// must all measure the same model. Before ChooseModel, Prepare and sweeps
// took the first entry (the adapter) and the scheduler the base.
func TestModelChoiceAgrees(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"data":[
			{"id":"lora-a","root":"/adapters/a","max_model_len":null},
			{"id":"base","root":"base","max_model_len":32768}]}`)
	}))
	defer srv.Close()
	tg := Target{Name: "t", API: APIChat, BaseURL: srv.URL, Client: srv.Client()}
	m, listed, err := DetectModel(context.Background(), tg)
	if err != nil || !listed || m.ID != "base" {
		t.Fatalf("DetectModel = %+v, %v, %v; want base", m, listed, err)
	}
	p := New(nil, SystemClock{})
	got, err := p.detectModel(context.Background(), tg)
	if err != nil || got != "base" {
		t.Fatalf("Prober.detectModel = %q, %v; want base", got, err)
	}
}

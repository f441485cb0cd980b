package prober

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// The API's default (chat) is resolved once, where the config and the flags are read
// (internal/config, TestEveryTargetHasAnAPI): an empty API must not reach the prober. If one does
// (a Target built by hand), Prepare and Probe fail naming the field before any request, instead of
// probing on a guessed API and labelling the metrics with it. A scenario's own API still wins over
// the target's.
func TestPrepareRejectsEmptyAPI(t *testing.T) {
	cases := []struct {
		name      string
		target    API
		scenario  API
		wantErr   bool
		wantOnAPI API
	}{
		{"target and scenario without API", "", "", true, ""},
		{"target API not one of APIs", "openai", "", true, ""},
		{"scenario API not one of APIs", APIChat, "grpc", true, ""},
		{"target API", APICompletions, "", false, APICompletions},
		{"scenario API over an empty target's", "", APIChat, false, APIChat},
		{"scenario API over the target's", APIChat, APICompletions, false, APICompletions},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := calScenario("s", 64, 4)
			s.API = c.scenario
			if !c.wantErr {
				_, target := newFakeVLLM(t, &fakeVLLM{})
				target.API = c.target
				prep, err := New(nil, nil).Prepare(context.Background(), target, "m", s)
				if err != nil || prep.API != c.wantOnAPI {
					t.Fatalf("Prepare = %v, %v; want a Prepared on %q", prep, err, c.wantOnAPI)
				}
				return
			}
			// No model given, so a Prepare that got past the API would ask /v1/models first.
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				http.Error(w, "no", http.StatusInternalServerError)
			}))
			t.Cleanup(srv.Close)
			target := Target{Name: "hand-built", API: c.target, BaseURL: srv.URL, Client: srv.Client()}
			prep, err := New(nil, nil).Prepare(context.Background(), target, "", s)
			if err == nil {
				t.Fatalf("Prepare on target api=%q, scenario api=%q = %+v; want an error naming the api", c.target, c.scenario, prep)
			}
			want := `api="` + string(s.APIOn(target)) + `"`
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "expected chat, completions, responses or messages") {
				t.Errorf("Prepare error %q; want it to name %s and what is expected", err, want)
			}
			if n := calls.Load(); n != 0 {
				t.Errorf("Prepare sent %d requests before rejecting the API; want none", n)
			}
			r := New(nil, nil).Probe(context.Background(), target, "", s)
			if r.Kind != KindError || r.Reason != ReasonCalibration || r.Err == nil || !strings.Contains(r.Err.Error(), want) {
				t.Errorf("Probe = kind %s reason %s err %v; want a calibration error naming %s", r.Kind, r.Reason, r.Err, want)
			}
		})
	}
}

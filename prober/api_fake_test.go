package prober

// This file adds an API that no server speaks, to show that an API is one
// file: its constant, its apiKind and its registration, nothing edited
// elsewhere. The "fake" API's request is {"model", "text", "limit",
// "stream", "salt"} at POST /v1/fake with an X-Fake-Protocol header; its
// stream is SSE whose data are {"ev": "tok"|"think", "s": text},
// {"ev": "done", "why": …, "usage": {"in", "out", "hit"}} and
// {"ev": "err", "msg": …}; /tokenize counts its prompt ({"model", "text"}).
//
// It registers in its test rather than in an init: registered for the whole
// package, it would be one of APIs in every other test (and in the messages
// they compare).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fastjson"
)

const apiFake API = "fake"

type fakeAPI struct{}

func (fakeAPI) info() apiInfo {
	return apiInfo{order: 90, path: "/v1/fake", about: "a test's own", header: "X-Fake-Protocol", headerValue: "1", cacheSalt: true}
}

type fakeRequest struct {
	Model  string `json:"model"`
	Text   string `json:"text"`
	Limit  int    `json:"limit"`
	Stream bool   `json:"stream,omitempty"`
	Salt   string `json:"salt,omitempty"`
}

func (fakeAPI) marshal(r requestSpec) ([]byte, error) {
	return json.Marshal(fakeRequest{Model: r.Model, Text: completionPromptText(r.Prompt, r.Steps), Limit: r.MaxTokens, Stream: r.Stream, Salt: r.CacheSalt})
}

func (fakeAPI) tokenize(r requestSpec) ([]byte, error) {
	return json.Marshal(fakeRequest{Model: r.Model, Text: completionPromptText(r.Prompt, r.Steps)})
}

func (fakeAPI) event(d *streamDecoder, v *fastjson.Value, at time.Time) (streamEnd, bool) {
	switch ev := string(v.GetStringBytes("ev")); ev {
	case "tok":
		return d.deltaText(v.Get("s"), ChunkContent, at)
	case "think":
		return d.deltaText(v.Get("s"), ChunkReasoning, at)
	case "done":
		out, ok := jsonCount(v.Get("usage", "out"))
		if !ok {
			return malformedChunk("done without usage.out")
		}
		if in, ok := jsonCount(v.Get("usage", "in")); ok {
			d.res.PromptTokens = in
		}
		if hit, ok := jsonCount(v.Get("usage", "hit")); ok {
			d.res.CachedTokens, d.res.CachedReported = hit, true
		}
		d.res.FinishReason = string(v.GetStringBytes("why"))
		d.usageSeen, d.completion, d.finalUsage = true, out, true
		return streamEnd{done: true}, true
	case "err":
		return streamEnd{reason: ReasonStreamError, err: errors.New(string(v.GetStringBytes("msg")))}, true
	default:
		return malformedChunk("fake event %q", ev)
	}
}

func (fakeAPI) errorText(v *fastjson.Value) string { return string(v.GetStringBytes("msg")) }

// fakeServer speaks the fake API: it counts a prompt with fakeTokens plus
// fakeBOS, waits firstDelay before the first token, and after failAfter
// tokens (when positive) sends an error event.
type fakeServer struct {
	t          *testing.T
	firstDelay time.Duration
	failAfter  int
	cached     int
	paths      chan string
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.paths <- r.URL.Path
	var req fakeRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != "m" || !strings.HasPrefix(req.Text, "[probe ") {
		f.t.Errorf("%s: body %+v, %v; want the fake API's request for model m", r.URL.Path, req, err)
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	n := fakeBOS + fakeTokens(req.Text)
	switch r.URL.Path {
	case "/tokenize":
		fmt.Fprintf(w, `{"count":%d}`, n)
	case "/v1/fake":
		if got := r.Header.Get("X-Fake-Protocol"); got != "1" || !req.Stream || req.Salt == "" {
			f.t.Errorf("probe request: X-Fake-Protocol %q, stream %v, salt %q; want 1, true and a salt", got, req.Stream, req.Salt)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		time.Sleep(f.firstDelay)
		for i := range req.Limit {
			if f.failAfter > 0 && i == f.failAfter {
				_, _ = io.WriteString(w, "event: error\ndata: {\"msg\":\"fake engine overloaded\"}\n\n")
				return
			}
			ev := "tok"
			if i == 0 {
				ev = "think"
			}
			fmt.Fprintf(w, "data: {\"ev\":%q,\"s\":\" w%d\"}\n\n", ev, i)
			fl.Flush()
		}
		fmt.Fprintf(w, "data: {\"ev\":\"done\",\"why\":\"length\",\"usage\":{\"in\":%d,\"out\":%d,\"hit\":%d}}\n\n", n, req.Limit, f.cached)
	default:
		http.NotFound(w, r)
	}
}

// TestFakeAPIProbe registers the fake API and probes a server speaking it
// through Probe, as the scheduler does for a target with api: fake.
func TestFakeAPIProbe(t *testing.T) {
	t.Cleanup(func() { // runs after the unregistering below
		if apiFake.Valid() || strings.Contains(APIList(), "fake") {
			t.Errorf("unregistered: Valid %v, APIList %q; want fake gone", apiFake.Valid(), APIList())
		}
	})
	t.Cleanup(registerAPI(apiFake, fakeAPI{}))
	if !apiFake.Valid() || !strings.HasSuffix(APIList(), " or fake") || APIs[len(APIs)-1] != apiFake {
		t.Fatalf("registered: Valid %v, APIList %q, APIs %v; want fake last", apiFake.Valid(), APIList(), APIs)
	}
	// The fake API has no tool calls: a tools conversation on it is refused.
	tools := calScenario("faketools", 300, 8)
	tools.API, tools.Conversation = apiFake, Conversation{Turns: 2, NewTokens: 64, Tools: true}
	if err := tools.Validate(); err == nil || !strings.Contains(err.Error(), "api=fake; expected chat, responses or messages") {
		t.Errorf("Validate of conversation.tools on api=fake = %v; want it refused, naming the APIs with tool calls", err)
	}
	const firstDelay = 50 * time.Millisecond
	cases := []struct {
		name       string
		failAfter  int
		wantKind   Kind
		wantReason Reason
		wantErr    string
	}{
		{"success", 0, KindSuccess, ReasonNone, ""},
		{"error event", 3, KindError, ReasonStreamError, "fake engine overloaded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeServer{t: t, firstDelay: firstDelay, failAfter: c.failAfter, cached: 16, paths: make(chan string, 1000)}
			srv := httptest.NewServer(f)
			t.Cleanup(srv.Close)
			target := Target{Name: "fake-target", API: apiFake, BaseURL: srv.URL, Client: srv.Client()}
			s := calScenario("fakechat", 300, 8)
			if err := s.Validate(); err != nil {
				t.Fatal(err)
			}

			r := New(nil, nil).Probe(context.Background(), target, "m", s)

			if r.Kind != c.wantKind || r.Reason != c.wantReason || (c.wantErr != "" && (r.Err == nil || r.Err.Error() != c.wantErr)) {
				t.Fatalf("Probe = kind %s reason %s err %v; want %s %s %q", r.Kind, r.Reason, r.Err, c.wantKind, c.wantReason, c.wantErr)
			}
			if r.API != apiFake || r.Target != "fake-target" || r.Scenario != "fakechat" {
				t.Errorf("labels: api %q target %q scenario %q; want fake, fake-target, fakechat", r.API, r.Target, r.Scenario)
			}
			if ttft := r.TTFT(); ttft < firstDelay {
				t.Errorf("TTFT %s; want at least the server's %s before its first token", ttft, firstDelay)
			}
			if r.FirstChunkKind != ChunkReasoning || !r.Reasoning {
				t.Errorf("first chunk %v, reasoning %v; want the think event to open the stream", r.FirstChunkKind, r.Reasoning)
			}
			close(f.paths)
			seen := map[string]int{}
			for p := range f.paths {
				seen[p]++
			}
			if seen["/tokenize"] == 0 || seen["/v1/fake"] != 1 || len(seen) != 2 {
				t.Errorf("requests by path %v; want /tokenize (calibration) and one POST /v1/fake", seen)
			}
			if c.wantKind != KindSuccess {
				if r.OutputChunks != c.failAfter {
					t.Errorf("output chunks %d; want the %d before the error", r.OutputChunks, c.failAfter)
				}
				return
			}
			if r.OutputTokens != 8 || r.OutputChunks != 8 || r.CachedTokens != 16 || !r.CachedReported || r.FinishReason != "length" {
				t.Errorf("output %d tokens in %d chunks, cached %d (%v), finish %q; want 8, 8, 16 reported, length",
					r.OutputTokens, r.OutputChunks, r.CachedTokens, r.CachedReported, r.FinishReason)
			}
			if tol := PromptTolerance(300); r.PromptTokens < 300-tol || r.PromptTokens > 300+tol {
				t.Errorf("prompt %d tokens; want the 300±%d calibration asked for", r.PromptTokens, tol)
			}
		})
	}
}

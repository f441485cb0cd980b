package prober

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/test/hostile"
)

func hostileTarget(t *testing.T, srv *hostile.Server, mode string, api API) Target {
	t.Helper()
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return Target{Name: mode, API: api, BaseURL: hs.URL + "/" + mode, Client: hs.Client()}
}

// TestAnswerCapStopsConversation: a server streaming 300 KiB content
// chunks without end, on every API. The priming turn of a conversation
// keeps its answer to replay it; past the 1 MiB cap the probe fails with
// answer_too_large on that turn and nothing more is sent.
func TestAnswerCapStopsConversation(t *testing.T) {
	for _, api := range APIs {
		t.Run(string(api), func(t *testing.T) {
			srv := &hostile.Server{ChunkBytes: 300 << 10}
			target := hostileTarget(t, srv, "bigchunks", api)
			s := conversationTestScenario(2, 32, 16)
			s.OutputTokens, s.Timeout = 400, 30*time.Second
			p := New(nil, nil)
			ctx := context.Background()
			prep, err := p.Prepare(ctx, target, "", s)
			if err != nil {
				t.Fatal(err)
			}
			key := "bigchunks " + apiPath(api)
			before := srv.Hits()[key]
			res := p.Run(ctx, target, prep)
			if res.Reason != ReasonAnswerTooLarge || res.Turn != 1 || len(res.Earlier) != 0 {
				t.Fatalf("reason %q turn %d (%d earlier): %v; want answer_too_large on turn 1", res.Reason, res.Turn, len(res.Earlier), res.Err)
			}
			if !strings.Contains(res.Err.Error(), "1048576 bytes") {
				t.Errorf("error %q does not name the cap", res.Err)
			}
			if sent := srv.Hits()[key] - before; sent != 1 {
				t.Errorf("%d requests sent; want the priming turn only", sent)
			}
			if res.Answer != "" {
				t.Errorf("a failed turn kept %d bytes of answer", len(res.Answer))
			}
		})
	}
}

// TestAnswerCapCountsEveryTurn: the cap is on what the whole conversation
// keeps. Each turn's answer is 3,000 bytes ("ok " × 1,000): under a cap of
// 4,096 the first fits, the second does not; under the default all three
// turns run.
func TestAnswerCapCountsEveryTurn(t *testing.T) {
	for _, tc := range []struct {
		cap      int
		reason   Reason
		lastTurn int
	}{
		{4096, ReasonAnswerTooLarge, 2},
		{0, ReasonNone, 3},
	} {
		srv := &hostile.Server{}
		target := hostileTarget(t, srv, "ok", APIChat)
		s := conversationTestScenario(3, 32, 16)
		s.OutputTokens = 1000
		p := New(nil, nil)
		p.SetMaxAnswerBytes(tc.cap)
		res := p.Probe(context.Background(), target, "", s)
		if res.Reason != tc.reason || res.Turn != tc.lastTurn {
			t.Errorf("cap %d: reason %q on turn %d (%v); want %q on turn %d", tc.cap, res.Reason, res.Turn, res.Err, tc.reason, tc.lastTurn)
		}
	}
}

// TestRedirectNotFollowed: a 307 to another origin on /v1/models, /tokenize,
// /props and the probe itself. Whatever client the target has (one that
// follows redirects included), nothing reaches the other origin; the probe
// fails with reason redirect, naming the Location without its userinfo.
func TestRedirectNotFollowed(t *testing.T) {
	var elsewhereHits atomic.Int64
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhereHits.Add(1)
	}))
	t.Cleanup(elsewhere.Close)
	srv := &hostile.Server{Elsewhere: strings.Replace(elsewhere.URL, "http://", "http://probe:pa55word@", 1)}
	s := probeScenario(8, 10*time.Second)
	for _, what := range []string{"models", "tokenize", "chat"} {
		for _, client := range []*http.Client{nil, {}, {CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}} {
			target := hostileTarget(t, srv, "redirect-"+what, APIChat)
			target.Client, target.Headers = client, map[string]string{"X-Api-Key": "s3cr3t"}
			res := New(nil, nil).Probe(context.Background(), target, "", s)
			if res.Reason != ReasonRedirect {
				t.Errorf("redirect-%s: reason %q (%v); want redirect", what, res.Reason, res.Err)
				continue
			}
			msg := res.Err.Error()
			if !strings.Contains(msg, "307 redirect to \""+elsewhere.URL+"/redirect-"+what) || strings.Contains(msg, "pa55word") {
				t.Errorf("redirect-%s: error %q; want the Location without its userinfo", what, msg)
			}
		}
	}
	target := hostileTarget(t, srv, "redirect-props", APIChat)
	target.Client = &http.Client{}
	_, err := ReadProps(context.Background(), target)
	var he *HTTPError
	if !errors.As(err, &he) || he.Reason() != ReasonRedirect {
		t.Errorf("props: %v; want an HTTPError with reason redirect", err)
	}
	if n := elsewhereHits.Load(); n != 0 {
		t.Errorf("the other origin received %d requests; want none", n)
	}
}

// TestEncodedStreamRefused: a stream sent gzipped although identity was
// asked for (a gzip bomb) is not read.
func TestEncodedStreamRefused(t *testing.T) {
	target := hostileTarget(t, &hostile.Server{}, "gzip", APIChat)
	res := New(nil, nil).Probe(context.Background(), target, "", probeScenario(8, 10*time.Second))
	if res.Reason != ReasonMalformedChunk || !strings.Contains(res.Err.Error(), "Content-Encoding") {
		t.Errorf("reason %q (%v); want malformed_chunk naming the Content-Encoding", res.Reason, res.Err)
	}
}

// TestBoundedBodies: /v1/models and /tokenize answers over their limits
// fail with an error naming the limit, instead of being cut and misread.
func TestBoundedBodies(t *testing.T) {
	big := `{"data":[` + strings.Repeat(`{"id":"m"},`, MaxModelsBytes/11+1) + `{"id":"m"}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(big))
		if r.URL.Path == "/tokenize" {
			_, _ = w.Write([]byte(strings.Repeat(" ", maxCalibrationBody)))
		}
	}))
	t.Cleanup(srv.Close)
	target := Target{Name: "big", API: APIChat, BaseURL: srv.URL, Client: srv.Client()}
	if _, err := ListModels(context.Background(), target); err == nil || !strings.Contains(err.Error(), "more than 4194304 bytes") {
		t.Errorf("models: %v; want the limit named", err)
	}
	target.Model = "m"
	res := New(nil, nil).Probe(context.Background(), target, "", probeScenario(8, 10*time.Second))
	if res.Reason != ReasonCalibration || !strings.Contains(res.Err.Error(), "more than 8388608 bytes") {
		t.Errorf("tokenize: reason %q (%v); want calibration naming the limit", res.Reason, res.Err)
	}
}

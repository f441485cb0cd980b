package config

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestTargetClientsFollowNoRedirect: every client built for a target (its
// own, and /probe's) answers a 307 as it is; the other origin never sees
// the credentials. follow_redirects shows false, as done.
func TestTargetClientsFollowNoRedirect(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL, http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	c, err := LoadBytes([]byte(`targets:
  - url: ` + srv.URL + `
    http_client_config:
      authorization: {credentials: s3cr3t}
probe:
  http_client_config: {authorization: {credentials: s3cr3t}}
`))
	if err != nil {
		t.Fatal(err)
	}
	targets, err := c.Targets()
	if err != nil {
		t.Fatal(err)
	}
	// /probe's client for a configured target, and for one it is allowed
	// to probe by address (where the allow-list lets it).
	probeClients := []*http.Client{targets[0].Client}
	if pt, _, err := c.ProbeTarget(targets[0].Name, "chatbot"); err == nil {
		probeClients = append(probeClients, pt.Client)
	}
	if pt, _, err := c.ProbeTarget(strings.TrimPrefix(srv.URL, "http://"), "chatbot"); err == nil {
		probeClients = append(probeClients, pt.Client)
	}
	for _, client := range probeClients {
		resp, err := client.Get(srv.URL + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTemporaryRedirect {
			t.Errorf("status %d; want the 307 itself", resp.StatusCode)
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the other origin was asked %d times", n)
	}
	c, err = LoadBytes([]byte("targets: [{url: http://127.0.0.1:1, http_client_config: {follow_redirects: true}}]\n" +
		"probe: {http_client_config: {follow_redirects: true}}"))
	if err != nil {
		t.Fatal(err)
	}
	if c.TargetConfigs[0].HTTPClientConfig.FollowRedirects || c.Probe.HTTPClientConfig.FollowRedirects {
		t.Error("follow_redirects: true kept; want it shown off, as done")
	}
}

func TestMaxAnswerBytes(t *testing.T) {
	for _, tc := range []struct {
		yaml, err string
		want      int
	}{
		{"", "", 1 << 20},
		{"global: {max_answer_bytes: 65536}", "", 65536},
		{"global: {max_answer_bytes: 100}", "global.max_answer_bytes=100; expected from 4096 to 67108864", 0},
		{"global: {max_answer_bytes: 1073741824}", "global.max_answer_bytes=1073741824; expected from 4096 to 67108864", 0},
	} {
		c, err := LoadBytes([]byte(tc.yaml + "\ntargets: [{url: http://127.0.0.1:8000}]\n"))
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: err %v; want %q", tc.yaml, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.yaml, err)
		case tc.err == "" && c.Global.MaxAnswerBytes != tc.want:
			t.Errorf("%q: max_answer_bytes %d; want %d", tc.yaml, c.Global.MaxAnswerBytes, tc.want)
		}
	}
}

package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
)

// fastConfig is a quick simulated engine without early stops.
func fastConfig() vllmsim.Config {
	c := vllmsim.DefaultConfig()
	c.MaxModelLen = 8192
	c.KVCacheTokens = 1 << 16
	c.PrefillOverhead = 2 * time.Millisecond
	c.PrefillTokensPerSecond = 1e6
	c.PrefillQuadratic = 0
	c.DecodeBase = time.Millisecond
	c.DecodePerSeq = 0
	c.DecodePerKVToken = 0
	c.EOSMeanTokens = 0
	return c
}

// fleet starts n simulated engines behind a gateway with the policy.
func fleet(t *testing.T, policy Policy, n int) (*Gateway, *httptest.Server) {
	t.Helper()
	var urls []string
	for range n {
		e, err := vllmsim.New(fastConfig(), nil)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(e.Handler())
		t.Cleanup(srv.Close)
		t.Cleanup(e.Close)
		urls = append(urls, srv.URL)
	}
	g, err := New(policy, urls...)
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(g)
	t.Cleanup(gw.Close)
	return g, gw
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type reply struct {
	backend int
	answer  string
	prompt  int
	cached  int
}

// chat sends one non-streaming chat request through the gateway.
func chat(t *testing.T, client *http.Client, url string, header http.Header, msgs []message, out int) reply {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": vllmsim.DefaultConfig().ModelName, "messages": msgs, "max_tokens": out, "ignore_eos": true})
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Choices []struct {
			Message message `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("body: %v", err)
	}
	b, err := strconv.Atoi(resp.Header.Get(BackendHeader))
	if err != nil {
		t.Fatalf("%s: %q", BackendHeader, resp.Header.Get(BackendHeader))
	}
	return reply{b, r.Choices[0].Message.Content, r.Usage.PromptTokens, r.Usage.PromptTokensDetails.CachedTokens}
}

// TestRouting: independent requests (no cookies kept) alternate over the backends under every
// policy; a conversation whose client keeps cookies (or sends its session header) stays on one
// backend with affinity and so finds its whole history in that engine's prefix cache, while
// round-robin sends its follow-ups to an engine that never saw it.
func TestRouting(t *testing.T) {
	const out = 64
	cfg := fastConfig()
	tests := []struct {
		policy      Policy
		header      http.Header
		sameBackend bool
	}{
		{RoundRobin, nil, false},
		{CookieAffinity, nil, true},
		{HeaderAffinity, http.Header{DefaultHeader: {"conversation-1"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.policy.String(), func(t *testing.T) {
			g, gw := fleet(t, tt.policy, 2)
			var seen []int
			for i := range 4 {
				r := chat(t, gw.Client(), gw.URL, nil, []message{{"user", fmt.Sprintf("independent %c", 'a'+i)}}, 2)
				seen = append(seen, r.backend)
			}
			if fmt.Sprint(seen) != "[0 1 0 1]" {
				t.Errorf("independent requests went to %v, want [0 1 0 1]", seen)
			}

			jar, _ := cookiejar.New(nil)
			client := &http.Client{Jar: jar}
			msgs := []message{{"user", "wxyz " + strings.Repeat("data ", 400)}}
			p := cfg.ChatPromptTokens([]vllmsim.ChatMessage{{Role: "user", Content: msgs[0].Content}})
			first := chat(t, client, gw.URL, tt.header, msgs, out)
			if first.prompt != p || first.cached != 0 {
				t.Fatalf("turn 1: prompt %d cached %d, want %d, 0", first.prompt, first.cached, p)
			}
			// What each engine holds of the conversation: the full blocks of the longest history
			// (prompt and answer, all but the last token) it served. The conversation only grows,
			// so that is the cached prefix of any later turn sent to it.
			held := map[int]int{first.backend: (p + out - 1) / vllmsim.BlockSize * vllmsim.BlockSize}
			prev := first
			for turn := 2; turn <= 5; turn++ {
				msgs = append(msgs, message{"assistant", prev.answer}, message{"user", fmt.Sprintf("turn %d %s", turn, strings.Repeat("data ", 40))})
				r := chat(t, client, gw.URL, tt.header, msgs, out)
				wantBackend := first.backend
				if !tt.sameBackend {
					wantBackend = 1 - prev.backend
				}
				if r.backend != wantBackend || r.cached != held[r.backend] {
					t.Errorf("turn %d: backend %d, cached %d of %d; want backend %d, cached %d", turn, r.backend, r.cached, r.prompt, wantBackend, held[r.backend])
				}
				t.Logf("turn %d: backend %d, prompt %d, cached %d", turn, r.backend, r.prompt, r.cached)
				held[r.backend] = (r.prompt + out - 1) / vllmsim.BlockSize * vllmsim.BlockSize
				prev = r
			}
			t.Logf("served per backend: %v", g.Served())
		})
	}
}

func TestNewRejects(t *testing.T) {
	tests := []struct {
		policy   Policy
		backends []string
		want     string
	}{
		{RoundRobin, nil, "backends: got none"},
		{Policy(7), []string{"http://127.0.0.1:1"}, "policy: got Policy(7)"},
		{RoundRobin, []string{"127.0.0.1:1"}, `backend 0: got "127.0.0.1:1", want an absolute base URL`},
	}
	for _, tt := range tests {
		if _, err := New(tt.policy, tt.backends...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%v, %v) = %v, want an error containing %q", tt.policy, tt.backends, err, tt.want)
		}
	}
}

// TestSlow: SetSlow(0.5, 2) slows every second request, evenly spread; each
// chunk of a slowed response reaches the client no earlier than twice the
// time the engine took to send it (the engine writes its own elapsed time
// into each chunk, so the bound needs no clock but the engine's), the bytes
// intact; the others pass untouched. SetSlow(0, 1) turns it off.
func TestSlow(t *testing.T) {
	const gap = 40 * time.Millisecond
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for range 3 {
			time.Sleep(gap)
			fmt.Fprintf(w, "data: %d\n\n", time.Since(start))
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(engine.Close)
	g, err := New(RoundRobin, engine.URL)
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(g)
	t.Cleanup(gw.Close)
	if err := g.SetSlow(0.5, 2); err != nil {
		t.Fatal(err)
	}
	get := func(n int) (slowed string) {
		t.Helper()
		start := time.Now()
		resp, err := gw.Client().Get(gw.URL + "/v1/chat/completions")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		slowed = resp.Header.Get(SlowedHeader)
		buf := make([]byte, 0, 256)
		chunks := 0
		for chunks < 3 {
			b := make([]byte, 256)
			k, err := resp.Body.Read(b)
			arrived := time.Since(start)
			buf = append(buf, b[:k]...)
			for {
				i := bytes.Index(buf, []byte("\n\n"))
				if i < 0 {
					break
				}
				var engineNS int64
				if _, err := fmt.Sscanf(string(buf[:i]), "data: %d", &engineNS); err != nil {
					t.Fatalf("request %d: chunk %q: %v", n, buf[:i], err)
				}
				buf, chunks = buf[i+2:], chunks+1
				if want := 2 * time.Duration(engineNS); slowed != "" && arrived < want {
					t.Errorf("request %d chunk %d: arrived after %v, the engine sent it after %v: want at least %v", n, chunks, arrived, time.Duration(engineNS), want)
				}
			}
			if err != nil {
				break
			}
		}
		if chunks != 3 {
			t.Errorf("request %d: %d chunks, want 3", n, chunks)
		}
		return slowed
	}
	var got []string
	for n := range 4 {
		got = append(got, get(n))
	}
	if fmt.Sprint(got) != "[ 2  2]" {
		t.Errorf("%s by request: %q, want every second one slowed by 2", SlowedHeader, got)
	}
	if err := g.SetSlow(0, 1); err != nil || get(4) != "" {
		t.Errorf("SetSlow(0, 1): %v; the next request is still slowed", err)
	}
	for _, tc := range []struct {
		share, factor float64
		want          string
	}{{1.5, 2, "slow share: got 1.5"}, {0.5, 0.5, "slow factor: got 0.5, want a finite factor >= 1"}} {
		if err := g.SetSlow(tc.share, tc.factor); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SetSlow(%v, %v) = %v, want an error containing %q", tc.share, tc.factor, err, tc.want)
		}
	}
}

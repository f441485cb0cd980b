// Package gateway is a test gateway: an http.Handler that routes requests over several backends
// (simulated engines, in the tests) the way an inference gateway's router does, round-robin or
// keeping a client on one backend. It lets a test control the truth of the router in front of a
// fleet: with round-robin a conversation's follow-ups land on an engine that never saw it; with
// affinity they find their prefix cache.
//
// Test-only: it neither authenticates nor bounds anything.
package gateway

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Policy is how the gateway picks a backend.
type Policy int

const (
	// RoundRobin sends each request to the next backend in turn, whatever the client.
	RoundRobin Policy = iota
	// CookieAffinity routes a request that carries the gateway's cookie to the backend it names;
	// a request without it (or with an unknown value) goes round-robin and its response sets the
	// cookie, as a gateway with session affinity does.
	CookieAffinity
	// HeaderAffinity routes by a hash of a request header (a conversation or session id); a
	// request without the header goes round-robin.
	HeaderAffinity
)

func (p Policy) String() string {
	switch p {
	case RoundRobin:
		return "round-robin"
	case CookieAffinity:
		return "cookie-affinity"
	case HeaderAffinity:
		return "header-affinity"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

const (
	// DefaultCookie is the affinity cookie's name.
	DefaultCookie = "slaprobe-gateway-backend"
	// DefaultHeader is the header HeaderAffinity hashes.
	DefaultHeader = "X-Session-Id"
	// BackendHeader, on every response, names the backend (its index) that served it.
	BackendHeader = "X-Gateway-Backend"
	// SlowedHeader, on a response the gateway slowed (SetSlow), holds the factor.
	SlowedHeader = "X-Gateway-Slowed"

	// maxRequestBytes bounds a request the gateway reads before proxying it.
	maxRequestBytes = 64 << 20
)

// Gateway routes over its backends. Create it with New.
type Gateway struct {
	policy   Policy
	cookie   string
	header   string
	backends []*backend
	next     atomic.Uint64

	slow     atomic.Pointer[slowdown]
	requests atomic.Uint64 // requests seen, for the slowed share
}

// slowdown is SetSlow's setting.
type slowdown struct{ share, factor float64 }

type backend struct {
	proxy  *httputil.ReverseProxy
	served atomic.Uint64
}

// New returns a gateway over the backends' base URLs (e.g. httptest servers' URLs), in order.
func New(policy Policy, backends ...string) (*Gateway, error) {
	if len(backends) == 0 {
		return nil, fmt.Errorf("gateway: backends: got none, want at least one base URL")
	}
	if policy < RoundRobin || policy > HeaderAffinity {
		return nil, fmt.Errorf("gateway: policy: got %v, want RoundRobin, CookieAffinity or HeaderAffinity", policy)
	}
	g := &Gateway{policy: policy, cookie: DefaultCookie, header: DefaultHeader}
	for i, raw := range backends {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("gateway: backend %d: got %q, want an absolute base URL (%v)", i, raw, err)
		}
		p := httputil.NewSingleHostReverseProxy(u)
		p.FlushInterval = -1 // stream every write through at once (SSE)
		g.backends = append(g.backends, &backend{proxy: p})
	}
	return g, nil
}

// Served returns how many requests each backend has been sent, by index.
func (g *Gateway) Served() []uint64 {
	out := make([]uint64, len(g.backends))
	for i, b := range g.backends {
		out[i] = b.served.Load()
	}
	return out
}

// SetSlow slows a share of the requests (0 to 1; every 1/share-th, evenly
// spread) by a factor (>= 1): each byte of a slowed response reaches the
// client at factor × the time the engine took to send it, measured from the
// request's arrival at the gateway. TTFT, every gap between chunks and E2E
// are stretched by the factor from the engine's own timing, as a slower
// build of the same engine would give them. SetSlow(0, 1) turns it off; it
// applies to requests that arrive after it.
func (g *Gateway) SetSlow(share, factor float64) error {
	switch {
	case !(share >= 0 && share <= 1):
		return fmt.Errorf("gateway: slow share: got %v, want a share between 0 and 1", share)
	case !(factor >= 1) || math.IsInf(factor, 0):
		return fmt.Errorf("gateway: slow factor: got %v, want a finite factor >= 1", factor)
	}
	if share == 0 || factor == 1 {
		g.slow.Store(nil)
		return nil
	}
	g.slow.Store(&slowdown{share: share, factor: factor})
	return nil
}

// slowed returns the factor of the request numbered n (from 0), 0 when it is not slowed: the
// request whose count crosses a multiple of 1/share.
func (g *Gateway) slowed(n uint64) float64 {
	s := g.slow.Load()
	if s == nil || math.Floor(float64(n+1)*s.share) == math.Floor(float64(n)*s.share) {
		return 0
	}
	return s.factor
}

// ServeHTTP picks a backend by the policy and proxies the request to it.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	factor := g.slowed(g.requests.Add(1) - 1)
	i, sticky := g.pick(r)
	if g.policy == CookieAffinity && !sticky {
		http.SetCookie(w, &http.Cookie{Name: g.cookie, Value: strconv.Itoa(i), Path: "/", HttpOnly: true})
	}
	w.Header().Set(BackendHeader, strconv.Itoa(i))
	b := g.backends[i]
	b.served.Add(1)
	// Read the whole request before proxying it. Streamed through, the
	// transport reads the incoming body once more after the last byte (to
	// check its length) while the backend's answer already flows back; once
	// this server has flushed that answer's headers, an HTTP/1 server may
	// close the incoming body, the read fails, the transport drops the
	// backend connection and the client's stream is cut mid-answer. Seen
	// here as "use of closed network connection" on about one run in two of
	// TestConversationAffinity under the race detector.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		http.Error(w, fmt.Sprintf("gateway: reading the request: %v", err), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength, r.TransferEncoding = int64(len(body)), nil
	if factor == 0 {
		b.proxy.ServeHTTP(w, r)
		return
	}
	w.Header().Set(SlowedHeader, strconv.FormatFloat(factor, 'g', -1, 64))
	sw := newSlowWriter(w, start, factor)
	b.proxy.ServeHTTP(sw, r)
	sw.close()
}

// slowWriter delays each write of a response to start + factor × its arrival
// time since start. Write only stamps and queues the bytes, so the proxy keeps
// reading the engine at the engine's pace and the arrival times stay the
// engine's; a goroutine delivers them, flushing each.
type slowWriter struct {
	w      http.ResponseWriter
	start  time.Time
	factor float64
	chunks chan slowChunk
	done   chan struct{}
	once   sync.Once
}

type slowChunk struct {
	at time.Time
	b  []byte
}

func newSlowWriter(w http.ResponseWriter, start time.Time, factor float64) *slowWriter {
	sw := &slowWriter{w: w, start: start, factor: factor, chunks: make(chan slowChunk, 4096), done: make(chan struct{})}
	go sw.deliver()
	return sw
}

func (sw *slowWriter) Header() http.Header { return sw.w.Header() }

// WriteHeader passes the status through at once: headers are not the engine's work.
func (sw *slowWriter) WriteHeader(code int) {
	sw.w.WriteHeader(code)
	if f, ok := sw.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (sw *slowWriter) Write(b []byte) (int, error) {
	sw.chunks <- slowChunk{at: time.Now(), b: bytes.Clone(b)}
	return len(b), nil
}

// Flush is a no-op: every chunk is flushed when it is delivered.
func (sw *slowWriter) Flush() {}

func (sw *slowWriter) deliver() {
	defer close(sw.done)
	flusher, _ := sw.w.(http.Flusher)
	for c := range sw.chunks {
		due := sw.start.Add(time.Duration(sw.factor * float64(c.at.Sub(sw.start))))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		if _, err := sw.w.Write(c.b); err != nil {
			continue // the client left; drain the rest
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// close waits until every queued byte is delivered.
func (sw *slowWriter) close() {
	sw.once.Do(func() { close(sw.chunks) })
	<-sw.done
}

// pick returns the backend's index, and whether the request named it (a valid affinity cookie).
func (g *Gateway) pick(r *http.Request) (int, bool) {
	switch g.policy {
	case CookieAffinity:
		if c, err := r.Cookie(g.cookie); err == nil {
			if i, err := strconv.Atoi(c.Value); err == nil && i >= 0 && i < len(g.backends) {
				return i, true
			}
		}
	case HeaderAffinity:
		if v := r.Header.Get(g.header); v != "" {
			h := fnv.New64a()
			h.Write([]byte(v))
			return int(h.Sum64() % uint64(len(g.backends))), true
		}
	}
	return int((g.next.Add(1) - 1) % uint64(len(g.backends))), false
}

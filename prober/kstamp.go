package prober

// This file holds kernel receive timestamps: the arrival times a probe's
// chunks get when the probe's connection reads through recvmsg with
// SO_TIMESTAMPING (kstamp_linux.go), so that neither the prober's own
// scheduling nor a busy host moves TTFT or ITL. Elsewhere, or when the
// socket refuses the option, probes keep the user-space stamps of
// stampReader.

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// StampSource says where a probe's arrival stamps came from: the `source`
// label of slaprobe_probe_timestamps_total, and a column of /probes.
type StampSource string

const (
	// StampKernel: every chunk's arrival is the time the kernel's network
	// stack took the segment that completed it (SO_TIMESTAMPING,
	// SOF_TIMESTAMPING_RX_SOFTWARE).
	StampKernel StampSource = "kernel"
	// StampUser: the time the reading goroutine got the bytes back from
	// its read (the stamps of every probe before kernel timestamps, and of
	// HTTP/2, non-Linux and refused sockets).
	StampUser StampSource = "user"
)

// StampSources lists every source, so counters can be initialised.
var StampSources = []StampSource{StampKernel, StampUser}

// DialKernelStamps dials like net.Dialer (30 s timeout, 30 s keep-alive,
// as http.DefaultTransport) and, where the platform supports it, turns on
// kernel receive timestamps on the TCP connection and wraps it so every
// read carries the arrival time of the bytes it returns. A socket that
// refuses the option is returned as it is: its probes fall back to
// user-space stamps. Give it to the probe's transport as its DialContext
// (prometheus/common's WithDialContextFunc): TLS and the HTTP layer then
// sit on top of the timestamped connection.
func DialKernelStamps(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := kstampDialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return withKernelStamps(c), nil
}

var kstampDialer = &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}

// kstampShared is the part of a timestamped connection the prober reads:
// the kernel arrival (CLOCK_REALTIME, ns) of the last read that returned
// bytes, and of the first such read since mark. Reads happen on the
// goroutine that reads the body (HTTP/1.1) but the response headers are
// read by the transport's own goroutine, hence the atomics.
type kstampShared struct {
	last  atomic.Int64 // 0: the last read carried no stamp
	first atomic.Int64 // first stamped read since mark; 0: none yet
	reads atomic.Int64 // reads that returned bytes
}

func (s *kstampShared) stamped(rt int64) {
	s.last.Store(rt)
	s.reads.Add(1)
	if rt != 0 && s.first.Load() == 0 {
		s.first.Store(rt)
	}
}

// The open timestamped connections, by their address pair: the transport
// (and conntrack, TLS) wrap the connection it dials, so a probe finds its
// own from the one httptrace's GotConn gives it.
var kstampConns sync.Map // connKey → *kstampShared

type connKey struct{ local, remote string }

func keyOf(c net.Conn) (connKey, bool) {
	l, r := c.LocalAddr(), c.RemoteAddr()
	if l == nil || r == nil {
		return connKey{}, false
	}
	return connKey{l.String(), r.String()}, true
}

// kernelStampsOf returns the timestamps of the connection a request got
// (GotConnInfo.Conn: a *tls.Conn over it, or the dialled connection as
// wrapped), nil when it was not dialled by DialKernelStamps with
// timestamps on.
func kernelStampsOf(c net.Conn) *kstampShared {
	if c == nil {
		return nil
	}
	if t, ok := c.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
		c = t.NetConn()
	}
	k, ok := keyOf(c)
	if !ok {
		return nil
	}
	v, ok := kstampConns.Load(k)
	if !ok {
		return nil
	}
	return v.(*kstampShared)
}

// kstampRef is a probe's view of its connection's kernel stamps, kept in
// the stampReader. The zero value is the user-space path.
type kstampRef struct {
	s      *kstampShared
	used   int // body reads stamped by the kernel
	missed int // body reads that got no kernel stamp (user stamp kept)
}

// stamp returns the kernel arrival of the bytes the body read that just
// returned delivered, on the monotonic timeline of now (the user stamp
// taken right after that read), or now when there is none. It is never
// later than now: a stamp that converts to after now is the conversion's
// error and is clamped.
func (k *kstampRef) stamp(now time.Time) time.Time {
	rt := k.s.last.Load()
	if rt == 0 {
		k.missed++
		return now
	}
	t, ok := realtimeToMono(rt, now)
	if !ok {
		k.missed++
		return now
	}
	k.used++
	return t
}

// source is the probe's stamp source: kernel only when every body read
// that delivered bytes carried a kernel stamp.
func (k *kstampRef) source() StampSource {
	if k.s != nil && k.used > 0 && k.missed == 0 {
		return StampKernel
	}
	return StampUser
}

// SetUserStamps makes probes stamp arrivals in user space even where kernel
// timestamps are on (on: true), or lets them use the kernel's (false, the
// default).
func (p *Prober) SetUserStamps(on bool) { p.userStamps.Store(on) }

// markRequest starts a request on the connection: firstSince then reports
// the first stamped read after it (the response's first byte).
func (s *kstampShared) markRequest() {
	if s != nil {
		s.first.Store(0)
	}
}

// firstSince is the kernel arrival of the first bytes read since
// markRequest, on the timeline of now.
func (s *kstampShared) firstSince(now time.Time) (time.Time, bool) {
	if s == nil {
		return time.Time{}, false
	}
	rt := s.first.Load()
	if rt == 0 {
		return time.Time{}, false
	}
	return realtimeToMono(rt, now)
}

// clockPair ties CLOCK_REALTIME (the kernel's stamps) to the monotonic
// reading of time.Now: rt was read between two time.Now calls width
// apart, mono is their midpoint. A kernel stamp rt' is then at
// mono + (rt' − rt), within width/2 (plus whatever the wall clock was
// stepped or slewed differently since; the pair is renewed every
// clockPairMaxAge).
type clockPair struct {
	mono  time.Time
	rt    int64
	width time.Duration
}

const (
	clockPairSamples = 8
	clockPairMaxAge  = time.Second
)

var (
	pairNow  atomic.Pointer[clockPair]
	pairMu   sync.Mutex
	pairTest func() // tests: called at each renewal
)

// realtimeToMono converts a CLOCK_REALTIME stamp (ns) to the monotonic
// timeline, now being a time.Now taken after the stamp. ok is false for a
// stamp that cannot be right (later than now by more than the conversion's
// error, or a minute older).
func realtimeToMono(rt int64, now time.Time) (time.Time, bool) {
	p := pairNow.Load()
	if p == nil || now.Sub(p.mono) > clockPairMaxAge || now.Before(p.mono) {
		p = renewClockPair()
		if p == nil {
			return time.Time{}, false
		}
	}
	t := p.mono.Add(time.Duration(rt - p.rt))
	if t.After(now) {
		if t.Sub(now) > p.width+time.Millisecond {
			return time.Time{}, false
		}
		t = now // the conversion's error: an arrival is never after the read returned
	}
	if now.Sub(t) > time.Minute {
		return time.Time{}, false
	}
	return t, true
}

func renewClockPair() *clockPair {
	pairMu.Lock()
	defer pairMu.Unlock()
	if p := pairNow.Load(); p != nil && time.Since(p.mono) <= clockPairMaxAge/2 {
		return p // renewed meanwhile
	}
	p, ok := sampleClockPair(clockPairSamples)
	if !ok {
		return nil
	}
	pairNow.Store(p)
	if pairTest != nil {
		pairTest()
	}
	return p
}

// sampleClockPair takes n pairs and keeps the tightest.
func sampleClockPair(n int) (*clockPair, bool) {
	var best *clockPair
	for range n {
		t1 := time.Now()
		rt, ok := realtimeNow()
		t2 := time.Now()
		if !ok {
			return nil, false
		}
		w := t2.Sub(t1)
		if best == nil || w < best.width {
			best = &clockPair{mono: t1.Add(w / 2), rt: rt, width: w}
		}
	}
	return best, true
}

// kstampSlot carries the connection a request got, from httptrace's
// GotConn to the reading of its response.
type kstampSlot struct {
	mu sync.Mutex
	s  *kstampShared
}

// got records the request's connection, and marks the request's start on
// it: the response's first byte is the first read after it.
func (k *kstampSlot) got(c net.Conn) {
	s := kernelStampsOf(c)
	s.markRequest()
	k.mu.Lock()
	k.s = s // a retry on a fresh connection replaces it
	k.mu.Unlock()
}

// attach returns the stamps the stream of a response of HTTP major version
// major reads, and sets res.FirstByte to the kernel arrival of the
// response's first byte; the zero kstampRef where they cannot be used
// (attachKernelStamps).
func (k *kstampSlot) attach(p *Prober, major int, res *Result) kstampRef {
	k.mu.Lock()
	s := k.s
	k.mu.Unlock()
	if s == nil || p.userStamps.Load() || major != 1 {
		return kstampRef{}
	}
	if _, ok := p.clock.(SystemClock); !ok {
		return kstampRef{}
	}
	now := p.clock.Now()
	if fb, ok := s.firstSince(now); ok && !res.FirstByte.IsZero() {
		res.FirstByte = fb
	}
	return kstampRef{s: s}
}

// StampSource returns where the result's arrival stamps came from; a result
// whose stream was never read (a failed request) is user.
func (r *Result) StampSource() StampSource {
	if r.Stamps == StampKernel {
		return StampKernel
	}
	return StampUser
}

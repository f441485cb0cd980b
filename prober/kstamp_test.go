package prober_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	promcfg "github.com/prometheus/common/config"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/prober"
)

// kstampSim is a simulated engine on loopback (plain or TLS, HTTP/1.1 or
// HTTP/2) and a transport whose connections carry kernel receive stamps.
type kstampSim struct {
	e      *vllmsim.Engine
	tr     *http.Transport
	target prober.Target
}

func startKstampSim(t testing.TB, tlsOn, h2 bool, mutate func(*vllmsim.Config)) *kstampSim {
	t.Helper()
	cfg := vllmsim.DefaultConfig()
	cfg.EOSMeanTokens = 0
	if mutate != nil {
		mutate(&cfg)
	}
	e, err := vllmsim.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(e.Handler())
	tr := &http.Transport{DialContext: prober.DialKernelStamps, MaxIdleConnsPerHost: 16, DisableCompression: true}
	if tlsOn {
		srv.EnableHTTP2 = h2
		srv.StartTLS()
		tr.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
		tr.ForceAttemptHTTP2 = h2
		if !h2 {
			tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
		}
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	t.Cleanup(e.Close)
	t.Cleanup(tr.CloseIdleConnections)
	return &kstampSim{e: e, tr: tr,
		target: prober.Target{Name: "sim", API: prober.APIChat, BaseURL: srv.URL, Model: cfg.ModelName, Client: &http.Client{Transport: tr}}}
}

// delayBody holds back the first read of a generation response's body by
// delay: the reading goroutine is late, as on a busy host, while the
// server's chunks pile up in the socket.
type delayBody struct {
	io.ReadCloser
	delay time.Duration
	once  sync.Once
	woke  *time.Time // when the first read went ahead
}

func (b *delayBody) Read(p []byte) (int, error) {
	b.once.Do(func() {
		time.Sleep(b.delay)
		*b.woke = time.Now()
	})
	return b.ReadCloser.Read(p)
}

type delayTransport struct {
	base  http.RoundTripper
	delay time.Duration
	woke  *time.Time
}

func (d delayTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := d.base.RoundTrip(req)
	if err == nil && d.delay > 0 && isGeneration(req) {
		resp.Body = &delayBody{ReadCloser: resp.Body, delay: d.delay, woke: d.woke}
	}
	return resp, err
}

// kstampRun sends one probe with the reader held back by delay and returns
// it, the engine's trace of it and when the held-back read went ahead.
func kstampRun(t *testing.T, p *prober.Prober, sim *kstampSim, prep *prober.Prepared, delay time.Duration) (prober.Result, vllmsim.Trace, time.Time) {
	t.Helper()
	var woke time.Time
	target := sim.target
	target.Client = &http.Client{Transport: delayTransport{base: sim.tr, delay: delay, woke: &woke}}
	res := p.Run(context.Background(), target, prep)
	if res.Kind != prober.KindSuccess {
		t.Fatalf("probe: %s/%s: %v", res.Kind, res.Reason, res.Err)
	}
	return res, accTrace(t, sim.e, &res), woke
}

// TestKernelStampsIgnoreReaderDelay is the proof that the kernel's stamps
// are what a probe uses. The engine writes a chunk every 300 ms; the
// goroutine that reads the body is held back 200 ms before its first read,
// so the first token's chunk waits in the socket for over 100 ms. With
// kernel stamps the first token's arrival stays within a few ms of the
// engine's write (and TTFT with it); with user-space stamps it is taken
// after the held-back read, so TTFT grows by the wait. Plain HTTP/1.1
// (chunked) and TLS.
func TestKernelStampsIgnoreReaderDelay(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("kernel receive timestamps are read on Linux only")
	}
	const delay = 200 * time.Millisecond
	bound := 5 * time.Millisecond
	if accRaceEnabled() {
		bound = 15 * time.Millisecond
	}
	slow := func(c *vllmsim.Config) {
		c.DecodeBase, c.DecodePerSeq, c.DecodePerKVToken = 300*time.Millisecond, 0, 0
	}
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"http", false}, {"tls", true}} {
		t.Run(tc.name, func(t *testing.T) {
			sim := startKstampSim(t, tc.tls, false, slow)
			p := prober.New(nil, prober.SystemClock{})
			prep := accPrepare(t, p, sim.target, accScenario(64, 3))
			for _, user := range []bool{false, true} {
				p.SetUserStamps(user)
				res, tr, woke := kstampRun(t, p, sim, prep, delay)
				waited := woke.Sub(tr.FirstTokenWritten)
				errFirst := res.FirstToken.Sub(tr.FirstTokenWritten)
				t.Logf("user stamps %v: the first token waited %v in the socket; its arrival is %v after its write; TTFT %v",
					user, waited, errFirst, res.TTFT())
				if waited < 50*time.Millisecond {
					t.Fatalf("the first token waited only %v for the reader: the engine was too slow for the test to mean anything", waited)
				}
				if !user {
					if res.Stamps != prober.StampKernel {
						t.Fatalf("stamp source %q, want kernel", res.Stamps)
					}
					if absDur(errFirst) > bound {
						t.Errorf("kernel stamps: the first token's arrival is %v from its write (bound %v): it moved with the reader", errFirst, bound)
					}
					continue
				}
				if res.Stamps != prober.StampUser {
					t.Fatalf("stamp source %q, want user", res.Stamps)
				}
				if res.FirstToken.Before(woke) {
					t.Errorf("user stamps: the first token is stamped %v before the read that got it", woke.Sub(res.FirstToken))
				}
			}
		})
	}
}

// recordingClock is the real clock, remembering what it returned.
type recordingClock struct {
	mu   sync.Mutex
	seen map[time.Time]bool
}

func (c *recordingClock) Now() time.Time {
	now := time.Now()
	c.mu.Lock()
	c.seen[now] = true
	c.mu.Unlock()
	return now
}

// TestKernelStampsFallback: where kernel stamps are not used, the figures
// are today's user-space ones, the very values the prober's clock returned,
// and the source says user: stamps turned off, a clock that is not the
// system's (tests' fake clocks), an HTTP/2 connection (many streams on one
// connection) and a transport that does not dial with DialKernelStamps.
func TestKernelStampsFallback(t *testing.T) {
	for _, tc := range []struct {
		name           string
		tls, h2, plain bool
		userStamps     bool
		recorded       bool
		wantStamps     prober.StampSource
		wantKernelOnOS bool
	}{
		{name: "kernel", wantKernelOnOS: true},
		{name: "turned off", userStamps: true},
		{name: "other clock", recorded: true},
		{name: "http2", tls: true, h2: true},
		{name: "plain dialer", plain: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := startKstampSim(t, tc.tls, tc.h2, nil)
			if tc.plain {
				sim.tr.DialContext = nil
			}
			clk := &recordingClock{seen: map[time.Time]bool{}}
			p := prober.New(nil, prober.SystemClock{})
			if tc.recorded {
				p = prober.New(nil, clk)
			}
			p.SetUserStamps(tc.userStamps)
			prep := accPrepare(t, p, sim.target, accScenario(64, 20))
			res := p.Run(context.Background(), sim.target, prep)
			if res.Kind != prober.KindSuccess {
				t.Fatalf("probe: %s/%s: %v", res.Kind, res.Reason, res.Err)
			}
			want := prober.StampUser
			if tc.wantKernelOnOS && runtime.GOOS == "linux" {
				want = prober.StampKernel
			}
			if res.Stamps != want {
				t.Errorf("stamp source %q, want %q", res.Stamps, want)
			}
			if tc.recorded {
				for name, at := range map[string]time.Time{"FirstToken": res.FirstToken, "LastToken": res.LastToken, "FirstByte": res.FirstByte} {
					clk.mu.Lock()
					ok := clk.seen[at]
					clk.mu.Unlock()
					if !ok {
						t.Errorf("%s %v is not a time the prober's clock returned: not a user-space stamp", name, at)
					}
				}
			}
		})
	}
}

// TestKernelStampsITL: with kernel stamps, plain and through TLS, the
// probe's ITL is the engine's to within 200 µs.
func TestKernelStampsITL(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("kernel receive timestamps are read on Linux only")
	}
	for _, tlsOn := range []bool{false, true} {
		sim := startKstampSim(t, tlsOn, false, nil)
		p := prober.New(nil, prober.SystemClock{})
		prep := accPrepare(t, p, sim.target, accScenario(64, 40))
		res, tr, _ := kstampRun(t, p, sim, prep, 0)
		if res.Stamps != prober.StampKernel {
			t.Fatalf("tls=%v: stamp source %q, want kernel", tlsOn, res.Stamps)
		}
		n := tr.CompletionTokens - tr.Chunks[0].Tokens
		truth := tr.LastTokenWritten.Sub(tr.FirstTokenWritten) / time.Duration(n)
		t.Logf("tls=%v: ITL %v, engine %v", tlsOn, res.ITL(), truth)
		if d := absDur(res.ITL() - truth); d > 200*time.Microsecond {
			t.Errorf("tls=%v: ITL %v, engine's %v", tlsOn, res.ITL(), truth)
		}
	}
}

// TestKernelStampsThroughConfigClient: a target's client as the config
// builds it (prometheus/common, its conntrack wrapper around the dialled
// connection) finds the connection's stamps.
func TestKernelStampsThroughConfigClient(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("kernel receive timestamps are read on Linux only")
	}
	sim := startKstampSim(t, false, false, nil)
	client, err := promcfg.NewClientFromConfig(promcfg.HTTPClientConfig{}, "kstamp_test", promcfg.WithDialContextFunc(prober.DialKernelStamps))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.CloseIdleConnections)
	target := sim.target
	target.Client = client
	p := prober.New(nil, prober.SystemClock{})
	prep := accPrepare(t, p, target, accScenario(64, 10))
	res := p.Run(context.Background(), target, prep)
	if res.Kind != prober.KindSuccess {
		t.Fatalf("probe: %s/%s: %v", res.Kind, res.Reason, res.Err)
	}
	if res.Stamps != prober.StampKernel {
		t.Errorf("stamp source %q through the config's client, want kernel", res.Stamps)
	}
}

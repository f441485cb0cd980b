package tracing

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestTimeBudget: the bucket starts full, admits while anything is left,
// goes into debt by what an admitted export took, and refills at its share
// up to the burst.
func TestTimeBudget(t *testing.T) {
	type step struct {
		advance time.Duration // the clock moves first
		work    time.Duration // then, if admitted, an export takes this long
		admit   bool
		left    time.Duration // after the step
	}
	for _, c := range []struct {
		name         string
		share        float64
		burst        time.Duration
		steps        []step
		wantRefusals int
	}{
		{"spends its burst, then refuses until repaid", 0.25, 500 * time.Millisecond, []step{
			{0, 300 * time.Millisecond, true, 200 * time.Millisecond},  // a full bucket earns nothing while it works
			{0, 400 * time.Millisecond, true, -100 * time.Millisecond}, // admitted with something left: ends in debt
			{0, 0, false, -100 * time.Millisecond},
			{396 * time.Millisecond, 0, false, -time.Millisecond},
			{8 * time.Millisecond, 10 * time.Millisecond, true, -6500 * time.Microsecond},
		}, 2},
		{"refills no further than the burst", 0.5, 100 * time.Millisecond, []step{
			{time.Hour, 0, true, 100 * time.Millisecond},
			{time.Hour, 200 * time.Millisecond, true, -100 * time.Millisecond},
			{0, 0, false, -100 * time.Millisecond},
			{202 * time.Millisecond, 0, true, time.Millisecond},
		}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			now := time.Unix(1_700_000_000, 0)
			b := newTimeBudget(c.share, c.burst, func() time.Time { return now })
			refusals := 0
			for i, s := range c.steps {
				now = now.Add(s.advance)
				start, ok := b.take()
				if ok != s.admit {
					t.Fatalf("step %d: admitted %v, want %v (left %v)", i, ok, s.admit, b.left)
				}
				if !ok {
					refusals++
				} else {
					now = now.Add(s.work)
					b.charge(start)
				}
				if b.left != s.left {
					t.Errorf("step %d: %v left, want %v", i, b.left, s.left)
				}
			}
			if refusals != c.wantRefusals {
				t.Errorf("%d refusals, want %d", refusals, c.wantRefusals)
			}
		})
	}
}

// TestDecodeBudgetShare: the receivers' share follows GOMAXPROCS.
func TestDecodeBudgetShare(t *testing.T) {
	old := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(old)
	for _, procs := range []int{1, 2, 16} {
		runtime.GOMAXPROCS(procs)
		if b, want := newDecodeBudget(), decodeShare*float64(procs); b.share != want || b.burst != decodeBurst {
			t.Errorf("GOMAXPROCS %d: share %v, burst %v; want %v, %v", procs, b.share, b.burst, want, decodeBurst)
		}
	}
}

// countingBody counts the bytes read of a request body.
type countingBody struct {
	r    *bytes.Reader
	read int
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += n
	return n, err
}

func (b *countingBody) Close() error { return nil }

// TestReceiversRefuseOverBudget: once the receivers' time budget is spent,
// both refuse an export at once, retryably, without reading its body or
// taking a slot, and count it; when the budget has refilled they take it.
func TestReceiversRefuseOverBudget(t *testing.T) {
	j := NewJoiner(time.Minute)
	r := NewReceiver(j, nil, nil)
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	r.budget = newTimeBudget(0.5, 100*time.Millisecond, clock)
	// grpc-go's options hold the budget given to NewReceiver: a new server.
	r.grpc = grpc.NewServer(append(grpcOptions(r.grpcSlots, r.budget, r.refused, r.grpcAuthTap), grpc.ForceServerCodecV2(newRawCodec()))...)
	registerTraceService(r.grpc, r.exportGRPC)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.ServeGRPC(ln) }()
	t.Cleanup(r.Close)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := coltracepb.NewTraceServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, err := proto.Marshal(export(trace1, SpanLLMRequest, vllmAttrs()))
	if err != nil {
		t.Fatal(err)
	}
	postHTTP := func() (*httptest.ResponseRecorder, *countingBody) {
		b := &countingBody{r: bytes.NewReader(body)}
		req := httptest.NewRequest(http.MethodPost, "/v1/traces", b)
		req.Header.Set("Content-Type", "application/x-protobuf")
		w := httptest.NewRecorder()
		r.HTTPHandler().ServeHTTP(w, req)
		return w, b
	}
	refused := func(protocol string) float64 {
		return testutil.ToFloat64(r.refused.WithLabelValues(protocol, RefusedBudget))
	}

	// Spent: an export that took 300 ms leaves 200 ms of debt.
	start, _ := r.budget.take()
	now = now.Add(300 * time.Millisecond)
	r.budget.charge(start)

	w, b := postHTTP()
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != retryAfter || b.read != 0 {
		t.Errorf("HTTP export over budget: %d %q, Retry-After %q, %d bytes of the body read; want 503 with Retry-After %s, none read",
			w.Code, w.Body.String(), w.Header().Get("Retry-After"), b.read, retryAfter)
	}
	if _, err := client.Export(ctx, export(trace1, SpanLLMRequest, vllmAttrs())); status.Code(err) != codes.Unavailable {
		t.Errorf("gRPC export over budget: %v; want UNAVAILABLE", err)
	}
	if h, g := refused(receiverHTTP), refused(receiverGRPC); h != 1 || g != 1 {
		t.Errorf("decode_budget refusals: HTTP %v, gRPC %v; want 1 each", h, g)
	}
	if n := spanCounts(t, j)[SpanOther]; n != 0 {
		t.Errorf("a refused export reached the joiner: %v spans", n)
	}
	if len(r.httpSlots)+len(r.grpcSlots) != 0 {
		t.Errorf("a refused export holds a slot")
	}

	// Repaid after 400 ms at 0.5 s a second, and more: both go through.
	now = now.Add(500 * time.Millisecond)
	if w, b := postHTTP(); w.Code != http.StatusOK || b.read != len(body) {
		t.Errorf("HTTP export within budget: %d %q, %d of %d bytes read; want 200", w.Code, w.Body.String(), b.read, len(body))
	}
	if _, err := client.Export(ctx, export(trace1, SpanLLMRequest, vllmAttrs())); err != nil {
		t.Errorf("gRPC export within budget: %v", err)
	}
	if n := spanCounts(t, j)[SpanOther]; n != 2 {
		t.Errorf("%v spans reached the joiner, want 2", n)
	}
	if h, g := refused(receiverHTTP), refused(receiverGRPC); h != 1 || g != 1 {
		t.Errorf("decode_budget refusals: HTTP %v, gRPC %v; want still 1 each", h, g)
	}
}

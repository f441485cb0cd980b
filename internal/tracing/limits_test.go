package tracing

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// richExport has two resources, scopes, spans with every field the walkers
// read, attributes they skip (not gen_ai.*, arrays) and parts they skip
// (resource, scope, events, links, status).
func richExport() *coltracepb.ExportTraceServiceRequest {
	str := func(k, v string) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
	}
	span := func(i byte) *tracepb.Span {
		return &tracepb.Span{
			TraceId: bytes.Repeat([]byte{i}, 16), SpanId: bytes.Repeat([]byte{i + 1}, 8), ParentSpanId: bytes.Repeat([]byte{i + 2}, 8),
			TraceState: "k=v", Flags: 0x301, Name: "llm_request", Kind: tracepb.Span_SPAN_KIND_SERVER,
			StartTimeUnixNano: 1_700_000_000_000_000_000 + uint64(i), EndTimeUnixNano: 1_700_000_000_500_000_000,
			Attributes: append(vllmAttrs(),
				str("http.method", "POST"),
				&commonpb.KeyValue{Key: "gen_ai.bool", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}},
				&commonpb.KeyValue{Key: "gen_ai.list", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{
					ArrayValue: &commonpb.ArrayValue{Values: []*commonpb.AnyValue{{Value: &commonpb.AnyValue_IntValue{IntValue: 1}}}}}}},
				&commonpb.KeyValue{Key: "gen_ai.negative", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: -3}}},
			),
			Events: []*tracepb.Span_Event{{Name: "e", TimeUnixNano: 3}},
			Links:  []*tracepb.Span_Link{{TraceId: bytes.Repeat([]byte{9}, 16), SpanId: bytes.Repeat([]byte{8}, 8)}},
			Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK},
		}
	}
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{
		{Resource: nil, ScopeSpans: []*tracepb.ScopeSpans{
			{Scope: &commonpb.InstrumentationScope{Name: "vllm.llm_engine"}, Spans: []*tracepb.Span{span(1), span(2)}},
			{Spans: []*tracepb.Span{span(3)}},
		}},
		{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{span(4)}}}},
	}}
}

// wantSpans is what a walker hands on of req: every span, its attributes
// cut to gen_ai.*, arrays empty, and nothing of events, links or status.
func wantSpans(req *coltracepb.ExportTraceServiceRequest) []*tracepb.Span {
	var out []*tracepb.Span
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c := proto.Clone(s).(*tracepb.Span)
				c.Events, c.Links, c.Status, c.Attributes = nil, nil, nil, nil
				for _, kv := range s.GetAttributes() {
					if !strings.HasPrefix(kv.GetKey(), "gen_ai.") {
						continue
					}
					kv = proto.Clone(kv).(*commonpb.KeyValue)
					if _, ok := kv.GetValue().GetValue().(*commonpb.AnyValue_ArrayValue); ok {
						kv.Value = &commonpb.AnyValue{}
					}
					c.Attributes = append(c.Attributes, kv)
				}
				out = append(out, c)
			}
		}
	}
	return out
}

// TestWalkersReadWhatProtoReads: the one-pass walkers hand on, span by
// span, what proto.Unmarshal and protojson read of the same export.
func TestWalkersReadWhatProtoReads(t *testing.T) {
	req := richExport()
	pb, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	js, err := protojson.Marshal(req) // base64 ids, enum names, 64-bit integers as strings
	if err != nil {
		t.Fatal(err)
	}
	want := wantSpans(req)
	for _, tc := range []struct {
		name string
		walk func([]byte, func(*tracepb.Span)) error
		body []byte
	}{
		{"protobuf", walkOTLPProto, pb},
		{"protobuf JSON mapping", walkOTLPJSON, js},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []*tracepb.Span
			if err := tc.walk(tc.body, func(s *tracepb.Span) { got = append(got, s) }); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d spans, want %d", len(got), len(want))
			}
			for i := range want {
				if !proto.Equal(got[i], want[i]) {
					t.Errorf("span %d:\n\tgot  %v\n\twant %v", i, got[i], want[i])
				}
			}
		})
	}
}

// TestWalkersRefuseBadExports: what proto.Unmarshal or protojson refuse,
// the walkers refuse too, naming what is wrong.
func TestWalkersRefuseBadExports(t *testing.T) {
	span := func(fields ...byte) []byte { // an export of one span with these fields
		s := append([]byte{0x12, byte(len(fields))}, fields...)
		ss := append([]byte{0x12, byte(len(s))}, s...)
		return append([]byte{0x0a, byte(len(ss))}, ss...)
	}
	for _, tc := range []struct {
		name string
		walk func([]byte, func(*tracepb.Span)) error
		body string
		want string
	}{
		{"length past the end", walkOTLPProto, "\x0a\xff\xff\xff\xff\x0f\x01", "field 1"},
		{"resource_spans as a varint", walkOTLPProto, "\x08\x01", "wire type"},
		{"span name as a varint", walkOTLPProto, string(span(0x28, 0x01)), "wire type"},
		{"span name not UTF-8", walkOTLPProto, string(span(0x2a, 0x02, 0xff, 0xfe)), "UTF-8"},
		{"start time as a varint", walkOTLPProto, string(span(0x38, 0x01)), "wire type"},
		{"cut JSON", walkOTLPJSON, `{"resourceSpans": [nope`, "invalid character"},
		{"resourceSpans a number", walkOTLPJSON, `{"resourceSpans": 7}`, "expected an array"},
		{"an array at the top", walkOTLPJSON, `[]`, "expected an object"},
		{"spans an object", walkOTLPJSON, `{"resourceSpans":[{"scopeSpans":[{"spans":{}}]}]}`, "expected an array"},
		{"trace id neither hex nor base64", walkOTLPJSON, `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"}]}]}]}`, "traceId"},
		{"time not a number", walkOTLPJSON, `{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":"soon"}]}]}]}`, "startTimeUnixNano"},
		{"kind unknown", walkOTLPJSON, `{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":"SPAN_KIND_BORING"}]}]}]}`, "kind"},
		{"data after the object", walkOTLPJSON, `{} {}`, "after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.walk([]byte(tc.body), func(*tracepb.Span) {})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// Unknown keys are skipped, as OTLP/JSON asks.
	n := 0
	if err := walkOTLPJSON([]byte(`{"resourceSpans":[{"future":{"a":[1,{"b":null}]},"scopeSpans":[{"spans":[{"name":"x","new":[]}]}]}]}`),
		func(*tracepb.Span) { n++ }); err != nil || n != 1 {
		t.Errorf("unknown keys: %d spans, %v; want 1, nil", n, err)
	}
}

// liveGrowth runs f and reports how much more heap is live, at most, at
// the calls of the tick f gets (every 20000th is measured, after a
// collection) and after f returns, than before: what f holds, not its
// garbage.
func liveGrowth(f func(tick func())) uint64 {
	var ms runtime.MemStats
	live := func() uint64 {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	base := live()
	peak := base
	n := 0
	f(func() {
		if n++; n%20000 == 0 {
			peak = max(peak, live())
		}
	})
	return max(peak, live()) - base
}

// TestWalkersHoldLittleMoreThanTheBody: a 1 MiB export of empty spans
// (two bytes each) is half a million spans. Decoded whole, as
// proto.Unmarshal did, it is over a hundred MiB of Go structs; walked, it
// holds nothing but the span being handed on.
func TestWalkersHoldLittleMoreThanTheBody(t *testing.T) {
	const size = 1 << 20
	ss := bytes.Repeat([]byte{0x12, 0x00}, size/2-8) // ScopeSpans: empty spans
	rs := protoField(2, ss)                          // ResourceSpans: scope_spans
	body := protoField(1, rs)                        // ExportTraceServiceRequest: resource_spans
	spans := len(ss) / 2

	var whole coltracepb.ExportTraceServiceRequest
	decoded := liveGrowth(func(func()) {
		if err := proto.Unmarshal(body, &whole); err != nil {
			t.Fatal(err)
		}
	})
	if n := len(whole.GetResourceSpans()[0].GetScopeSpans()[0].GetSpans()); n != spans {
		t.Fatalf("proto.Unmarshal read %d spans, want %d", n, spans)
	}
	t.Logf("a %d-byte export of %d spans: proto.Unmarshal holds %.1f MiB", len(body), spans, float64(decoded)/(1<<20))
	if decoded < 20*size {
		t.Fatalf("proto.Unmarshal held %d bytes for a %d-byte body; the attack body is not one", decoded, len(body))
	}
	whole.Reset()

	n := 0
	walked := liveGrowth(func(tick func()) {
		if err := walkOTLPProto(body, func(*tracepb.Span) { n++; tick() }); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("walked: %d spans, live heap grew by at most %d bytes", n, walked)
	if n != spans {
		t.Errorf("walked %d spans, want %d", n, spans)
	}
	if walked > size/8 {
		t.Errorf("walking a %d-byte export held %d bytes more; want at most an eighth of the body", len(body), walked)
	}
}

// protoField is field 1 or 2 of wire type bytes holding b.
func protoField(num byte, b []byte) []byte {
	out := []byte{num<<3 | 2}
	for l := uint64(len(b)); ; l >>= 7 {
		if l < 0x80 {
			out = append(out, byte(l))
			break
		}
		out = append(out, byte(l)|0x80)
	}
	return append(out, b...)
}

// TestReceiverRefusesBeyondItsLimits: with maxConcurrentExports in
// progress, an HTTP export is answered 503 with Retry-After before its body
// is read and a gRPC one UNAVAILABLE; once they end, exports go through
// and every slot is free again. Too large and malformed exports are
// counted on both protocols.
func TestReceiverRefusesBeyondItsLimits(t *testing.T) {
	j := NewJoiner(time.Minute)
	r := NewReceiver(j, nil, nil)
	srv := httptest.NewServer(r.HTTPHandler())
	t.Cleanup(srv.Close)
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
	refused := func(protocol, reason string) float64 {
		return testutil.ToFloat64(r.refused.WithLabelValues(protocol, reason))
	}

	// Every slot taken.
	for range maxConcurrentExports {
		r.httpSlots <- struct{}{}
		r.grpcSlots <- struct{}{}
	}
	resp, out := post(t, srv.URL+"/v1/traces", http.MethodPost, "application/x-protobuf", "", body)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != retryAfter {
		t.Errorf("HTTP export with every slot taken: %d %q, Retry-After %q; want 503 with Retry-After %s", resp.StatusCode, out, resp.Header.Get("Retry-After"), retryAfter)
	}
	if _, err := client.Export(ctx, export(trace1, SpanLLMRequest, vllmAttrs())); status.Code(err) != codes.Unavailable {
		t.Errorf("gRPC export with every slot taken: %v; want UNAVAILABLE", err)
	}
	if got := refused(receiverHTTP, RefusedTooMany) + refused(receiverGRPC, RefusedTooMany); got != 2 {
		t.Errorf("too_many refusals %v, want 1 per protocol", got)
	}
	if n := spanCounts(t, j)[SpanOther]; n != 0 {
		t.Errorf("a refused export reached the joiner: %v spans", n)
	}

	// Slots free: both go through, and give their slot back.
	for range maxConcurrentExports {
		r.httpSlots.release()
		r.grpcSlots.release()
	}
	for range 2 * maxConcurrentExports {
		if resp, out := post(t, srv.URL+"/v1/traces", http.MethodPost, "application/x-protobuf", "", body); resp.StatusCode != http.StatusOK {
			t.Fatalf("HTTP export: %d %q, want 200", resp.StatusCode, out)
		}
		if _, err := client.Export(ctx, export(trace1, SpanLLMRequest, vllmAttrs())); err != nil {
			t.Fatalf("gRPC export: %v", err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); len(r.grpcSlots)+len(r.httpSlots) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d HTTP and %d gRPC slots still taken after the exports ended", len(r.httpSlots), len(r.grpcSlots))
		}
	}
	if n := spanCounts(t, j)[SpanOther]; n != 4*maxConcurrentExports {
		t.Errorf("%v spans reached the joiner, want %d", n, 4*maxConcurrentExports)
	}

	// Too large, and not an export, on gRPC (HTTP's are in TestReceiverHTTP).
	big := export(trace1, SpanLLMRequest, []*commonpb.KeyValue{{Key: "x", Value: &commonpb.AnyValue{
		Value: &commonpb.AnyValue_StringValue{StringValue: strings.Repeat("x", maxExportBytes)}}}})
	if _, err := client.Export(ctx, big); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("gRPC export over the limit: %v; want RESOURCE_EXHAUSTED", err)
	}
	bad := []byte("\x0a\xff\xff\xff\xff\x0f\x01")
	var reply []byte
	if err := conn.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", &bad, &reply, grpc.ForceCodec(bytesCodec{})); status.Code(err) != codes.InvalidArgument {
		t.Errorf("gRPC garbage: %v; want INVALID_ARGUMENT", err)
	}
	for _, c := range []struct {
		protocol, reason string
		want             float64
	}{
		{receiverGRPC, RefusedTooLarge, 1}, {receiverGRPC, RefusedBadRequest, 1}, {receiverGRPC, RefusedTooMany, 1},
		{receiverHTTP, RefusedTooMany, 1}, {receiverHTTP, RefusedTooLarge, 0}, {receiverHTTP, RefusedBadRequest, 0},
	} {
		if got := refused(c.protocol, c.reason); got != c.want {
			t.Errorf("slaprobe_otlp_exports_refused_total{protocol=%q,reason=%q} = %v, want %v", c.protocol, c.reason, got, c.want)
		}
	}
}

var trace1 = [16]byte{1}

// bytesCodec sends a []byte as the gRPC message as it is.
type bytesCodec struct{}

func (bytesCodec) Marshal(v any) ([]byte, error)   { return *(v.(*[]byte)), nil }
func (bytesCodec) Unmarshal(b []byte, v any) error { *(v.(*[]byte)) = b; return nil }
func (bytesCodec) Name() string                    { return "proto" }

// TestLimitListener: a listener limited to two connections accepts a third
// only once one of the two is closed.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := limitListener(inner, 2)
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	first := <-accepted
	<-accepted
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted while two were open")
	case <-time.After(300 * time.Millisecond):
	}
	first.Close()
	select {
	case <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the third connection was not accepted after one of two closed")
	}
}

package tracing

import (
	"context"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// One decode of each export, one span at a time. proto.Unmarshal (and
// protojson) build the whole ExportTraceServiceRequest first: an export of
// empty spans, two bytes each on the wire, is about 300 bytes of Go structs
// each, so a 1 MiB body holds 148 MiB (TestWalkersHoldLittleMoreThanTheBody)
// and a 4 MiB one 600 MiB. The walkers here
// (walkOTLPProto below, walkOTLPJSON in otlpjson.go) read the body once and
// hand each span to a callback as soon as it is read; nothing of a span is
// kept after its callback returns. What a span carries is what the joiner
// reads: ids, trace state, flags, name, kind, start and end, and the
// attributes under gen_ai.* (the first maxSpanAttributes of them). Resource,
// scope, events, links and status are skipped.

// maxSpanAttributes bounds the attributes kept of one span (vLLM's
// llm_request span has about 15, all under gen_ai.).
const maxSpanAttributes = 64

// keptAttribute reports whether an attribute of that key is read.
func keptAttribute(key string) bool { return strings.HasPrefix(key, "gen_ai.") }

// errWire is a protobuf export that cannot be read.
func errWire(what string, n int) error {
	return fmt.Errorf("%s: %w", what, protowire.ParseError(n))
}

// wireFields calls f for every field of the protobuf message b: its number
// and type, and its value (v for varint and fixed types, raw for bytes).
func wireFields(b []byte, f func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errWire("field tag", n)
		}
		b = b[n:]
		var (
			v   uint64
			raw []byte
		)
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var x uint32
			x, n = protowire.ConsumeFixed32(b)
			v = uint64(x)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			raw, n = protowire.ConsumeBytes(b)
		default: // groups: not in OTLP; skipped as proto.Unmarshal does
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return errWire(fmt.Sprintf("field %d", num), n)
		}
		b = b[n:]
		if err := f(num, typ, v, raw); err != nil {
			return err
		}
	}
	return nil
}

// wantType checks a known field's wire type.
func wantType(msg string, num protowire.Number, typ, want protowire.Type) error {
	if typ != want {
		return fmt.Errorf("%s field %d has wire type %d; expected %d", msg, num, typ, want)
	}
	return nil
}

func wireString(msg string, raw []byte) (string, error) {
	if !utf8.Valid(raw) {
		return "", fmt.Errorf("%s: string is not valid UTF-8", msg)
	}
	return string(raw), nil
}

// walkOTLPProto reads a protobuf ExportTraceServiceRequest and calls span
// for each span, in order. An error stops the walk: spans before it were
// handed on.
func walkOTLPProto(b []byte, span func(*tracepb.Span)) error {
	// ExportTraceServiceRequest: 1 resource_spans.
	return wireFields(b, func(num protowire.Number, typ protowire.Type, _ uint64, rs []byte) error {
		if num != 1 {
			return nil
		}
		if err := wantType("ExportTraceServiceRequest", num, typ, protowire.BytesType); err != nil {
			return err
		}
		// ResourceSpans: 2 scope_spans.
		return wireFields(rs, func(num protowire.Number, typ protowire.Type, _ uint64, ss []byte) error {
			if num != 2 {
				return nil
			}
			if err := wantType("ResourceSpans", num, typ, protowire.BytesType); err != nil {
				return err
			}
			// ScopeSpans: 2 spans.
			return wireFields(ss, func(num protowire.Number, typ protowire.Type, _ uint64, s []byte) error {
				if num != 2 {
					return nil
				}
				if err := wantType("ScopeSpans", num, typ, protowire.BytesType); err != nil {
					return err
				}
				sp, err := wireSpan(s)
				if err != nil {
					return err
				}
				span(sp)
				return nil
			})
		})
	})
}

// The wire types of the fields read, by field number.
var (
	spanWireTypes = map[protowire.Number]protowire.Type{
		1: protowire.BytesType, 2: protowire.BytesType, 3: protowire.BytesType, 4: protowire.BytesType,
		5: protowire.BytesType, 6: protowire.VarintType, 7: protowire.Fixed64Type, 8: protowire.Fixed64Type,
		9: protowire.BytesType, 16: protowire.Fixed32Type,
	}
	anyValueWireTypes = map[protowire.Number]protowire.Type{
		1: protowire.BytesType, 2: protowire.VarintType, 3: protowire.VarintType, 4: protowire.Fixed64Type,
		5: protowire.BytesType, 6: protowire.BytesType, 7: protowire.BytesType,
	}
)

// wireSpan reads the fields of a Span the joiner uses.
func wireSpan(b []byte) (*tracepb.Span, error) {
	s := &tracepb.Span{}
	err := wireFields(b, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		want, known := spanWireTypes[num]
		if !known {
			return nil
		}
		if err := wantType("Span", num, typ, want); err != nil {
			return err
		}
		var err error
		switch num {
		case 1:
			s.TraceId = append([]byte(nil), raw...)
		case 2:
			s.SpanId = append([]byte(nil), raw...)
		case 3:
			s.TraceState, err = wireString("Span.trace_state", raw)
		case 4:
			s.ParentSpanId = append([]byte(nil), raw...)
		case 5:
			s.Name, err = wireString("Span.name", raw)
		case 6:
			s.Kind = tracepb.Span_SpanKind(int32(v))
		case 7:
			s.StartTimeUnixNano = v
		case 8:
			s.EndTimeUnixNano = v
		case 16:
			s.Flags = uint32(v)
		case 9:
			var kv *commonpb.KeyValue
			if kv, err = wireKeyValue(raw); err == nil && kv != nil && len(s.Attributes) < maxSpanAttributes {
				s.Attributes = append(s.Attributes, kv)
			}
		}
		return err
	})
	return s, err
}

// wireKeyValue reads an attribute; nil when it is not one the joiner reads.
func wireKeyValue(b []byte) (*commonpb.KeyValue, error) {
	var (
		key string
		val []byte
		has bool
	)
	err := wireFields(b, func(num protowire.Number, typ protowire.Type, _ uint64, raw []byte) error {
		switch num {
		case 1, 2:
			if err := wantType("KeyValue", num, typ, protowire.BytesType); err != nil {
				return err
			}
		}
		var err error
		switch num {
		case 1:
			key, err = wireString("KeyValue.key", raw)
		case 2:
			val, has = raw, true
		}
		return err
	})
	if err != nil || !keptAttribute(key) {
		return nil, err
	}
	kv := &commonpb.KeyValue{Key: key}
	if has {
		kv.Value, err = wireAnyValue(val)
	}
	return kv, err
}

// wireAnyValue reads the scalar kinds of an AnyValue (string, bool, int,
// double); an array, a key-value list or bytes read as an empty value.
func wireAnyValue(b []byte) (*commonpb.AnyValue, error) {
	v := &commonpb.AnyValue{}
	err := wireFields(b, func(num protowire.Number, typ protowire.Type, x uint64, raw []byte) error {
		w, known := anyValueWireTypes[num]
		if !known {
			return nil
		}
		if err := wantType("AnyValue", num, typ, w); err != nil {
			return err
		}
		switch num {
		case 1:
			s, err := wireString("AnyValue.string_value", raw)
			v.Value = &commonpb.AnyValue_StringValue{StringValue: s}
			return err
		case 2:
			v.Value = &commonpb.AnyValue_BoolValue{BoolValue: x != 0}
		case 3:
			v.Value = &commonpb.AnyValue_IntValue{IntValue: int64(x)}
		case 4:
			v.Value = &commonpb.AnyValue_DoubleValue{DoubleValue: math.Float64frombits(x)}
		default:
			v.Value = nil
		}
		return nil
	})
	return v, err
}

// The gRPC side hands the walker the request's bytes as grpc-go received
// them (decompressed, at most maxExportBytes): rawExport is the request
// type of the trace service registered by registerTraceService, and
// rawCodec leaves it undecoded.

// rawExport is an undecoded ExportTraceServiceRequest; Free returns its
// buffers to grpc-go's pool.
type rawExport struct{ data mem.BufferSlice }

// rawCodec is grpc-go's proto codec, except that a *rawExport keeps the
// bytes.
type rawCodec struct{ encoding.CodecV2 }

func newRawCodec() rawCodec { return rawCodec{encoding.GetCodecV2("proto")} }

func (c rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*rawExport); ok {
		data.Ref()
		r.data = data
		return nil
	}
	return c.CodecV2.Unmarshal(data, v)
}

// bytes is the export in one slice: grpc-go's own buffer when it is one,
// else a copy.
func (r *rawExport) bytes() []byte {
	if len(r.data) == 1 {
		return r.data[0].ReadOnlyData()
	}
	return r.data.Materialize()
}

// registerTraceService registers OTLP's TraceService on s, its Export
// taking a *rawExport.
func registerTraceService(s *grpc.Server, export func(ctx context.Context, b []byte) error) {
	desc := coltracepb.TraceService_ServiceDesc
	desc.HandlerType = (*any)(nil)
	desc.Methods = []grpc.MethodDesc{{
		MethodName: "Export",
		Handler: func(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := &rawExport{}
			if err := dec(in); err != nil {
				return nil, err
			}
			defer in.data.Free()
			handle := func(ctx context.Context, _ any) (any, error) {
				if err := export(ctx, in.bytes()); err != nil {
					return nil, err
				}
				return &coltracepb.ExportTraceServiceResponse{}, nil
			}
			if interceptor == nil {
				return handle(ctx, in)
			}
			return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: nil, FullMethod: "/opentelemetry.proto.collector.trace.v1.TraceService/Export"}, handle)
		},
	}}
	s.RegisterService(&desc, struct{}{})
}

package tracing

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// walkOTLPJSON reads an OTLP/JSON ExportTraceServiceRequest in one pass of
// tokens and calls span for each span, in order; see otlpwire.go for what a
// span carries. OTLP/JSON is protobuf's JSON mapping with two differences
// (the OTLP specification, "JSON Protobuf Encoding"): trace and span ids are
// hex strings, and keys are lowerCamelCase only. Ids in base64 (a client
// that used the plain protobuf mapping) are read too. Unknown keys are
// skipped, as the specification asks; a value of the wrong type is an
// error. An error stops the walk: spans before it were handed on.
func walkOTLPJSON(b []byte, span func(*tracepb.Span)) error {
	d := jsonWalker{json.NewDecoder(bytes.NewReader(b))}
	d.dec.UseNumber()
	err := d.object("ExportTraceServiceRequest", func(key string) error {
		if key != "resourceSpans" {
			return d.skip()
		}
		return d.array("resourceSpans", func() error {
			return d.object("ResourceSpans", func(key string) error {
				if key != "scopeSpans" {
					return d.skip()
				}
				return d.array("scopeSpans", func() error {
					return d.object("ScopeSpans", func(key string) error {
						if key != "spans" {
							return d.skip()
						}
						return d.array("spans", func() error {
							s, err := d.span()
							if err == nil && s != nil {
								span(s)
							}
							return err
						})
					})
				})
			})
		})
	})
	if err != nil {
		return err
	}
	if _, err := d.dec.Token(); err != io.EOF {
		return errors.New("data after the export's JSON object")
	}
	return nil
}

type jsonWalker struct{ dec *json.Decoder }

// object reads a JSON object (or null), calling f for each key with the
// decoder before the key's value; f must read that value.
func (d jsonWalker) object(what string, f func(key string) error) error {
	t, err := d.dec.Token()
	if err != nil {
		return err
	}
	if t == nil {
		return nil
	}
	if t != json.Delim('{') {
		return fmt.Errorf("%s: %v; expected an object", what, t)
	}
	for d.dec.More() {
		t, err := d.dec.Token()
		if err != nil {
			return err
		}
		if err := f(t.(string)); err != nil {
			return err
		}
	}
	_, err = d.dec.Token() // }
	return err
}

// array reads a JSON array (or null), calling f to read each element.
func (d jsonWalker) array(what string, f func() error) error {
	t, err := d.dec.Token()
	if err != nil {
		return err
	}
	if t == nil {
		return nil
	}
	if t != json.Delim('[') {
		return fmt.Errorf("%s: %v; expected an array", what, t)
	}
	for d.dec.More() {
		if err := f(); err != nil {
			return err
		}
	}
	_, err = d.dec.Token() // ]
	return err
}

// skip reads one value of any kind.
func (d jsonWalker) skip() error {
	depth := 0
	for {
		t, err := d.dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// scalar reads a string, number, bool or null; an object or array is an
// error naming what.
func (d jsonWalker) scalar(what string) (json.Token, error) {
	t, err := d.dec.Token()
	if err != nil {
		return nil, err
	}
	if _, ok := t.(json.Delim); ok {
		return nil, fmt.Errorf("%s: %v; expected a value", what, t)
	}
	return t, nil
}

func (d jsonWalker) str(what string) (string, error) {
	t, err := d.scalar(what)
	switch x := t.(type) {
	case nil:
		return "", err
	case string:
		return x, nil
	}
	return "", fmt.Errorf("%s: %v; expected a string", what, t)
}

// id reads a trace or span id: hex (OTLP/JSON) or base64 (protobuf JSON).
func (d jsonWalker) id(what string, size int) ([]byte, error) {
	s, err := d.str(what)
	if err != nil || s == "" {
		return nil, err
	}
	if len(s) == 2*size {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%s=%q; expected %d bytes in hex", what, s, size)
	}
	return b, nil
}

// integerText reads an integer's text, from a JSON number or a string of
// one (64-bit integers are strings in protobuf's JSON mapping); ok is
// false for a null or a read error (err).
func (d jsonWalker) integerText(what string) (s string, ok bool, err error) {
	t, err := d.scalar(what)
	switch x := t.(type) {
	case nil:
		return "", false, err
	case json.Number:
		return string(x), true, nil
	case string:
		return x, true, nil
	default:
		return "", false, fmt.Errorf("%s: %v; expected an integer", what, t)
	}
}

// uint reads an unsigned integer (integerText); bits bounds it.
func (d jsonWalker) uint(what string, bits int) (uint64, error) {
	s, ok, err := d.integerText(what)
	if !ok {
		return 0, err
	}
	v, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		return 0, fmt.Errorf("%s=%q; expected an unsigned integer", what, s)
	}
	return v, nil
}

// int reads a signed integer (integerText).
func (d jsonWalker) int(what string) (int64, error) {
	s, ok, err := d.integerText(what)
	if !ok {
		return 0, err
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q; expected an integer", what, s)
	}
	return v, nil
}

// double reads a number, or a string: "NaN", "Infinity", "-Infinity" or
// a number.
func (d jsonWalker) double(what string) (float64, error) {
	t, err := d.scalar(what)
	var s string
	switch x := t.(type) {
	case nil:
		return 0, err
	case json.Number:
		s = string(x)
	case string:
		switch x {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
		s = x
	default:
		return 0, fmt.Errorf("%s: %v; expected a number", what, t)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q; expected a number", what, s)
	}
	return v, nil
}

// kind reads a span kind: its number or its enum name.
func (d jsonWalker) kind() (tracepb.Span_SpanKind, error) {
	t, err := d.scalar("kind")
	switch x := t.(type) {
	case nil:
		return 0, err
	case json.Number:
		v, err := strconv.ParseInt(string(x), 10, 32)
		if err != nil {
			return 0, fmt.Errorf("kind=%s; expected a span kind", x)
		}
		return tracepb.Span_SpanKind(v), nil
	case string:
		if v, ok := tracepb.Span_SpanKind_value[x]; ok {
			return tracepb.Span_SpanKind(v), nil
		}
	}
	return 0, fmt.Errorf("kind=%v; expected a span kind, e.g. 2 or SPAN_KIND_SERVER", t)
}

// span reads one span object.
func (d jsonWalker) span() (*tracepb.Span, error) {
	s := &tracepb.Span{}
	err := d.object("span", func(key string) error {
		var err error
		switch key {
		case "traceId":
			s.TraceId, err = d.id("traceId", 16)
		case "spanId":
			s.SpanId, err = d.id("spanId", 8)
		case "parentSpanId":
			s.ParentSpanId, err = d.id("parentSpanId", 8)
		case "traceState":
			s.TraceState, err = d.str("traceState")
		case "name":
			s.Name, err = d.str("name")
		case "kind":
			s.Kind, err = d.kind()
		case "flags":
			var v uint64
			v, err = d.uint("flags", 32)
			s.Flags = uint32(v)
		case "startTimeUnixNano":
			s.StartTimeUnixNano, err = d.uint("startTimeUnixNano", 64)
		case "endTimeUnixNano":
			s.EndTimeUnixNano, err = d.uint("endTimeUnixNano", 64)
		case "attributes":
			err = d.array("attributes", func() error {
				kv, err := d.keyValue()
				if err == nil && kv != nil && len(s.Attributes) < maxSpanAttributes {
					s.Attributes = append(s.Attributes, kv)
				}
				return err
			})
		default:
			err = d.skip()
		}
		return err
	})
	return s, err
}

// keyValue reads an attribute; nil when it is not one the joiner reads.
// Its value is read before its key may be known, so a value is read in
// full only when the key came first (as every SDK writes it); else it is
// skipped and the attribute dropped.
func (d jsonWalker) keyValue() (*commonpb.KeyValue, error) {
	var (
		kv   commonpb.KeyValue
		seen bool
	)
	err := d.object("attribute", func(key string) error {
		switch key {
		case "key":
			k, err := d.str("key")
			kv.Key, seen = k, true
			return err
		case "value":
			if !seen || !keptAttribute(kv.Key) {
				return d.skip()
			}
			v, err := d.anyValue()
			kv.Value = v
			return err
		}
		return d.skip()
	})
	if err != nil || !keptAttribute(kv.Key) {
		return nil, err
	}
	return &commonpb.KeyValue{Key: kv.Key, Value: kv.Value}, nil
}

// anyValue reads the scalar kinds of an AnyValue; others read as empty.
func (d jsonWalker) anyValue() (*commonpb.AnyValue, error) {
	v := &commonpb.AnyValue{}
	err := d.object("value", func(key string) error {
		switch key {
		case "stringValue":
			s, err := d.str(key)
			v.Value = &commonpb.AnyValue_StringValue{StringValue: s}
			return err
		case "boolValue":
			t, err := d.scalar(key)
			b, ok := t.(bool)
			if err == nil && !ok && t != nil {
				err = fmt.Errorf("boolValue: %v; expected true or false", t)
			}
			v.Value = &commonpb.AnyValue_BoolValue{BoolValue: b}
			return err
		case "intValue":
			i, err := d.int(key)
			v.Value = &commonpb.AnyValue_IntValue{IntValue: i}
			return err
		case "doubleValue":
			f, err := d.double(key)
			v.Value = &commonpb.AnyValue_DoubleValue{DoubleValue: f}
			return err
		}
		v.Value = nil
		return d.skip()
	})
	return v, err
}

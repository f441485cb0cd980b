package prober

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// BenchmarkProbeSpan is what tracing adds to one probe: starting its span,
// putting traceparent and X-Request-Id on the request, and ending the span
// with its events and attributes, with the default provider (sampled, not
// exported). It runs before t0 and after the last byte, outside every timing.
func BenchmarkProbeSpan(b *testing.B) {
	p := New(nil, nil)
	prep := &Prepared{Target: "t", Model: "m", API: APIChat, Scenario: Scenario{Name: "chatbot", OutputTokens: 256}}
	t0 := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/v1/chat/completions", nil)
		res := Result{Kind: KindSuccess, Start: t0, FirstByte: t0, FirstToken: t0, LastToken: t0, OutputTokens: 256}
		span := p.startProbeSpan(context.Background(), req, prep, 0, t0, &res)
		endProbeSpan(span, &res, t0)
	}
}

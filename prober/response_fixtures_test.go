package prober

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/valyala/fastjson"
)

// TestResponseFixtures: each response in testdata/responses, written to the
// engines' documented formats (testdata/responses/README.md names the
// sources), yields the engine timing and speculative decoding slaprobe reads
// from it, with the engines' own field names.
func TestResponseFixtures(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	tests := []struct {
		file   string
		timing EngineTiming
		spec   SpecDecode
	}{
		{"vllm_chat_spec_summary.json",
			EngineTiming{Source: TimingResponse, Queue: ms(2.25), HasQueue: true, Prefill: ms(31.5), HasPrefill: true,
				ITL: ms(4), HasITL: true, Decode: ms(156), HasDecode: true},
			SpecDecode{Draft: 30, Accepted: 26, HasCounts: true, Ratio: 26.0 / 30, Has: true}},
		{"vllm_stream_usage_chunk_spec_detailed.json",
			EngineTiming{Source: TimingResponse, Queue: ms(0.5), HasQueue: true, Prefill: ms(12), HasPrefill: true,
				ITL: ms(3), HasITL: true, Decode: ms(9), HasDecode: true},
			SpecDecode{Draft: 2, Accepted: 1, HasCounts: true, Ratio: 0.5, Has: true}},
		// --enable-per-request-output-token-metrics: the aggregate fields as
		// above (a null queue is absent, not zero), output_token_metrics not read.
		{"vllm_chat_output_token_metrics.json",
			EngineTiming{Source: TimingResponse, Prefill: ms(40), HasPrefill: true,
				ITL: ms(5), HasITL: true, Decode: ms(55), HasDecode: true},
			SpecDecode{}},
		// llama.cpp: ITL over predicted_n − 1 gaps; no queue.
		{"llamacpp_chat_timings_draft.json",
			EngineTiming{Source: TimingResponse, Prefill: ms(40), HasPrefill: true,
				ITL: ms(10), HasITL: true, Decode: ms(240), HasDecode: true},
			SpecDecode{Draft: 32, Accepted: 20, HasCounts: true, Ratio: 0.625, Has: true}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "responses", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			v, err := fastjson.ParseBytes(b)
			if err != nil {
				t.Fatalf("fixture is not JSON: %v", err)
			}
			metrics, timings := v.Get("metrics"), v.Get("timings")
			var got EngineTiming
			var ok bool
			if timings != nil {
				got, ok = llamaTimings(timings)
			} else {
				got, ok = vllmMetrics(metrics)
			}
			if !ok || got != tc.timing {
				t.Errorf("engine timing = %+v, %v; want %+v", got, ok, tc.timing)
			}
			sd, _ := specDecodeOf(metrics, timings)
			if sd != tc.spec {
				t.Errorf("speculative decoding = %+v; want %+v", sd, tc.spec)
			}
		})
	}
}

// TestResponseFixtureStream: vLLM's final usage chunk (choices empty), as
// its fixture has it, read by the stream decoder at the end of a stream.
func TestResponseFixtureStream(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "responses", "vllm_stream_usage_chunk_spec_detailed.json"))
	if err != nil {
		t.Fatal(err)
	}
	m := fastjson.MustParseBytes(b).Get("metrics")
	r := decodeScripted(4, 0, nil, etVLLMStream(`,"metrics":`+m.String())...)
	if r.Kind != KindSuccess {
		t.Fatalf("outcome = %s/%q (%v), want success", r.Kind, r.Reason, r.Err)
	}
	if want := (SpecDecode{Draft: 2, Accepted: 1, HasCounts: true, Ratio: 0.5, Has: true}); r.SpecDecode != want {
		t.Errorf("SpecDecode = %+v, want %+v", r.SpecDecode, want)
	}
	if !r.Engine.HasQueue || r.Engine.Queue != 500*time.Microsecond {
		t.Errorf("engine timing %+v; want the fixture's 0.5 ms queue", r.Engine)
	}
}

package workload

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Each sample is written here by hand in its publisher's columns (docs/workloads.md names the
// description each follows); the values are made up.
const (
	sampleMooncake = `{"timestamp": 0, "input_length": 1100, "output_length": 20, "hash_ids": [0, 1, 2]}
{"timestamp": 250, "input_length": 1500, "output_length": 7, "hash_ids": [0, 1, 3]}

{"timestamp": 1000, "input_length": 600, "output_length": 300, "hash_ids": [4, 5]}
`
	sampleAzure = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n" +
		"2023-11-16 18:17:03.9799600,4808,10\r\n" +
		"2023-11-16 18:17:04.0319600,3180,8\r\n" +
		"2023-11-16 18:17:05.4799600,110,27\r\n"
	sampleBurstGPT = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n" +
		"5,ChatGPT,472,18,490,Conversation log\n" +
		"45,GPT-4,1087,0,1087,API log\n" +
		"118,ChatGPT,30,250,280,API log\n"
	sampleCSV = "ts_ms,user,in,out\n" +
		"100,a,10,5\n" +
		"350,b,20,6\n"
	sampleJSONL = `{"t": "2024-05-10T00:00:00.5Z", "p": 30, "c": 4, "blocks": [7]}
{"t": "2024-05-10T00:00:02Z", "p": "40", "c": 8}
`
)

func readAll(t *testing.T, spec Spec, text string) []Request {
	t.Helper()
	r, err := NewReader(strings.NewReader(text), "sample", spec)
	if err != nil {
		t.Fatal(err)
	}
	var out []Request
	for {
		var req Request
		err := r.Next(&req)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, req)
	}
}

func TestReadFormats(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		spec Spec
		text string
		want []Request
	}{
		{"mooncake", Spec{Format: FormatMooncake}, sampleMooncake, []Request{
			{At: 0, Input: 1100, Output: 20, HashIDs: []uint64{0, 1, 2}, Line: 1},
			{At: 250 * ms, Input: 1500, Output: 7, HashIDs: []uint64{0, 1, 3}, Line: 2},
			{At: 1000 * ms, Input: 600, Output: 300, HashIDs: []uint64{4, 5}, Line: 4},
		}},
		{"azure", Spec{Format: FormatAzure}, sampleAzure, []Request{
			{At: 0, Input: 4808, Output: 10, Line: 2},
			{At: 52 * ms, Input: 3180, Output: 8, Line: 3},
			{At: 1500 * ms, Input: 110, Output: 27, Line: 4},
		}},
		{"burstgpt", Spec{Format: FormatBurstGPT}, sampleBurstGPT, []Request{
			{At: 5 * time.Second, Input: 472, Output: 18, Line: 2},
			{At: 45 * time.Second, Input: 1087, Output: 0, Line: 3},
			{At: 118 * time.Second, Input: 30, Output: 250, Line: 4},
		}},
		{"burstgpt model filter", Spec{Format: FormatBurstGPT, Models: []string{"chatgpt"}}, sampleBurstGPT, []Request{
			{At: 5 * time.Second, Input: 472, Output: 18, Line: 2},
			{At: 118 * time.Second, Input: 30, Output: 250, Line: 4},
		}},
		{"burstgpt log type filter", Spec{Format: FormatBurstGPT, LogTypes: []string{"Conversation log"}}, sampleBurstGPT, []Request{
			{At: 5 * time.Second, Input: 472, Output: 18, Line: 2},
		}},
		{"csv mapped", Spec{Format: FormatCSV, Columns: Columns{Timestamp: "ts_ms", TimeUnit: "ms", Input: "in", Output: "out"}}, sampleCSV, []Request{
			{At: 100 * ms, Input: 10, Output: 5, Line: 2},
			{At: 350 * ms, Input: 20, Output: 6, Line: 3},
		}},
		{"jsonl mapped", Spec{Format: FormatJSONL, Columns: Columns{Timestamp: "t", TimeUnit: "datetime", Input: "p", Output: "c", HashIDs: "blocks"}}, sampleJSONL, []Request{
			{At: 0, Input: 30, Output: 4, HashIDs: []uint64{7}, Line: 1},
			{At: 1500 * ms, Input: 40, Output: 8, Line: 2},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readAll(t, tc.spec, tc.text)
			for i := range got {
				if len(got[i].HashIDs) == 0 {
					got[i].HashIDs = nil
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("read\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

// TestBadInput: every bad line is an error naming the file, the line, the field and what was
// expected.
func TestBadInput(t *testing.T) {
	mc := Spec{Format: FormatMooncake}
	for _, tc := range []struct {
		name string
		spec Spec
		text string
		want []string // substrings of the error
	}{
		{"mooncake not json", mc, `{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [0]}` + "\n{oops\n",
			[]string{"sample:2:", "a JSON object"}},
		{"mooncake missing field", mc, `{"timestamp": 0, "output_length": 2, "hash_ids": []}`,
			[]string{"sample:1:", "field input_length", "token count (field missing)"}},
		{"mooncake negative length", mc, `{"timestamp": 0, "input_length": -5, "output_length": 2, "hash_ids": []}`,
			[]string{"sample:1:", "field input_length=\"-5\"", "token count >= 0"}},
		{"mooncake fractional length", mc, `{"timestamp": 0, "input_length": 5.5, "output_length": 2, "hash_ids": [1]}`,
			[]string{"sample:1:", "field input_length=\"5.5\"", "whole number of tokens"}},
		{"mooncake bad ids", mc, `{"timestamp": 0, "input_length": 600, "output_length": 2, "hash_ids": [1, "x"]}`,
			[]string{"sample:1:", "field hash_ids", "non-negative integer block ids"}},
		{"mooncake too many ids", mc, `{"timestamp": 0, "input_length": 600, "output_length": 2, "hash_ids": [1, 2, 3]}`,
			[]string{"sample:1:", "field hash_ids=\"3 ids\"", "at most 2 ids for a prompt of 600 tokens"}},
		{"mooncake bad timestamp", mc, `{"timestamp": "soon", "input_length": 6, "output_length": 2, "hash_ids": [1]}`,
			[]string{"sample:1:", "field timestamp=\"soon\"", "milliseconds"}},
		{"azure wrong header", Spec{Format: FormatAzure}, "TIME,ContextTokens,GeneratedTokens\n",
			[]string{"sample:1:", "field header", `a column named "TIMESTAMP" (azure format)`}},
		{"azure bad date", Spec{Format: FormatAzure}, sampleAzure + "16/11/2023 18:18,5,5\n",
			[]string{"sample:5:", "field TIMESTAMP=\"16/11/2023 18:18\"", "2023-11-16 18:17:03.9799600"}},
		{"azure bad count", Spec{Format: FormatAzure}, sampleAzure + "2023-11-16 18:18:00,many,5\n",
			[]string{"sample:5:", "field ContextTokens=\"many\"", "whole number of tokens"}},
		{"azure short row", Spec{Format: FormatAzure}, sampleAzure + "2023-11-16 18:18:00,5\n",
			[]string{"sample:5:", "a CSV row", "wrong number of fields"}},
		{"burstgpt missing log type", Spec{Format: FormatBurstGPT}, "Timestamp,Model,Request tokens,Response tokens,Total tokens\n",
			[]string{"sample:1:", `a column named "Log Type"`}},
		{"empty csv", Spec{Format: FormatBurstGPT}, "", []string{"sample:1:", "header line"}},
		{"csv column missing", Spec{Format: FormatCSV, Columns: Columns{Input: "in", Output: "completion"}}, sampleCSV,
			[]string{"sample:1:", `a column named "completion"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewReader(strings.NewReader(tc.text), "sample", tc.spec)
			for err == nil {
				var req Request
				err = r.Next(&req)
			}
			if errors.Is(err, io.EOF) {
				t.Fatal("read to the end without an error")
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestSpecValidate(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{Path: "x", Format: "sharegpt"}, `format="sharegpt"; expected one of mooncake, azure, burstgpt, csv, jsonl`},
		{Spec{Path: "x", Format: FormatCSV}, "needs columns.input_tokens and columns.output_tokens"},
		{Spec{Path: "x", Format: FormatAzure, Models: []string{"GPT-4"}}, "expected format burstgpt"},
		{Spec{Path: "x", Format: FormatJSONL, Columns: Columns{Input: "a", Output: "b", TimeUnit: "hours"}}, `columns.time_unit="hours"`},
		{Spec{Path: "x", Format: FormatMooncake, Columns: Columns{Input: "a"}}, "fixed columns"},
		{Spec{Format: FormatMooncake}, "trace is empty"},
	} {
		err := tc.spec.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one saying %q", tc.spec, err, tc.want)
		}
	}
}

func TestSummaryByHand(t *testing.T) {
	r, err := NewReader(strings.NewReader(sampleMooncake), "sample", Spec{Format: FormatMooncake})
	if err != nil {
		t.Fatal(err)
	}
	s, err := SummarizeReader(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Request 2 shares blocks 0 and 1 (512 tokens each) with request 1; block 3 is new.
	// Request 3's blocks are new. 1024 of 1100+1500+600 prompt tokens are shared.
	if s.Requests != 3 || s.InputTokens != 3200 || s.SharedTokens != 1024 {
		t.Fatalf("summary %+v; want 3 requests, 3200 prompt tokens, 1024 shared", s)
	}
	if s.Span() != time.Second || s.Rate() != 2 {
		t.Errorf("span %s rate %g; want 1s and 2/s", s.Span(), s.Rate())
	}
	if s.Input.Max != 1500 || s.Input.P50 != 1100 || s.Output.P50 != 20 {
		t.Errorf("lengths %+v %+v; want input max 1500, p50 1100, output p50 20", s.Input, s.Output)
	}
	for _, w := range []string{"3 requests", "shared-prefix share: 32.0 %"} {
		if !strings.Contains(s.String(), w) {
			t.Errorf("summary text %q does not say %q", s.String(), w)
		}
	}
}

// TestSharedPrefixIsAPrefix: a block seen before counts only when every block before it was
// seen too, as a prefix cache serves them.
func TestSharedPrefixIsAPrefix(t *testing.T) {
	seen := map[uint64]bool{1: true, 3: true}
	has := func(id uint64) bool { return seen[id] }
	for _, tc := range []struct {
		ids   []uint64
		input int
		want  int
	}{
		{[]uint64{1, 3}, 1000, 1000},
		{[]uint64{1, 2, 3}, 1500, 512},
		{[]uint64{2, 1, 3}, 1500, 0},
		{nil, 1500, 0},
	} {
		if got := SharedPrefix(tc.ids, tc.input, 512, has); got != tc.want {
			t.Errorf("SharedPrefix(%v, %d) = %d, want %d", tc.ids, tc.input, got, tc.want)
		}
	}
}

func TestHistogramWithinOnePercent(t *testing.T) {
	var h histogram
	for v := 1; v <= 200000; v++ {
		h.add(v)
	}
	for _, q := range []float64{0.5, 0.9, 0.99} {
		exact := int(q * 200000)
		got := h.quantile(q)
		if d := float64(got-exact) / float64(exact); d > 0.01 || d < -0.01 {
			t.Errorf("q%.2f = %d, exact %d (%.2f %% off)", q, got, exact, 100*d)
		}
	}
	if h.max != 200000 {
		t.Errorf("max %d", h.max)
	}
}

// TestGenerateRoundTrip: every format the generator writes reads back with the requests,
// lengths and shares it was given.
func TestGenerateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	o := GenOptions{Requests: 2000, Seed: 7, Rate: 5, InputMin: 100, InputMax: 8000, OutputMin: 10, OutputMax: 500,
		Prefixes: 4, PrefixBlocks: 4, SharedProb: 0.5, FailProb: 0.1}
	for _, f := range Formats {
		t.Run(string(f), func(t *testing.T) {
			path := filepath.Join(dir, "trace."+string(f))
			var buf bytes.Buffer
			if err := Generate(&buf, f, o); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			var again bytes.Buffer
			if err := Generate(&again, f, o); err != nil || !bytes.Equal(buf.Bytes(), again.Bytes()) {
				t.Fatalf("the same options wrote different bytes (err %v)", err)
			}
			spec := Spec{Path: path, Format: f}
			if f == FormatCSV || f == FormatJSONL {
				spec.Columns = GenericColumns
				if f == FormatCSV {
					spec.Columns.HashIDs = ""
				}
			}
			var calls int
			s, err := Summarize(spec, func(Progress) { calls++ })
			if err != nil {
				t.Fatal(err)
			}
			if s.Requests != o.Requests || calls == 0 {
				t.Fatalf("%d requests, %d progress calls; want %d and at least one", s.Requests, calls, o.Requests)
			}
			if s.Input.Max > o.InputMax || s.Input.P50 < o.InputMin || s.Output.Max > o.OutputMax {
				t.Errorf("lengths %+v / %+v outside the generator's bounds", s.Input, s.Output)
			}
			if rate := s.Rate(); rate < 4 || rate > 6 {
				t.Errorf("rate %.2f/s; generated at 5/s", rate)
			}
			if f == FormatBurstGPT && (s.ZeroOutput < 150 || s.ZeroOutput > 250) {
				t.Errorf("%d failed rows; want about 10 %% of 2000", s.ZeroOutput)
			}
			if f == FormatMooncake || f == FormatJSONL {
				if !s.HashIDs || s.SharedShare < 0.05 || s.SharedShare > 0.6 {
					t.Errorf("shared share %.3f; want a share between 5 and 60 %%", s.SharedShare)
				}
			}
		})
	}
}

package workload

import (
	"errors"
	"io"
	"math"
	"path/filepath"
	"testing"
	"time"
)

// excerptFacts are what the rows of a committed excerpt (testdata/README.md) hold, computed from
// the raw rows with a separate script, not with this package: totals, the last request's arrival,
// the exact nearest-rank percentiles and the tokens in leading 512-token blocks an earlier request
// had.
type excerptFacts struct {
	requests             int
	last                 time.Duration // the first request comes at 0 in each
	lastLine             int
	inTokens, outTokens  int64
	in, out              Lengths // percentiles exact; Summarize's are within 1 %
	hashIDs              bool
	sharedTokens         int64
	firstIn, firstOut    int
	lastIn, lastOut      int
	firstIDs, lastIDsLen int
}

var excerpts = []struct {
	file string
	spec Spec
	want excerptFacts
}{
	{"mooncake_conversation_head250.jsonl", Spec{Format: FormatMooncake}, excerptFacts{
		requests: 250, last: 86999 * time.Millisecond, lastLine: 250,
		inTokens: 3534037, outTokens: 91107,
		in:      Lengths{P50: 8639, P90: 27152, P99: 89867, Max: 120633},
		out:     Lengths{P50: 387, P90: 593, P99: 904, Max: 929},
		hashIDs: true, sharedTokens: 227328,
		firstIn: 6758, firstOut: 500, lastIn: 14794, lastOut: 409, firstIDs: 14, lastIDsLen: 29,
	}},
	{"azure_code_2023_head400.csv", Spec{Format: FormatAzure}, excerptFacts{
		requests: 400, last: 225*time.Second + 106049*time.Microsecond, lastLine: 401,
		inTokens: 855018, outTokens: 9820,
		in:      Lengths{P50: 1468, P90: 5831, P99: 7436, Max: 7436},
		out:     Lengths{P50: 13, P90: 44, P99: 218, Max: 697},
		firstIn: 4808, firstOut: 10, lastIn: 5442, lastOut: 11,
	}},
	{"azure_conv_2023_head400.csv", Spec{Format: FormatAzure}, excerptFacts{
		requests: 400, last: 106*time.Second + 330212*time.Microsecond, lastLine: 401,
		inTokens: 371046, outTokens: 104009,
		in:      Lengths{P50: 990, P90: 1314, P99: 4085, Max: 4107},
		out:     Lengths{P50: 217, P90: 427, P99: 575, Max: 649},
		firstIn: 374, firstOut: 44, lastIn: 1314, lastOut: 200,
	}},
}

// within1 reports whether got is within 1 % of want (Summarize's percentiles are a histogram's).
func within1(got, want int) bool {
	return math.Abs(float64(got-want)) <= 0.01*float64(want)
}

// TestRealExcerpts reads each committed excerpt of a public trace with the real reader and checks
// its summary and its first and last requests against the facts computed from the raw rows.
func TestRealExcerpts(t *testing.T) {
	for _, tc := range excerpts {
		t.Run(tc.file, func(t *testing.T) {
			spec := tc.spec
			spec.Path = filepath.Join("testdata", tc.file)
			w := tc.want
			s, err := Summarize(spec, nil)
			if err != nil {
				t.Fatal(err)
			}
			if s.Requests != w.requests || s.First != 0 || s.Last != w.last || s.InputTokens != w.inTokens || s.OutputTokens != w.outTokens {
				t.Errorf("summary: %d requests over %v..%v, %d prompt and %d answer tokens; want %d over 0..%v, %d and %d",
					s.Requests, s.First, s.Last, s.InputTokens, s.OutputTokens, w.requests, w.last, w.inTokens, w.outTokens)
			}
			if s.ZeroInput != 0 || s.ZeroOutput != 0 || s.Skipped != 0 {
				t.Errorf("zero prompts %d, zero answers %d, skipped %d; the excerpt has none", s.ZeroInput, s.ZeroOutput, s.Skipped)
			}
			for _, l := range []struct {
				name      string
				got, want Lengths
				sum       int64
			}{{"input", s.Input, w.in, w.inTokens}, {"output", s.Output, w.out, w.outTokens}} {
				if mean := float64(l.sum) / float64(w.requests); math.Abs(l.got.Mean-mean) > 1e-9*mean || l.got.Max != l.want.Max ||
					!within1(l.got.P50, l.want.P50) || !within1(l.got.P90, l.want.P90) || !within1(l.got.P99, l.want.P99) {
					t.Errorf("%s lengths %+v; want mean %.4f, max %d and p50 %d, p90 %d, p99 %d within 1 %%",
						l.name, l.got, mean, l.want.Max, l.want.P50, l.want.P90, l.want.P99)
				}
			}
			if s.HashIDs != w.hashIDs || s.SharedTokens != w.sharedTokens || s.SharedExactUpTo != 0 {
				t.Errorf("block ids %v, shared prompt tokens %d (exact up to %d); want %v, %d, exact",
					s.HashIDs, s.SharedTokens, s.SharedExactUpTo, w.hashIDs, w.sharedTokens)
			}
			if w.hashIDs {
				if want := float64(w.sharedTokens) / float64(w.inTokens); s.SharedShare != want {
					t.Errorf("shared share %.6f; want %.6f", s.SharedShare, want)
				}
			}

			r, err := Open(spec)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var first, last Request
			var firstIDs int
			for n := 0; ; n++ {
				var req Request
				if err := r.Next(&req); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					first, firstIDs = req, len(req.HashIDs)
				}
				last = req
			}
			if first.At != 0 || first.Input != w.firstIn || first.Output != w.firstOut || firstIDs != w.firstIDs || first.Line != lineOfFirst(tc.spec) {
				t.Errorf("first request %+v (%d ids); want at 0, %d in, %d out, %d ids", first, firstIDs, w.firstIn, w.firstOut, w.firstIDs)
			}
			if last.At != w.last || last.Line != w.lastLine || len(last.HashIDs) != w.lastIDsLen || last.Input != w.lastIn || last.Output != w.lastOut {
				t.Errorf("last request %+v; want at %v on line %d, %d in, %d out, %d ids", last, w.last, w.lastLine, w.lastIn, w.lastOut, w.lastIDsLen)
			}
		})
	}
}

// lineOfFirst is the line of a trace's first request: after a CSV's header.
func lineOfFirst(s Spec) int {
	if s.Format == FormatMooncake || s.Format == FormatJSONL {
		return 1
	}
	return 2
}

// TestPublisherFormats reads the forms each publisher describes that no committed excerpt has
// (values made up, columns and time forms as published): the Azure 2024 trace's zoned times, with
// and without a fraction (as its notebook shows them); BurstGPT_3's Session ID and Elapsed time
// columns between Timestamp and Model, empty on API log rows.
func TestPublisherFormats(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		spec Spec
		text string
		want []Request
	}{
		{"azure 2024", Spec{Format: FormatAzure}, "TIMESTAMP,ContextTokens,GeneratedTokens\n" +
			"2024-05-10 00:00:00.009930+00:00,2048,37\n" +
			"2024-05-10 00:00:01+00:00,512,3\n" +
			"2024-05-10 00:00:01.5+00:00,100,9\n", []Request{
			{At: 0, Input: 2048, Output: 37, Line: 2},
			{At: 990070 * time.Microsecond, Input: 512, Output: 3, Line: 3},
			{At: 1490070 * time.Microsecond, Input: 100, Output: 9, Line: 4},
		}},
		{"burstgpt 3", Spec{Format: FormatBurstGPT, LogTypes: []string{"Conversation log"}},
			"Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n" +
				"19440110.0,0c1d2e3f-aaaa-4bbb-8ccc-000000000001,43,GPT-4,906,446,1352,Conversation log\n" +
				"19440111.5,,2,ChatGPT,36,29,65,API log\n" +
				"19440120.25,0c1d2e3f-aaaa-4bbb-8ccc-000000000001,8,GPT-4,1779,0,1779,Conversation log\n", []Request{
				{At: 19440110 * time.Second, Input: 906, Output: 446, Line: 2},
				{At: 19440120*time.Second + 250*ms, Input: 1779, Output: 0, Line: 4},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readAll(t, tc.spec, tc.text)
			if len(got) != len(tc.want) {
				t.Fatalf("%d requests %+v; want %d", len(got), got, len(tc.want))
			}
			for i := range got {
				if g, w := got[i], tc.want[i]; g.At != w.At || g.Input != w.Input || g.Output != w.Output || g.Line != w.Line || len(g.HashIDs) != 0 {
					t.Errorf("request %d: %+v; want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

package engine

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/slaprobe/slaprobe/prober"
)

// TestParseFilterLosesNothingRead: on every fixture, parsing only the
// wanted families gives the snapshot that parsing the whole page gives.
func TestParseFilterLosesNothingRead(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("fixtures: %v", err)
	}
	for _, f := range files {
		page, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tp := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := tp.TextToMetricFamilies(strings.NewReader(string(page)))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		want, wantErr := FromFamilies(fams)
		got, gotErr := Parse(strings.NewReader(string(page)))
		if (wantErr == nil) != (gotErr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: filtered %+v (%v)\nwhole page %+v (%v)", f, got, gotErr, want, wantErr)
		}
		if wantErr != nil && gotErr != nil && wantErr.Error() != gotErr.Error() {
			t.Errorf("%s: filtered: %v; whole page: %v", f, gotErr, wantErr)
		}
	}
}

// TestPageFilterPassesOnlyWanted: the parser sees the lines of the families
// read, nothing else; a long line of another family is skipped, a long
// line of a family read fails.
func TestPageFilterPassesOnlyWanted(t *testing.T) {
	page := "# HELP other_total x\n# TYPE other_total counter\nother_total 1\n" +
		"# HELP vllm:num_requests_running Running.\n# TYPE vllm:num_requests_running gauge\n" +
		"vllm:num_requests_running{engine=\"0\"} 3\n" +
		"# HELP long_one " + strings.Repeat("x", 3*maxLineBytes) + "\n" +
		"# a comment\n\n" +
		"# TYPE vllm:e2e_request_latency_seconds histogram\n" +
		"vllm:e2e_request_latency_seconds_bucket{le=\"+Inf\"} 2\nvllm:e2e_request_latency_seconds_sum 1.5\n" +
		"vllm:e2e_request_latency_seconds_count 2\nvllm:e2e_request_latency_seconds_created 1e9\n" +
		"{\"quoted.name\"} 1\n"
	out, err := io.ReadAll(newPageFilter(strings.NewReader(page)))
	if err != nil {
		t.Fatal(err)
	}
	want := "# HELP vllm:num_requests_running Running.\n# TYPE vllm:num_requests_running gauge\n" +
		"vllm:num_requests_running{engine=\"0\"} 3\n" +
		"# TYPE vllm:e2e_request_latency_seconds histogram\n" +
		"vllm:e2e_request_latency_seconds_bucket{le=\"+Inf\"} 2\nvllm:e2e_request_latency_seconds_sum 1.5\n" +
		"vllm:e2e_request_latency_seconds_count 2\n"
	if string(out) != want {
		t.Errorf("passed on:\n%s\nwant:\n%s", out, want)
	}
	s, err := Parse(strings.NewReader(page))
	if err != nil || s.Running != 3 || s.RequestsFinished != 2 {
		t.Errorf("Parse: %+v, %v", s, err)
	}

	long := "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"" + strings.Repeat("e", maxLineBytes) + "\"} 1\n"
	if _, err := Parse(strings.NewReader(long)); err == nil || !strings.Contains(err.Error(), "longer than 65536 bytes") {
		t.Errorf("long line of a family read: %v", err)
	}
}

// TestParsePageTooLarge: a page past maxBodyBytes fails, whether its lines
// are of families read or not.
func TestParsePageTooLarge(t *testing.T) {
	for _, line := range []string{"vllm:num_requests_running{engine=\"%d\"} 1\n", "other_metric{i=\"%d\"} 1\n"} {
		var b strings.Builder
		b.WriteString("# TYPE vllm:num_requests_running gauge\n")
		for i := 0; b.Len() <= 4<<20+1; i++ {
			b.WriteString(strings.Replace(line, "%d", strconv.Itoa(i), 1))
		}
		if _, err := Parse(strings.NewReader(b.String())); !errors.Is(err, ErrPageTooLarge) {
			t.Errorf("%q × %d bytes: %v; want ErrPageTooLarge", line, b.Len(), err)
		}
	}
}

// TestScrapeFollowsNoRedirect: a 307 on /metrics or /props fails naming its
// Location, even with a client that follows redirects; the other origin is
// never asked.
func TestScrapeFollowsNoRedirect(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path+"?token=s3cr3t", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	for _, client := range []*http.Client{nil, {}} {
		_, err := Scrape(context.Background(), client, srv.URL+"/metrics")
		var he *prober.HTTPError
		if !errors.As(err, &he) || he.Reason() != prober.ReasonRedirect || !strings.Contains(err.Error(), other.URL+"/metrics") ||
			strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("scrape: %v; want a redirect naming the Location without its query", err)
		}
		_, err = FetchProps(context.Background(), client, srv.URL+"/props")
		if !errors.As(err, &he) || he.Reason() != prober.ReasonRedirect {
			t.Errorf("props: %v; want a redirect", err)
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the other origin was asked %d times", n)
	}
}

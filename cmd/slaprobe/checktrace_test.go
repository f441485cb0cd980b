package main

import (
	"bytes"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/slaprobe/slaprobe/internal/workload"
)

func TestCheckConfigTrace(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	write := func(name string, f workload.Format, o workload.GenOptions) string {
		var b bytes.Buffer
		if err := workload.Generate(&b, f, o); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mooncake := write("mooncake.jsonl", workload.FormatMooncake, workload.GenOptions{Requests: 500, Seed: 3, Rate: 2,
		Prefixes: 2, PrefixBlocks: 8, SharedProb: 0.6})
	burst := write("burst.csv", workload.FormatBurstGPT, workload.GenOptions{Requests: 400, Seed: 4, Rate: 1})
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [0]}`+"\n"+
		`{"timestamp": 5, "input_length": "ten", "output_length": 2, "hash_ids": [0]}`+"\n"), 0o600)

	conf := filepath.Join(dir, "conf.yml")
	os.WriteFile(conf, []byte("targets: [{url: \"http://127.0.0.1:1\"}]\nglobal: {scenarios: [traffic]}\nscenarios:\n"+
		"  - name: traffic\n    workload: {trace: "+mooncake+", format: mooncake, ttft_by_class: {1k: 2s}}\n"), 0o600)
	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string
		wantStderr string
	}{
		{"mooncake", []string{"--trace=" + mooncake}, 0,
			[]string{"(mooncake): 500 requests", "requests/s", "input tokens:  mean", "p99", "shared-prefix share:"}, "config OK"},
		{"burstgpt filtered", []string{"--trace=" + burst, "--trace.format=burstgpt", "--trace.model=GPT-4"}, 0,
			[]string{"(burstgpt):", "rows left out by the models/log_types filters", "shared-prefix share: unknown"}, "config OK"},
		{"scenario", []string{"--config.file=" + conf}, 0,
			[]string{"workload:", "scenario traffic: trace " + mooncake + " (mooncake): 500 requests", "TTFT by length class: 1k≤2s 4k≤3s"}, "config OK"},
		{"bad line", []string{"--trace=" + bad}, 1, nil, `bad.jsonl:2: field input_length="ten": expected a whole number of tokens`},
		{"missing file", []string{"--trace=" + filepath.Join(dir, "nope.jsonl")}, 1, nil, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"check-config"}, tc.args...)
			if !strings.HasPrefix(tc.args[0], "--config.file") {
				args = append(args, "--target.url=http://127.0.0.1:1")
			}
			cmd := exec.Command(bin, args...)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d\nstderr: %s", code, tc.wantCode, errb.String())
			}
			for _, w := range tc.wantStdout {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
			if !strings.Contains(errb.String(), tc.wantStderr) {
				t.Errorf("stderr %q lacks %q", errb.String(), tc.wantStderr)
			}
		})
	}
}

// TestCheckConfigTraceExcerpts runs check-config --trace on each committed excerpt of a public trace
// (internal/workload/testdata/README.md) and checks the printed numbers against figures computed from
// the raw rows by a separate script: requests, span, rate, means, maxima and the shared-prefix share
// as printed; the percentiles within 1 % of the exact nearest-rank ones.
func TestCheckConfigTraceExcerpts(t *testing.T) {
	bin := binary(t)
	type lengths struct{ mean, p50, p90, p99, max int }
	line := regexp.MustCompile(`(?m)^  (input|output) tokens: +mean (\d+), p50 (\d+), p90 (\d+), p99 (\d+), max (\d+)$`)
	for _, tc := range []struct {
		file, format string
		head         string // requests, span, rate and the shared-prefix line as printed
		in, out      lengths
	}{
		{"mooncake_conversation_head250.jsonl", "mooncake",
			"(mooncake): 250 requests\n  time span 1m26.999s, 2.86 requests/s\n",
			lengths{14136, 8639, 27152, 89867, 120633}, lengths{364, 387, 593, 904, 929}},
		{"azure_code_2023_head400.csv", "azure",
			"(azure): 400 requests\n  time span 3m45.106s, 1.77 requests/s\n",
			lengths{2138, 1468, 5831, 7436, 7436}, lengths{25, 13, 44, 218, 697}},
		{"azure_conv_2023_head400.csv", "azure",
			"(azure): 400 requests\n  time span 1m46.33s, 3.75 requests/s\n",
			lengths{928, 990, 1314, 4085, 4107}, lengths{260, 217, 427, 575, 649}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("..", "..", "internal", "workload", "testdata", tc.file)
			out, err := exec.Command(bin, "check-config", "--target.url=http://127.0.0.1:1", "--trace="+path, "--trace.format="+tc.format).CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			text := string(out)
			if !strings.Contains(text, "trace "+path+" "+tc.head) {
				t.Errorf("output lacks %q:\n%.600s", tc.head, text)
			}
			share := "  shared-prefix share: unknown (the trace has no block ids)\n"
			if tc.format == "mooncake" {
				// 227328 of 3534037 prompt tokens.
				share = "  shared-prefix share: 6.4 % of prompt tokens are in 512-token blocks an earlier request had\n"
			}
			if !strings.Contains(text, share) {
				t.Errorf("output lacks %q:\n%.600s", share, text)
			}
			got := line.FindAllStringSubmatch(text, -1)
			if len(got) != 2 {
				t.Fatalf("%d length lines in:\n%.600s", len(got), text)
			}
			for i, want := range []lengths{tc.in, tc.out} {
				n := make([]int, 5)
				for j := range n {
					n[j], _ = strconv.Atoi(got[i][j+2])
				}
				near := func(g, w int) bool { return math.Abs(float64(g-w)) <= 0.01*float64(w) }
				if n[0] != want.mean || n[4] != want.max || !near(n[1], want.p50) || !near(n[2], want.p90) || !near(n[3], want.p99) {
					t.Errorf("%s: mean %d, p50 %d, p90 %d, p99 %d, max %d; want mean %d, max %d, percentiles within 1 %% of %d, %d, %d",
						got[i][1], n[0], n[1], n[2], n[3], n[4], want.mean, want.max, want.p50, want.p90, want.p99)
				}
			}
		})
	}
}

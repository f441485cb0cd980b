package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
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

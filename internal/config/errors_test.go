package config

import (
	"regexp"
	"strings"
	"testing"
)

var lineColonRE = regexp.MustCompile(`line \d+:`)

// TestConfigErrorsNameLineFieldValueExpectation: every invalid config gets
// one error naming the line, the field, the value given and what was
// expected.
func TestConfigErrorsNameLineFieldValueExpectation(t *testing.T) {
	const target = "targets:\n  - url: http://vllm:8000\n" // lines 1-2
	for _, tc := range []struct {
		name string
		yaml string
		want []string // substrings, in order; the first is the line
	}{
		{"bad indent deep in a block",
			"global:\n  jitter: 0.1\ntargets:\n  - url: http://a:1\n    name: a\n   model: m\n",
			[]string{"line 6:", "did not find expected", "check the indentation"}},
		{"tab indentation",
			target + "global:\n\tjitter: 0.1\n",
			[]string{"line 4:", "indented with a tab, expected spaces"}},
		{"duplicate key",
			"global:\n  jitter: 0.1\n  jitter: 0.2\n" + target,
			[]string{"line 3:", `"jitter" already defined`}},
		{"negative scenario interval",
			target + "scenarios:\n  - name: chatbot\n    interval: -5s\n",
			[]string{"line 5:", "interval", `"-5s"`, "negative; expected a positive duration"}},
		{"negative stall timeout",
			"global:\n  stall_timeout: -1m\n" + target,
			[]string{"line 2:", "stall_timeout", `"-1m"`, "expected a positive duration"}},
		{"zero timeout",
			target + "scenarios:\n  - name: rag\n    timeout: 0s\n",
			[]string{"line 5:", "timeout=0s", "expected a positive duration"}},
		{"words for a number",
			"global:\n  max_in_flight_per_target: many\n" + target,
			[]string{"line 2:", `max_in_flight_per_target="many"`, "expected a whole number"}},
		{"text for a fraction",
			"global:\n  jitter: lots\n" + target,
			[]string{"line 2:", `jitter="lots"`, "expected a number"}},
		{"list where a mapping belongs",
			"global: [a, b]\n" + target,
			[]string{"line 1:", "global is a list", "expected a mapping"}},
		{"jitter out of range",
			target + "global:\n  jitter: 1.5\n",
			[]string{"line 4:", "global.jitter=1.5", "expected a fraction in [0, 1)"}},
		{"unknown field in a target",
			target + "    modle: x\n",
			[]string{"line 3:", `unknown field "modle" in targets[]`}},
		{"second target without url",
			target + "  - name: b\n    model: m\n",
			[]string{"line 3:", "targets[1]: url is empty", "expected the server's base URL"}},
		{"credentials in the url are not echoed",
			"targets:\n  - name: a\n    url: http://admin:s3cret-pw@vllm:8000\n",
			[]string{"line 3:", `url="http://<secret>@vllm:8000" carries credentials`, "expected them in http_client_config"}},
		{"unknown scenario in a target's list",
			"targets:\n  - name: a\n    url: http://a:1\n    scenarios:\n      - chatbot\n      - nope\n",
			[]string{"line 6:", `unknown scenario "nope"`, "expected one of: agentic"}},
		{"sweep duration",
			target + "sweep:\n  closed_loop:\n    duration: 0s\n",
			[]string{"line 5:", "sweep.closed_loop.duration=0s", "expected a positive duration"}},
		{"sweep concurrency",
			target + "sweep:\n  closed_loop:\n    concurrency: [1, 0, 4]\n",
			[]string{"line 5:", "concurrency", "0", "expected concurrency values from 1 to 10000"}},
		{"power price",
			target + "power:\n  price_per_kwh: -0.1\n",
			[]string{"line 4:", "power.price_per_kwh=-0.1", "expected a price"}},
		{"engine scrape interval",
			target + "engine:\n  scrape_interval: 100ms\n",
			[]string{"line 4:", "engine.scrape_interval=100ms", "expected at least 1s"}},
		{"api",
			target + "    api: grpc\n",
			[]string{"line 3:", `api="grpc"`, `expected chat, completions, responses or messages`}},
		{"scenario api",
			target + "scenarios:\n  - {name: chatbot, api: soap}\n",
			[]string{`api="soap"`, `expected chat, completions, responses or messages`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadBytes([]byte(tc.yaml))
			if err == nil {
				t.Fatalf("no error for:\n%s", tc.yaml)
			}
			msg := err.Error()
			if strings.Contains(msg, "s3cret-pw") {
				t.Errorf("the error echoes a password: %s", msg)
			}
			rest := msg
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("error lacks %q (in order %q):\n%s", w, tc.want, msg)
				}
				rest = rest[i+len(w):]
			}
			if n := len(lineColonRE.FindAllString(msg, -1)); n != 1 {
				t.Errorf("want exactly one \"line N:\": %s", msg)
			}
		})
	}
}

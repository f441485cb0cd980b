package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// floatPaths lists every float field a config file can set, as a YAML path
// with [] for a list element or a map value, read off the types.
func floatPaths(t reflect.Type, path string, out *[]string, depth int) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if depth > 10 {
		return
	}
	switch t.Kind() {
	case reflect.Float32, reflect.Float64:
		*out = append(*out, path)
	case reflect.Slice, reflect.Array, reflect.Map:
		floatPaths(t.Elem(), path+"[]", out, depth+1)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := strings.Split(f.Tag.Get("yaml"), ",")
			if tag[0] == "-" {
				continue
			}
			sub := path
			if !(len(tag) > 1 && tag[1] == "inline") && !f.Anonymous {
				name := tag[0]
				if name == "" {
					name = strings.ToLower(f.Name)
				}
				sub = joinPath(path, name)
			}
			floatPaths(f.Type, sub, out, depth+1)
		}
	}
}

// setPath sets the scalar at path (dots, [] for the first element of a
// list or the first value of a map) in a YAML mapping, making the mappings
// it lacks. It returns the path with indices ([0], ["key"]), as an error
// names it.
func setPath(t *testing.T, n *yaml.Node, path, value string) string {
	t.Helper()
	var named []string
	for _, part := range strings.Split(path, ".") {
		key, list := strings.CutSuffix(part, "[]")
		var child *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				child = n.Content[i+1]
			}
		}
		if child == nil {
			if list {
				t.Fatalf("the base config has no %s entry; add one so that the float fields under %s are checked", key, path)
			}
			child = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, child)
		}
		named = append(named, key)
		if list {
			switch {
			case child.Kind == yaml.SequenceNode && len(child.Content) > 0:
				child = child.Content[0]
				named[len(named)-1] += "[0]"
			case child.Kind == yaml.MappingNode && len(child.Content) > 1:
				named[len(named)-1] += fmt.Sprintf("[%q]", child.Content[0].Value)
				child = child.Content[1]
			default:
				t.Fatalf("the base config's %s is empty; add an entry so that the float fields under %s are checked", key, path)
			}
		}
		n = child
	}
	n.Kind, n.Tag, n.Value, n.Content = yaml.ScalarNode, "!!float", value, nil
	return strings.Join(named, ".")
}

// TestEveryFloatFieldRefusesNaNAndInf sets each float field of the config
// types, found by reflection, to NaN, +Inf and -Inf in turn, and expects
// the load to fail with an error naming that field. A float field added
// later is covered as soon as it exists.
func TestEveryFloatFieldRefusesNaNAndInf(t *testing.T) {
	const base = `
global: {scenarios: [chatbot]}
targets: [{url: "http://127.0.0.1:8000"}]
scenarios:
  - name: chatbot
    thresholds: {min_decode_tokens_per_second: 10}
`
	if _, err := LoadBytes([]byte(base)); err != nil {
		t.Fatalf("the base config does not load: %v", err)
	}
	var paths []string
	floatPaths(reflect.TypeOf(plainConfig{}), "", &paths, 0)
	// A few fields that must be there, so a broken walk cannot pass.
	for _, want := range []string{"global.jitter", "sweep.pause.max_waiting", "power.price_per_kwh", "scenarios[].thresholds.min_decode_tokens_per_second"} {
		found := false
		for _, p := range paths {
			found = found || p == want
		}
		if !found {
			t.Fatalf("the walk of the config types missed %s; it found %v", want, paths)
		}
	}
	for _, p := range paths {
		for _, v := range []string{".nan", ".inf", "-.inf"} {
			var root yaml.Node
			if err := yaml.Unmarshal([]byte(base), &root); err != nil {
				t.Fatal(err)
			}
			field := setPath(t, root.Content[0], p, v)
			data, err := yaml.Marshal(&root)
			if err != nil {
				t.Fatal(err)
			}
			_, err = LoadBytes(data)
			if err == nil {
				t.Errorf("%s: %s was accepted; want an error naming the field\n%s", field, v, data)
				continue
			}
			if !strings.Contains(err.Error(), field) {
				t.Errorf("%s: %s: error does not name the field: %v", field, v, err)
			}
		}
	}
	t.Logf("%d float fields checked: %v", len(paths), paths)
}

func TestNaNErrorSaysWhatIsExpected(t *testing.T) {
	_, err := LoadBytes([]byte("global: {jitter: .nan}\ntargets: [{url: \"http://127.0.0.1:8000\"}]\n"))
	want := "line 1: global.jitter: NaN is not a number; expected a finite value from 0 to below 1, e.g. 0.2"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}

func TestUpperBounds(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"input_tokens", "scenarios: [{name: big, input_tokens: 10000001, output_tokens: 16}]",
			`scenario "big": input_tokens=10000001; expected at most 10000000`},
		{"output_tokens", "scenarios: [{name: big, input_tokens: 16, output_tokens: 1000001}]",
			`scenario "big": output_tokens=1000001; expected at most 1000000`},
		{"new_tokens", "scenarios: [{name: big, input_tokens: 16, output_tokens: 16, conversation: {new_tokens: 10000001}}]",
			`scenario "big": conversation.new_tokens=10000001; expected at most 10000000`},
		{"new_tokens range", "scenarios: [{name: big, input_tokens: 16, output_tokens: 16, conversation: {new_tokens: 1-10000001}}]",
			`conversation.new_tokens=10000001; expected at most 10000000`},
		{"conversation length", "scenarios: [{name: big, input_tokens: 16, output_tokens: 16, conversation: {turns: 64, new_tokens: 200000}}]",
			`the last turn of the conversation would send 12601024 tokens`},
		{"max_line_bytes", "global: {max_line_bytes: 67108865}",
			"global.max_line_bytes=67108865; expected from 4096 to 67108864 (64 MiB)"},
		{"max_in_flight_per_target", "global: {max_in_flight_per_target: 10001}",
			"global.max_in_flight_per_target=10001; expected from 1 to 10000"},
		{"sweep concurrency", "sweep: {closed_loop: {concurrency: [1, 100000]}}",
			"sweep.closed_loop.concurrency: 100000; expected concurrency values from 1 to 10000"},
		{"sweep burst", "sweep: {burst: {concurrency: [100000]}}",
			"sweep.burst.concurrency: 100000; expected concurrency values from 1 to 10000"},
		{"burst repeat", "sweep: {burst: {repeat: 10001}}", "sweep.burst.repeat=10001; expected from 1 to 10000"},
		{"sweep max_concurrency", "sweep: {max_concurrency: 10001}", "sweep.max_concurrency=10001; expected from 0 (no ceiling) to 10000"},
		{"queue_depth_samples", "engine: {live: {queue_depth_samples: 100001}}",
			"engine.live.queue_depth_samples=100001; expected from 2 to 100000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadBytes([]byte(tc.yaml + "\ntargets: [{url: \"http://127.0.0.1:8000\"}]\n"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v; want it to contain %q", err, tc.want)
			}
		})
	}
	// The bounds themselves load.
	if _, err := LoadBytes([]byte("global: {max_line_bytes: 67108864}\nscenarios: [{name: big, input_tokens: 10000000, output_tokens: 1000000}]\ntargets: [{url: \"http://127.0.0.1:8000\"}]\n")); err != nil {
		t.Errorf("the bounds themselves: %v", err)
	}
}

func TestParseScrapeTimeout(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		err  string
	}{
		{"", 0, ""},
		{"10", 10, ""},
		{"0.5", 0.5, ""},
		{"86400", 86400, ""},
		{"NaN", 0, "is not a number"},
		{"nan", 0, "is not a number"},
		{"Inf", 0, "expected a finite number of seconds"},
		{"+Inf", 0, "expected a finite number of seconds"},
		{"-Inf", 0, "expected a finite number of seconds"},
		{"0", 0, "expected a finite number of seconds"},
		{"-1", 0, "expected a finite number of seconds"},
		{"86401", 0, "expected a finite number of seconds"},
		{"1e300", 0, "expected a finite number of seconds"},
		{"ten", 0, "is not a number"},
		{strings.Repeat("9", 5000), 0, "…"},
	} {
		got, err := ParseScrapeTimeout(tc.in)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("ParseScrapeTimeout(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseScrapeTimeout(%.20q) = %v, %v; want an error with %q", tc.in, got, err, tc.err)
		case err != nil && !strings.Contains(err.Error(), "X-Prometheus-Scrape-Timeout-Seconds"):
			t.Errorf("error does not name the header: %v", err)
		}
	}
}

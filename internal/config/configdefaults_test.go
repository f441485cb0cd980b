package config

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestConfigurationDefaults fails when a default in CONFIGURATION.md's tables is not the one the
// code fills in: every row `| `path` | <type> | `value` | … |` whose default cell is one backticked
// value is compared with that path in the effective config, as `slaprobe check-config` prints it.
// Rows whose default is prose (none, all, a list written out) are not compared.
func TestConfigurationDefaults(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "CONFIGURATION.md"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := LoadBytes([]byte("targets:\n  - name: a\n    url: http://127.0.0.1:1\n"))
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := yaml.Unmarshal([]byte(c.Redacted()), &tree); err != nil {
		t.Fatal(err)
	}
	effective := map[string]string{}
	flattenDefaults(tree, "", effective)

	rowRE := regexp.MustCompile("(?m)^\\| `([a-z_]+(?:\\.[a-z_0-9]+)+)` \\| [^|]+ \\| `([^`]+)`(?: \\([^)|]*\\))? \\|")
	compared := 0
	for _, m := range rowRE.FindAllStringSubmatch(string(doc), -1) {
		path, want := m[1], m[2]
		got, ok := effective[path]
		if !ok || strings.Contains(want, "…") { // a ladder written short
			continue
		}
		compared++
		if got != want && !sameNumber(got, want) {
			t.Errorf("CONFIGURATION.md gives %s the default `%s`; the code fills in %s (as check-config prints it)", path, want, got)
		}
	}
	if compared < 40 {
		t.Fatalf("compared only %d defaults: the table or the walk changed shape", compared)
	}
	t.Logf("%d defaults compared", compared)
}

func sameNumber(a, b string) bool {
	x, errA := strconv.ParseFloat(a, 64)
	y, errB := strconv.ParseFloat(b, 64)
	return errA == nil && errB == nil && x == y
}

// flattenDefaults records every scalar and every list of scalars under a mapping, by dotted path,
// as flow YAML prints them (`[a, b]`). Lists of mappings (targets, scenarios) are not defaults.
func flattenDefaults(v any, path string, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := k
			if path != "" {
				p = path + "." + k
			}
			flattenDefaults(e, p, out)
		}
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			if _, ok := e.(map[string]any); ok {
				return
			}
			parts = append(parts, fmt.Sprint(e))
		}
		out[path] = "[" + strings.Join(parts, ", ") + "]"
	case nil:
		out[path] = `""`
	default:
		out[path] = fmt.Sprint(x)
	}
}

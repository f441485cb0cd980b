// Package grafana validates slaprobe's dashboards against Grafana's own schema types, those of the
// Grafana Foundation SDK, in a module of its own so that the main module does not depend on them.
// No Grafana runs here: this is the closest check of what Grafana would load.
//
// Run: cd test/grafana && go test ./... (make test does).
package grafana

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// openFields are paths (array indexes removed) where Grafana's schema is open and the SDK has no type:
// a Prometheus annotation keeps its query at the top level of the annotation (Grafana's AnnotationQuery
// takes data-source-specific fields there; the SDK models only the built-in Grafana annotation's).
var openFields = map[string]bool{
	".annotations.list.expr":        true,
	".annotations.list.step":        true,
	".annotations.list.titleFormat": true,
	".annotations.list.textFormat":  true,
}

// minSchemaVersion is the dashboard schema of Grafana 10.3 to 11, the one the pinned SDK models.
const minSchemaVersion = 39

// TestDashboardsMatchGrafanaSchema decodes every dashboard into the SDK's types, with each panel's
// options and field config decoded by its plugin's types, and requires that nothing is lost: a field
// the schema does not know, or of the wrong type, fails. The SDK's decoders ignore unknown fields, so
// strictness comes from encoding the result again and finding every field of the file in it.
func TestDashboardsMatchGrafanaSchema(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	files, err := filepath.Glob(filepath.Join("..", "..", "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in ../../dashboards (%v)", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var d dashboard.Dashboard
			if err := json.Unmarshal(raw, &d); err != nil {
				t.Fatalf("decode as a Grafana dashboard: %v", err)
			}
			if d.SchemaVersion < minSchemaVersion {
				t.Errorf("schemaVersion %d, want at least %d", d.SchemaVersion, minSchemaVersion)
			}
			for _, p := range d.Panels {
				if p.Panel != nil && p.Panel.Options == nil {
					t.Errorf("panel %q (%s): options not decoded by the %s plugin's types", str(p.Panel.Title), p.Panel.Type, p.Panel.Type)
				}
			}
			again, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			var orig, round any
			if err := json.Unmarshal(raw, &orig); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(again, &round); err != nil {
				t.Fatal(err)
			}
			var lost []string
			compare("", orig, round, &lost)
			sort.Strings(lost)
			for _, l := range lost {
				if openFields[indexRE.ReplaceAllString(l, "")] {
					continue
				}
				t.Errorf("not in Grafana's schema (dropped or changed by decoding): %s", l)
			}
		})
	}
}

var indexRE = regexp.MustCompile(`\[\d+\]`)

func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// compare reports every path of a whose value b lacks or holds differently. Empty values (null, "",
// false, 0, [], {}) may be missing from b: the SDK omits them when encoding.
func compare(path string, a, b any, lost *[]string) {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			*lost = append(*lost, fmt.Sprintf("%s: object became %T", path, b))
			return
		}
		for k, v := range av {
			w, ok := bv[k]
			if !ok {
				if !empty(v) {
					*lost = append(*lost, path+"."+k)
				}
				continue
			}
			compare(path+"."+k, v, w, lost)
		}
	case []any:
		bv, ok := b.([]any)
		if !ok || len(bv) != len(av) {
			*lost = append(*lost, fmt.Sprintf("%s: array of %d became %v", path, len(av), short(b)))
			return
		}
		for i := range av {
			compare(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i], lost)
		}
	default:
		if !reflect.DeepEqual(a, b) && !(empty(a) && b == nil) {
			*lost = append(*lost, fmt.Sprintf("%s: %v became %v", path, short(a), short(b)))
		}
	}
}

func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case bool:
		return !x
	case float64:
		return x == 0
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

func short(v any) string {
	s := fmt.Sprint(v)
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return strings.ReplaceAll(s, "\n", " ")
}

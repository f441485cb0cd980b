package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// configField is one yaml key of the config types, as a path: `global.jitter`,
// `targets[].url`, `scenarios[].thresholds.ttft`.
type configField struct {
	path   string
	goType string // the Go type, for the failure message
	owner  string // the Go struct and field that declare it
}

const ownModule = "github.com/slaprobe/slaprobe/"

// configFields walks t by reflection and returns the path of every yaml key: nested structs
// of this module are walked (inline ones merged into their parent), slices add "[]" and maps
// of structs "<name>". A struct of another module (promcfg.HTTPClientConfig) or one with no
// yaml-tagged field (NewTokens, written as a number or a range) is one value. A field of the
// same type as an earlier sibling (warm, the older name of conversation) is its key alone.
func configFields(t reflect.Type, prefix string) []configField {
	var out []configField
	seen := map[reflect.Type]string{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		ft := f.Type
		if slices.Contains(strings.Split(opts, ","), "inline") {
			out = append(out, configFields(deref(ft), prefix)...)
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		path := prefix + name
		out = append(out, configField{path: path, goType: ft.String(), owner: t.Name() + "." + f.Name})
		if _, dup := seen[ft]; dup {
			continue
		}
		seen[ft] = path
		et, suffix := deref(ft), ""
		for et.Kind() == reflect.Slice || et.Kind() == reflect.Map {
			if et.Kind() == reflect.Slice {
				suffix += "[]"
			} else {
				suffix += ".<name>"
			}
			et = deref(et.Elem())
		}
		if walkable(et) {
			out = append(out, configFields(et, path+suffix+".")...)
		}
	}
	return out
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// walkable: a struct of this module with at least one yaml-tagged field.
func walkable(t reflect.Type) bool {
	if t.Kind() != reflect.Struct || !strings.HasPrefix(t.PkgPath(), ownModule) {
		return false
	}
	for i := 0; i < t.NumField(); i++ {
		if _, ok := t.Field(i).Tag.Lookup("yaml"); ok {
			return true
		}
	}
	return false
}

// TestConfigurationDocumented fails when a yaml key of the config types is missing from
// CONFIGURATION.md, or when CONFIGURATION.md names a key that no longer exists. A key is
// documented when its path appears in backticks, as in a row `| `global.jitter` | … |`.
func TestConfigurationDocumented(t *testing.T) {
	const docPath = "CONFIGURATION.md"
	b, err := os.ReadFile(filepath.Join("..", "..", docPath))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	fields := configFields(reflect.TypeOf(Config{}), "")
	if len(fields) < 50 {
		t.Fatalf("found only %d config fields by reflection; the walk is broken", len(fields))
	}
	known := map[string]bool{}
	for _, f := range fields {
		known[f.path] = true
		if strings.Contains(doc, "`"+f.path+"`") {
			continue
		}
		section, _, _ := strings.Cut(f.path, ".")
		section = strings.TrimSuffix(section, "[]")
		t.Errorf("%s lacks the config field %s (Go: %s, type %s): add to its \"## `%s`\" section the row\n\t| `%s` | <type> | <default, as `slaprobe check-config` prints it> | <meaning> |",
			docPath, f.path, f.owner, f.goType, section, f.path)
	}
	// The other way: a backticked path under a top-level key that is not a field any more.
	top := map[string]bool{}
	for _, f := range fields {
		first, _, _ := strings.Cut(f.path, ".")
		top[strings.TrimSuffix(first, "[]")] = true
	}
	pathRE := regexp.MustCompile("`([a-z_]+(?:\\[\\])?(?:\\.(?:[a-z_0-9]+|<name>)(?:\\[\\])?)+)`")
	for _, m := range pathRE.FindAllStringSubmatch(doc, -1) {
		first, _, _ := strings.Cut(m[1], ".")
		if !top[strings.TrimSuffix(first, "[]")] || known[m[1]] {
			continue
		}
		t.Errorf("%s names %s, which is not a field of the config types any more: remove or rename it", docPath, m[1])
	}
	if testing.Verbose() {
		for _, f := range fields {
			fmt.Println(f.path, f.goType)
		}
	}
}

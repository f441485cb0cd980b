package config

import (
	"fmt"
	"reflect"
	"strings"
)

// StartOnly lists the settings slaprobe reads once, at start (by YAML
// path; a section stands for every setting in it): the engine scrape pool
// and live signals, the NVML reader and energy signals, the trace receivers
// and exporter, and the histograms' bucket layout. A reload that changes
// one of them keeps the running value until the next restart, and says so
// (StartOnlyChanges). Everything else follows a reload.
var StartOnly = []string{"global.classic_histogram_buckets", "engine", "power", "tracing"}

// StartOnlyChanges lists the start-only settings (leaf paths such as
// tracing.receiver_web_config_file) whose value in loaded differs from
// running, the config the process started with. Empty when a restart would
// change nothing.
func StartOnlyChanges(running, loaded *Config) []string {
	if running == nil || loaded == nil {
		return nil
	}
	var out []string
	for _, p := range StartOnly {
		a, b := fieldAt(reflect.ValueOf(running).Elem(), p), fieldAt(reflect.ValueOf(loaded).Elem(), p)
		if !a.IsValid() || !b.IsValid() {
			panic(fmt.Sprintf("config.StartOnly names %q, which is not a config field", p))
		}
		out = diffPaths(a, b, p, out)
	}
	return out
}

// fieldAt finds the field at a dotted YAML path; invalid when there is none.
func fieldAt(v reflect.Value, path string) reflect.Value {
	for _, name := range strings.Split(path, ".") {
		f, ok := fieldByYAML(v, name)
		if !ok {
			return reflect.Value{}
		}
		v = f
	}
	return v
}

func fieldByYAML(v reflect.Value, name string) (reflect.Value, bool) {
	if v.Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := strings.Split(f.Tag.Get("yaml"), ",")
		if len(tag) > 1 && tag[1] == "inline" {
			if sub, ok := fieldByYAML(v.Field(i), name); ok {
				return sub, true
			}
			continue
		}
		if tag[0] == name || (tag[0] == "" && strings.EqualFold(f.Name, name)) {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

// diffPaths appends the paths of the leaves where a and b differ: struct
// fields are followed, anything else (lists, maps, scalars) compared whole.
func diffPaths(a, b reflect.Value, path string, out []string) []string {
	if a.Kind() != reflect.Struct || a.Type() != b.Type() || !hasYAMLFields(a.Type()) {
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			out = append(out, path)
		}
		return out
	}
	t := a.Type()
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
		if !(len(tag) > 1 && tag[1] == "inline") {
			name := tag[0]
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			sub = path + "." + name
		}
		out = diffPaths(a.Field(i), b.Field(i), sub, out)
	}
	return out
}

// hasYAMLFields tells a config section (followed field by field) from a
// struct value such as a time (compared whole).
func hasYAMLFields(t reflect.Type) bool {
	for i := range t.NumField() {
		if _, ok := t.Field(i).Tag.Lookup("yaml"); ok {
			return true
		}
	}
	return false
}

package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestTestEnvDocumented fails when a SLAPROBE_ environment variable named in the code (Go files,
// scripts, the Makefile) is missing from docs/testing.md's table, written there as `NAME` or `NAME=…`.
func TestTestEnvDocumented(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "testing.md"))
	if err != nil {
		t.Fatal(err)
	}
	nameRE := regexp.MustCompile(`SLAPROBE_[A-Z0-9_]*[A-Z0-9]`)
	where := map[string]string{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".tools", "node_modules", "docs", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".sh") && d.Name() != "Makefile" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, n := range nameRE.FindAllString(string(b), -1) {
			if _, ok := where[n]; !ok {
				rel, _ := filepath.Rel(root, path)
				where[n] = rel
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(where) < 10 {
		t.Fatalf("found only %d SLAPROBE_ variables in the code; the scan is broken", len(where))
	}
	var names []string
	for n := range where {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if !regexp.MustCompile("`" + n + "[`=]").Match(doc) {
			t.Errorf("docs/testing.md does not list %s (used in %s): add it to the table \"Environment variables the tests read\" as | `%s` | <what it does> |", n, where[n], n)
		}
	}
}

package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestFlagsDocumented fails when a flag of a command is missing from the "Command-line flags"
// section of CONFIGURATION.md (written there as `--name`), or when the section names a flag that
// no command has.
func TestFlagsDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "CONFIGURATION.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Command-line flags\n")
	if !ok {
		t.Fatal(`CONFIGURATION.md: no "## Command-line flags" section`)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	model := newCLI(io.Discard, io.Discard).app.Model()
	known := map[string]bool{}
	for _, f := range model.Flags {
		known[f.Name] = true
	}
	for _, c := range model.Commands {
		for _, f := range c.Flags {
			known[f.Name] = true
		}
	}
	// The other way: a flag the section names that no command has any more.
	for _, m := range regexp.MustCompile("`--([a-z0-9.-]+)").FindAllStringSubmatch(section, -1) {
		if !known[m[1]] {
			t.Errorf("CONFIGURATION.md names --%s, which no command has: remove or rename it", m[1])
		}
	}
	check := func(command string, name string) {
		if !strings.Contains(section, "`--"+name+"`") {
			t.Errorf("CONFIGURATION.md lacks the flag --%s of %s: add a row | `--%s` | <default> | <meaning> | to the flags table of %s under \"## Command-line flags\"",
				name, command, name, command)
		}
	}
	for _, f := range model.Flags {
		if !f.Hidden && !strings.HasPrefix(f.Name, "help-") {
			check("every command", f.Name)
		}
	}
	for _, c := range model.Commands {
		for _, f := range c.Flags {
			if !f.Hidden && !strings.HasPrefix(f.Name, "help-") {
				check("`slaprobe "+c.FullCommand+"`", f.Name)
			}
		}
	}
}

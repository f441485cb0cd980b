package docs

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/slaprobe/slaprobe/test/testproc"
)

const module = "github.com/slaprobe/slaprobe/"

// graphLine is one package of the graph block in docs/architecture.md.
type graphLine struct {
	pkg     string
	imports []string
	line    int // 1-based line in the file
}

// parseGraph reads the ```graph block of architecture.md. Its format: a line that starts with a
// package path, " → ", then the packages of ours it imports (space or comma separated); an
// indented line continues the imports of the line above; "#" starts a comment.
func parseGraph(doc string) ([]graphLine, error) {
	var out []graphLine
	in := false
	sc := bufio.NewScanner(strings.NewReader(doc))
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		switch {
		case !in && strings.TrimSpace(text) == "```graph":
			in = true
			continue
		case !in:
			continue
		case strings.HasPrefix(text, "```"):
			if len(out) == 0 {
				return nil, fmt.Errorf("the ```graph block is empty")
			}
			return out, nil
		}
		if i := strings.Index(text, "#"); i >= 0 {
			text = text[:i]
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		fields := func(s string) []string {
			return strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' })
		}
		if text[0] == ' ' || text[0] == '\t' {
			if len(out) == 0 {
				return nil, fmt.Errorf("line %d: an indented line continues a package's imports, but no package comes before it", n)
			}
			out[len(out)-1].imports = append(out[len(out)-1].imports, fields(text)...)
			continue
		}
		pkg, imports, ok := strings.Cut(text, "→")
		if !ok {
			return nil, fmt.Errorf("line %d: %q: expected \"<package> → <imports>\"", n, sc.Text())
		}
		out = append(out, graphLine{pkg: strings.TrimSpace(pkg), imports: fields(imports), line: n})
	}
	return nil, fmt.Errorf("no ```graph block (or it is not closed)")
}

// realGraph runs go list over the module's packages and keeps the imports of ours.
func realGraph(t *testing.T, root string) map[string][]string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goBin); err != nil {
			t.Skip("no go command on PATH or in GOROOT: install Go (https://go.dev/dl/) to check the package graph")
		}
	}
	testproc.SeesTree()
	cmd := exec.Command(goBin, "list", "-f", `{{.ImportPath}}: {{join .Imports " "}}`, "./...")
	cmd.Dir = root
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	graph := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(outb)), "\n") {
		pkg, imps, _ := strings.Cut(l, ":")
		ours := []string{}
		for _, imp := range strings.Fields(imps) {
			if strings.HasPrefix(imp, module) {
				ours = append(ours, strings.TrimPrefix(imp, module))
			}
		}
		slices.Sort(ours)
		graph[strings.TrimPrefix(pkg, module)] = ours
	}
	return graph
}

func graphLineFor(pkg string, imports []string) string {
	return strings.TrimSpace(pkg + " → " + strings.Join(imports, " "))
}

// TestArchitectureGraph checks the package graph in docs/architecture.md against the imports of
// the module's non-test packages, as go list gives them: every package is listed once with exactly
// the packages of ours it imports, and no arrow points up (a package lists only packages below it).
func TestArchitectureGraph(t *testing.T) {
	root := filepath.Join("..", "..")
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := parseGraph(string(b))
	if err != nil {
		t.Fatalf("docs/architecture.md: %v", err)
	}
	real := realGraph(t, root)
	pos := map[string]int{}
	for i, g := range doc {
		if _, dup := pos[g.pkg]; dup {
			t.Errorf("docs/architecture.md:%d: %s is listed twice; remove this line", g.line, g.pkg)
		}
		pos[g.pkg] = i
	}
	for _, g := range doc {
		imps, ok := real[g.pkg]
		if !ok {
			t.Errorf("docs/architecture.md:%d: %s is not a package of the module (go list ./...); remove its line", g.line, g.pkg)
			continue
		}
		got := slices.Clone(g.imports)
		slices.Sort(got)
		if !slices.Equal(got, imps) {
			var add, drop []string
			for _, p := range imps {
				if !slices.Contains(got, p) {
					add = append(add, p)
				}
			}
			for _, p := range got {
				if !slices.Contains(imps, p) {
					drop = append(drop, p)
				}
			}
			t.Errorf("docs/architecture.md:%d: %s imports %v, not %v (add %v, drop %v); change its line (and its continuation lines) to:\n\t%s",
				g.line, g.pkg, imps, got, add, drop, graphLineFor(g.pkg, imps))
		}
		for _, p := range imps {
			if j, ok := pos[p]; ok && j < pos[g.pkg] {
				t.Errorf("docs/architecture.md:%d: %s imports %s, which is listed above it (line %d): an arrow points up; move the line of %s below that of %s, or break the import",
					g.line, g.pkg, p, doc[j].line, p, g.pkg)
			}
		}
	}
	var missing []string
	for p := range real {
		if _, ok := pos[p]; !ok {
			missing = append(missing, p)
		}
	}
	slices.Sort(missing)
	for _, p := range missing {
		// Suggest a place: below the last listed package that imports it.
		after := ""
		for _, g := range doc {
			if slices.Contains(real[g.pkg], p) {
				after = g.pkg
			}
		}
		where := "at the top of the block (nothing listed imports it)"
		if after != "" {
			where = "below the line of " + after + " (the last listed package that imports it) and above the packages it imports"
		}
		t.Errorf("docs/architecture.md: package %s is missing from the package graph; add, %s, the line:\n\t%s",
			p, where, graphLineFor(p, real[p]))
	}
}

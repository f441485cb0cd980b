package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// slug is GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors lists the heading anchors of a Markdown file (outside code blocks), with GitHub's
// -1, -2 suffixes for repeated headings.
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inCode := false
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, "```") {
			inCode = !inCode
			continue
		}
		if inCode || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimLeft(l, "#")
		if !strings.HasPrefix(h, " ") {
			continue
		}
		s := slug(strings.ReplaceAll(h, "`", ""))
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

var (
	mdLinkRE  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	repoURLRE = regexp.MustCompile(`github\.com/slaprobe/slaprobe/blob/main/([A-Za-z0-9_./-]+\.md)(#[A-Za-z0-9_-]+)?`)
)

// TestDocLinks checks every relative link of README.md, CONFIGURATION.md and docs/*.md, and every
// link to this repository's Markdown files from the alert rules and manifests (runbook_url): the
// file exists and so does the heading its #anchor names.
func TestDocLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	docs = append(docs, filepath.Join(root, "README.md"), filepath.Join(root, "CONFIGURATION.md"))
	cache := map[string]map[string]bool{}
	check := func(from, target string) {
		path, anchor, _ := strings.Cut(target, "#")
		file := filepath.Join(root, path)
		b, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("%s links to %s, which does not exist", from, target)
			return
		}
		if anchor == "" || !strings.HasSuffix(path, ".md") {
			return
		}
		if cache[file] == nil {
			cache[file] = anchors(string(b))
		}
		if !cache[file][anchor] {
			t.Errorf("%s links to %s: %s has no heading with the anchor #%s (keep the heading, or change the link)", from, target, path, anchor)
		}
	}
	for _, d := range docs {
		b, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, d)
		for _, m := range mdLinkRE.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if strings.HasPrefix(target, "#") {
				target = rel + target
			} else {
				target = filepath.ToSlash(filepath.Join(filepath.Dir(rel), target))
			}
			check(rel, target)
		}
	}
	// runbook_url and other absolute links into the repository's docs.
	for _, glob := range []string{"alerts/*.yml", "deploy/kubernetes/*.yaml", "deploy/helm/slaprobe/templates/*.yaml", "dashboards/*.json"} {
		files, _ := filepath.Glob(filepath.Join(root, glob))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(root, f)
			for _, m := range repoURLRE.FindAllStringSubmatch(string(b), -1) {
				check(rel, m[1]+m[2])
			}
		}
	}
}

// TestReadmeFrontPage: the README stays a front page (at most 15 KB), names the two commands
// literally and links every page of docs/ and CONFIGURATION.md, so that each topic can be found from it.
func TestReadmeFrontPage(t *testing.T) {
	root := filepath.Join("..", "..")
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	// A front page is read whole; reference material belongs on the page of its topic.
	if limit := 15000; len(b) > limit {
		t.Errorf("README.md is %d bytes, over the front page's %d: move reference material to CONFIGURATION.md or docs/", len(b), limit)
	}
	for _, want := range []string{"go run ./cmd/slaprobe demo", "make test"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md does not show the command %q", want)
		}
	}
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	pages = append(pages, filepath.Join(root, "CONFIGURATION.md"))
	for _, p := range pages {
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if !strings.Contains(readme, "]("+rel+")") {
			t.Errorf("README.md does not link %s: add a row | <topic> | [%s](%s) | to its \"Where each topic lives\" table", rel, rel, rel)
		}
	}
}

// TestDocsInProportion: docs/ stays a reference a user can read, 200 KB of Markdown at most; how a
// figure was reached goes in a commit message, not in docs/.
func TestDocsInProportion(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/*.md (%v)", err)
	}
	total := 0
	for _, p := range pages {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		total += int(fi.Size())
	}
	if limit := 200_000; total > limit {
		t.Errorf("docs/*.md hold %d bytes, over %d: tighten wording or move stories to commit messages", total, limit)
	}
}

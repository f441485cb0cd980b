// Command testsummary reads `go test -json` on its standard input and prints what go test prints
// without -json: a line for each package, and the whole output of the tests that failed. It also
// takes out the lines that testproc.Quiet prints when make test asks it to (EnvQuietDefer and
// EnvQuietLog set to "-") and appends them to the files -defer and -held name. Because go test
// replays a cached result's output, the timing checks a cached package deferred are listed too.
// With -why, it appends to that file a short account of each failed test: the last lines it logged
// (the first line of each t.Log or t.Error, repeats folded), which make test prints again at its
// end, where a reader of only the last lines of its output (a CI page) sees them; a failure's own
// message is often followed by long logs that cleanups print (an engine's log tail).
//
//	go test -json ./... | testsummary -defer deferred.tsv -held quiet.tsv -why why.txt
//
// It exits 1 when a package or a test failed, 2 when it could not write a file.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/slaprobe/slaprobe/test/testproc"
)

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail
	Test       string
	Output     string
}

type line struct{ test, text string }

type pkgState struct {
	lines  []line
	failed map[string]bool
	held   []string
}

type summary struct {
	out        io.Writer
	deferF     io.Writer
	heldF      io.Writer
	whyF       io.Writer
	pkgs       map[string]*pkgState
	anyFailure bool
}

func (s *summary) pkg(name string) *pkgState {
	p := s.pkgs[name]
	if p == nil {
		p = &pkgState{failed: map[string]bool{}}
		s.pkgs[name] = p
	}
	return p
}

func (s *summary) handle(raw string) error {
	var e event
	if !strings.HasPrefix(raw, "{") || json.Unmarshal([]byte(raw), &e) != nil {
		_, err := fmt.Fprintln(s.out, raw) // not go test -json: a build error, a tool's own line
		return err
	}
	switch e.Action {
	case "build-output":
		_, err := fmt.Fprint(s.out, e.Output)
		return err
	case "build-fail":
		s.anyFailure = true
		return nil
	case "output":
		text := e.Output
		if rest, ok := strings.CutPrefix(text, testproc.QuietMarkDefer+"\t"); ok {
			_, err := fmt.Fprint(s.deferF, rest)
			return err
		}
		p := s.pkg(e.Package)
		if rest, ok := strings.CutPrefix(text, testproc.QuietMarkHeld+"\t"); ok {
			p.held = append(p.held, strings.TrimSuffix(rest, "\n"))
			return nil
		}
		p.lines = append(p.lines, line{e.Test, text})
	case "fail":
		s.anyFailure = true
		if e.Test != "" {
			s.pkg(e.Package).failed[e.Test] = true
			return nil
		}
		return s.end(e.Package, true)
	case "pass", "skip":
		if e.Test == "" {
			return s.end(e.Package, false)
		}
	}
	return nil
}

// end prints a package's result: its own lines (go test's "ok" or "FAIL" line, a panic), and, when
// it failed, the output of each test that failed, in the order it came, or of every test when none
// is named as failed (the binary's exit status failed the package: whatever it printed may say why).
func (s *summary) end(name string, failed bool) error {
	p := s.pkg(name)
	delete(s.pkgs, name)
	all := failed && len(p.failed) == 0
	cached := false
	for _, l := range p.lines {
		if l.test == "" && strings.Contains(l.text, "(cached)") {
			cached = true
		}
		if !failed && l.test == "" && l.text == "PASS\n" || strings.HasPrefix(l.text, "=== ") {
			continue // go test without -json prints neither
		}
		if l.test == "" || failed && (all || p.failed[l.test]) {
			if _, err := fmt.Fprint(s.out, l.text); err != nil {
				return err
			}
		}
	}
	if failed {
		if err := s.why(name, p); err != nil {
			return err
		}
	}
	for _, h := range p.held {
		c := ""
		if cached {
			c = "cached"
		}
		if _, err := fmt.Fprintf(s.heldF, "%s\t%s\n", h, c); err != nil {
			return err
		}
	}
	return nil
}

// logLine is the first line of a t.Log or t.Error: go test indents it and names the file and line.
var logLine = regexp.MustCompile(`^\s+[^\s:]+\.go:\d+: `)

const (
	whyLines = 6   // the lines -why keeps of each failed test
	whyWidth = 300 // the characters it keeps of each line
)

// why appends to -why's file, for each test of the package that failed (in the order each first logged), its
// name and the last whyLines lines it logged, a run of equal lines folded into one with its count.
func (s *summary) why(name string, p *pkgState) error {
	type folded struct {
		text string
		n    int
	}
	logged := map[string][]folded{}
	var order []string
	for _, l := range p.lines {
		if !p.failed[l.test] || !logLine.MatchString(l.text) {
			continue
		}
		if _, ok := logged[l.test]; !ok {
			order = append(order, l.test)
		}
		text := strings.TrimSpace(l.text)
		if r := []rune(text); len(r) > whyWidth {
			text = string(r[:whyWidth]) + "…"
		}
		f := logged[l.test]
		if len(f) > 0 && f[len(f)-1].text == text {
			f[len(f)-1].n++
			continue
		}
		logged[l.test] = append(f, folded{text, 1})
	}
	for _, test := range order {
		if _, err := fmt.Fprintf(s.whyF, "%s %s\n", name, test); err != nil {
			return err
		}
		f := logged[test]
		for _, l := range f[max(0, len(f)-whyLines):] {
			n := ""
			if l.n > 1 {
				n = fmt.Sprintf(" (%d times)", l.n)
			}
			if _, err := fmt.Fprintf(s.whyF, "    %s%s\n", l.text, n); err != nil {
				return err
			}
		}
	}
	return nil
}

func open(path string) (io.Writer, func() error, error) {
	if path == "" {
		return io.Discard, func() error { return nil }, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	return f, f.Close, nil
}

func main() {
	deferPath := flag.String("defer", "", "append the timing checks deferred to make test's quiet pass (package dir, test, class) to this file")
	heldPath := flag.String("held", "", "append the timing checks that held the quiet cores (name, asked, got, done, cores, \"cached\" when go test replayed the result) to this file")
	whyPath := flag.String("why", "", "append each failed test's name and the last lines it logged to this file")
	flag.Parse()
	failed, err := run(os.Stdin, os.Stdout, files{*deferPath, *heldPath, *whyPath})
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// files are the paths of the files testsummary appends to ("" for none).
type files struct{ deferred, held, why string }

// run reads in to its end and says whether a package or a test failed.
func run(in io.Reader, out io.Writer, paths files) (failed bool, err error) {
	var ws [3]io.Writer
	for i, path := range []string{paths.deferred, paths.held, paths.why} {
		w, closeW, err := open(path)
		if err != nil {
			return false, err
		}
		defer closeW()
		ws[i] = w
	}
	s := &summary{out: out, deferF: ws[0], heldF: ws[1], whyF: ws[2], pkgs: map[string]*pkgState{}}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		if err := s.handle(sc.Text()); err != nil {
			return false, err
		}
	}
	if err := sc.Err(); err != nil {
		return false, err
	}
	for name := range s.pkgs { // go test ended without a result for it (killed)
		s.anyFailure = true
		if err := s.end(name, true); err != nil {
			return false, err
		}
	}
	return s.anyFailure, nil
}

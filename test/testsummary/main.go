// Command testsummary reads `go test -json` on its standard input and prints what go test prints
// without -json: a line for each package, and the whole output of the tests that failed. It also
// takes out the lines that testproc.Quiet prints when make test asks it to (EnvQuietDefer and
// EnvQuietLog set to "-") and appends them to the files -defer and -held name. Because go test
// replays a cached result's output, the timing checks a cached package deferred are listed too.
//
//	go test -json ./... | testsummary -defer deferred.tsv -held quiet.tsv
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
	flag.Parse()
	failed, err := run(os.Stdin, os.Stdout, *deferPath, *heldPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// run reads in to its end and says whether a package or a test failed.
func run(in io.Reader, out io.Writer, deferPath, heldPath string) (failed bool, err error) {
	d, closeD, err := open(deferPath)
	if err != nil {
		return false, err
	}
	defer closeD()
	h, closeH, err := open(heldPath)
	if err != nil {
		return false, err
	}
	defer closeH()
	s := &summary{out: out, deferF: d, heldF: h, pkgs: map[string]*pkgState{}}
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

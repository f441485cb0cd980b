package engine

// This file holds the bounds of a /metrics read: the page's size, and the
// filter that passes the text parser only the families slaprobe reads, so
// that a page full of other families (or a hostile one) is never built in
// memory.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/slaprobe/slaprobe/prober"
)

// maxBodyBytes bounds what one scrape reads. A vLLM /metrics page is tens of
// KiB; a page this large is a misconfigured URL or a hostile server, not an
// engine.
const maxBodyBytes = 4 << 20

// maxLineBytes bounds one line of a family slaprobe reads; longer lines of
// other families are skipped without being held.
const maxLineBytes = 64 << 10

// maxOtherNames bounds the names of left-out families remembered for
// NoEngineError.
const maxOtherNames = 4096

// ErrPageTooLarge means the /metrics page was longer than maxBodyBytes.
var ErrPageTooLarge = fmt.Errorf("metrics page longer than %d bytes; an engine's page is tens of KiB: check metrics_url", maxBodyBytes)

// sampleSuffixes are the suffixes a histogram's or summary's samples add
// to its family name (histOf also reads untyped _sum and _count).
var sampleSuffixes = []string{"_bucket", "_sum", "_count"}

// otherSuffixes are the suffixes of the samples of a family left out.
var otherSuffixes = []string{"_bucket", "_sum", "_count", "_total", "_created"}

// wantedName reports whether a family or sample name belongs to a family
// slaprobe reads.
func wantedName(name string) bool {
	if wanted[name] {
		return true
	}
	for _, s := range sampleSuffixes {
		if b, ok := strings.CutSuffix(name, s); ok && wanted[b] {
			return true
		}
	}
	return false
}

// capReader fails with ErrPageTooLarge once more than left bytes came.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, ErrPageTooLarge
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return 0, ErrPageTooLarge
	}
	return n, err
}

// pageFilter passes on the lines of the families slaprobe reads (their
// HELP, TYPE and samples) and drops every other line as it streams,
// remembering only which engine prefixes it saw and a bounded set of the
// other families' names.
type pageFilter struct {
	br  *bufio.Reader
	out []byte // the rest of the line being passed on (in br's buffer)
	err error

	prefixes map[string]bool     // engine prefixes seen on any family
	other    map[string]struct{} // names of families left out, at most maxOtherNames
}

func newPageFilter(r io.Reader) *pageFilter {
	return &pageFilter{br: bufio.NewReaderSize(r, maxLineBytes), prefixes: map[string]bool{}, other: map[string]struct{}{}}
}

func (f *pageFilter) Read(p []byte) (int, error) {
	for len(f.out) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		f.next()
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	return n, nil
}

// next reads one line and keeps it in out if it is wanted. The line stays
// in br's buffer: Read drains out before next reads again.
func (f *pageFilter) next() {
	line, err := f.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		name := lineName(line)
		if f.keep(name) {
			f.err = fmt.Errorf("a line of %s is longer than %d bytes", clipName(name), maxLineBytes)
			return
		}
		for err == bufio.ErrBufferFull {
			_, err = f.br.ReadSlice('\n')
		}
		f.err = err
		return
	}
	if len(line) > 0 && f.keep(lineName(line)) {
		f.out = line
	}
	f.err = err
}

// keep reports whether the line of name is passed on, and notes the names
// of those that are not.
func (f *pageFilter) keep(name string) bool {
	if name == "" {
		return false // a blank line, a plain comment, a quoted name: nothing read there
	}
	for _, fl := range flavors {
		if strings.HasPrefix(name, fl.prefix) {
			f.prefixes[fl.prefix] = true
		}
	}
	if wantedName(name) {
		return true
	}
	if len(f.other) < maxOtherNames {
		if len(name) > 256 {
			name = name[:256]
		}
		if _, ok := f.other[name]; !ok && !f.hasBase(name) {
			f.other[strings.Clone(name)] = struct{}{}
		}
	}
	return false
}

// hasBase reports whether name is a sample of a family already noted.
func (f *pageFilter) hasBase(name string) bool {
	for _, s := range otherSuffixes {
		if b, ok := strings.CutSuffix(name, s); ok {
			if _, ok := f.other[b]; ok {
				return true
			}
		}
	}
	return false
}

// noEngine is the NoEngineError of a page with no engine family.
func (f *pageFilter) noEngine(kept []string) *NoEngineError {
	names := kept
	for n := range f.other {
		names = append(names, n)
	}
	return noEngineErrorOf(names)
}

// lineName is the family or sample name a line of text exposition is
// about: the name after "# HELP" or "# TYPE", or the sample's name. Other
// comments, blank lines and quoted (UTF-8) names give "". Only the name is
// copied out of the line.
func lineName(line []byte) string {
	l := bytes.TrimLeft(trimEOL(line), " \t")
	if len(l) > 0 && l[0] == '#' {
		kw, rest := nextField(l[1:])
		if string(kw) != "HELP" && string(kw) != "TYPE" {
			return ""
		}
		name, _ := nextField(rest)
		return string(name)
	}
	if i := bytes.IndexAny(l, "{ \t"); i >= 0 {
		l = l[:i]
	}
	return string(l)
}

// nextField splits off the first blank-separated field of b.
func nextField(b []byte) (field, rest []byte) {
	b = bytes.TrimLeft(b, " \t")
	if i := bytes.IndexAny(b, " \t"); i >= 0 {
		return b[:i], b[i:]
	}
	return b, nil
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

func clipName(n string) string {
	if len(n) > maxSeenName {
		n = strings.ToValidUTF8(n[:maxSeenName], "") + "…"
	}
	return fmt.Sprintf("%q", n)
}

// noEngineErrorOf is the NoEngineError of a page whose families are names.
func noEngineErrorOf(names []string) *NoEngineError {
	sort.Strings(names)
	e := &NoEngineError{Total: len(names)}
	for _, n := range names[:min(len(names), maxSeenFamilies)] {
		if len(n) > maxSeenName {
			n = strings.ToValidUTF8(n[:maxSeenName], "") + "…"
		}
		e.Seen = append(e.Seen, n)
	}
	return e
}

// noRedirect is client (http.DefaultClient when nil) made to follow no
// redirect; the copy shares its transport.
func noRedirect(client *http.Client) *http.Client {
	if client == nil {
		client = http.DefaultClient
	}
	c := *client
	c.CheckRedirect = prober.NoRedirect
	return &c
}

// redirectError is the error of a 3xx answer (never followed), naming its
// Location; nil for any other status. It drains a little of the body.
func redirectError(resp *http.Response) error {
	if resp.StatusCode < 300 || resp.StatusCode > 399 {
		return nil
	}
	return prober.ReadHTTPError(resp.StatusCode, resp.Header, io.LimitReader(resp.Body, 4096))
}

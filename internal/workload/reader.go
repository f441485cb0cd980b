package workload

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fastjson"
)

// MaxLineBytes bounds one line of a JSON lines trace: a Mooncake line lists
// one id per 512 prompt tokens, so even a million-token prompt is far below.
const MaxLineBytes = 16 << 20

// Request is one request of a trace.
type Request struct {
	// At is when the request came: for a trace with dates, the time since
	// the first request read; else the trace's own number in its unit.
	At     time.Duration
	Input  int // prompt tokens
	Output int // answer tokens
	// HashIDs are the ids of the prompt's blocks of Spec.Block() tokens, in
	// prompt order; requests with the same id at the same place share that
	// block and every block before it. The slice is reused by the next call
	// to Next: copy it to keep it.
	HashIDs []uint64
	Line    int // the line of the trace it was read from (1-based)
}

// Reader reads a trace one request at a time, in memory bounded by
// MaxLineBytes whatever the trace's size.
type Reader struct {
	spec  Spec
	name  string
	cr    *countingReader
	close func() error
	size  int64 // the file's size; 0 when unknown

	skipped int // rows a filter (Models, LogTypes) left out

	// JSON lines
	br   *bufio.Reader
	jp   fastjson.Parser
	line int
	buf  []byte

	// CSV
	cv     *csv.Reader
	col    csvColumns
	filter func(rec []string) bool

	first   time.Time // the first dated request
	hasDate bool
}

type csvColumns struct{ ts, in, out, ids int }

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Open opens the trace spec names.
func Open(spec Spec) (*Reader, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	f, err := os.Open(spec.Path)
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	var size int64
	if st, err := f.Stat(); err == nil {
		size = st.Size()
	}
	r, err := NewReader(f, spec.Path, spec)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.size, r.close = size, f.Close
	return r, nil
}

// NewReader reads a trace from rd; name is what errors call it.
func NewReader(rd io.Reader, name string, spec Spec) (*Reader, error) {
	if spec.Path == "" {
		spec.Path = name
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	r := &Reader{spec: spec, name: name, cr: &countingReader{r: rd}, close: func() error { return nil }}
	switch spec.Format {
	case FormatMooncake, FormatJSONL:
		r.br = bufio.NewReaderSize(r.cr, 64<<10)
	default:
		if err := r.openCSV(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Close closes the trace file.
func (r *Reader) Close() error { return r.close() }

// BytesRead is how much of the trace has been read.
func (r *Reader) BytesRead() int64 { return r.cr.n }

// Size is the trace file's size, 0 when unknown.
func (r *Reader) Size() int64 { return r.size }

// Skipped is how many rows the spec's filters left out so far.
func (r *Reader) Skipped() int { return r.skipped }

// Next reads the next request into req; it returns io.EOF after the last.
func (r *Reader) Next(req *Request) error {
	if r.cv != nil {
		return r.nextCSV(req)
	}
	return r.nextJSON(req)
}

func (r *Reader) bad(line int, field, value, want string) error {
	return &ParseError{File: r.name, Line: line, Field: field, Value: value, Want: want}
}

// readLine returns the next line without its end, or io.EOF.
func (r *Reader) readLine() ([]byte, error) {
	r.buf = r.buf[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		if len(r.buf)+len(chunk) > MaxLineBytes {
			return nil, r.bad(r.line+1, "", string(chunk[:min(len(chunk), 80)]), fmt.Sprintf("a line of at most %d bytes", MaxLineBytes))
		}
		r.buf = append(r.buf, chunk...)
		switch {
		case err == nil:
			r.line++
			return bytes.TrimRight(r.buf, "\r\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(r.buf) == 0 {
				return nil, io.EOF
			}
			r.line++
			return r.buf, nil
		default:
			return nil, fmt.Errorf("workload: %s: line %d: %w", r.name, r.line+1, err)
		}
	}
}

// jsonFields are the names of a JSON lines trace's fields.
func (r *Reader) jsonFields() Columns {
	if r.spec.Format == FormatMooncake {
		return Columns{Timestamp: "timestamp", TimeUnit: UnitMilliseconds, Input: "input_length", Output: "output_length", HashIDs: "hash_ids"}
	}
	return r.spec.Columns
}

func (r *Reader) nextJSON(req *Request) error {
	cols := r.jsonFields()
	for {
		line, err := r.readLine()
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		v, err := r.jp.ParseBytes(line)
		if err != nil {
			return r.bad(r.line, "", string(line), "a JSON object ("+err.Error()+")")
		}
		if v.Type() != fastjson.TypeObject {
			return r.bad(r.line, "", string(line), "a JSON object, one request per line")
		}
		*req = Request{Line: r.line, HashIDs: req.HashIDs[:0]}
		if cols.Timestamp != "" {
			f := v.Get(cols.Timestamp)
			if f == nil {
				return r.bad(r.line, cols.Timestamp, "", "a timestamp (field missing)")
			}
			if req.At, err = r.jsonTime(f, cols); err != nil {
				return err
			}
		}
		if req.Input, err = r.jsonInt(v, cols.Input, 0); err != nil {
			return err
		}
		if req.Output, err = r.jsonInt(v, cols.Output, 0); err != nil {
			return err
		}
		if cols.HashIDs != "" {
			f := v.Get(cols.HashIDs)
			if f == nil {
				if r.spec.Format == FormatMooncake {
					return r.bad(r.line, cols.HashIDs, "", "an array of block ids (field missing)")
				}
				return nil
			}
			arr, err := f.Array()
			if err != nil {
				return r.bad(r.line, cols.HashIDs, clip(f), "an array of non-negative integer block ids")
			}
			for _, e := range arr {
				id, err := e.Uint64()
				if err != nil {
					return r.bad(r.line, cols.HashIDs, clip(e), "non-negative integer block ids")
				}
				req.HashIDs = append(req.HashIDs, id)
			}
			if err := r.checkBlocks(req, cols.HashIDs); err != nil {
				return err
			}
		}
		return nil
	}
}

// checkBlocks rejects more block ids than the prompt has blocks.
func (r *Reader) checkBlocks(req *Request, field string) error {
	b := r.spec.Block()
	if need := (req.Input + b - 1) / b; len(req.HashIDs) > need {
		return r.bad(req.Line, field, fmt.Sprintf("%d ids", len(req.HashIDs)),
			fmt.Sprintf("at most %d ids for a prompt of %d tokens (one per %d-token block)", need, req.Input, b))
	}
	return nil
}

func clip(v *fastjson.Value) string { return string(v.MarshalTo(nil)) }

func (r *Reader) jsonInt(v *fastjson.Value, field string, least int) (int, error) {
	f := v.Get(field)
	if f == nil {
		return 0, r.bad(r.line, field, "", "a token count (field missing)")
	}
	var n int
	switch f.Type() {
	case fastjson.TypeNumber:
		x, err := f.Float64()
		if err != nil || x != math.Trunc(x) || x > math.MaxInt32 {
			return 0, r.bad(r.line, field, clip(f), "a whole number of tokens")
		}
		n = int(x)
	case fastjson.TypeString:
		s, _ := f.StringBytes()
		x, err := strconv.Atoi(strings.TrimSpace(string(s)))
		if err != nil {
			return 0, r.bad(r.line, field, string(s), "a whole number of tokens")
		}
		n = x
	default:
		return 0, r.bad(r.line, field, clip(f), "a whole number of tokens")
	}
	if n < least {
		return 0, r.bad(r.line, field, strconv.Itoa(n), fmt.Sprintf("a token count >= %d", least))
	}
	return n, nil
}

func (r *Reader) jsonTime(f *fastjson.Value, cols Columns) (time.Duration, error) {
	switch f.Type() {
	case fastjson.TypeNumber:
		x, _ := f.Float64()
		return r.numTime(x, clip(f), cols)
	case fastjson.TypeString:
		s, _ := f.StringBytes()
		return r.textTime(string(s), cols)
	}
	return 0, r.bad(r.line, cols.Timestamp, clip(f), timeWant(cols.TimeUnit))
}

func timeWant(unit string) string {
	switch unit {
	case UnitDatetime:
		return "a date and time such as 2023-11-16 18:17:03.9799600"
	case UnitMilliseconds:
		return "a non-negative number of milliseconds"
	case UnitMicroseconds:
		return "a non-negative number of microseconds"
	}
	return "a non-negative number of seconds"
}

func (r *Reader) textTime(s string, cols Columns) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if cols.TimeUnit == UnitDatetime {
		return r.dateTime(s, cols.Timestamp)
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, r.bad(r.line, cols.Timestamp, s, timeWant(cols.TimeUnit))
	}
	return r.numTime(x, s, cols)
}

func (r *Reader) numTime(x float64, text string, cols Columns) (time.Duration, error) {
	unit := time.Second
	switch cols.TimeUnit {
	case UnitMilliseconds:
		unit = time.Millisecond
	case UnitMicroseconds:
		unit = time.Microsecond
	case UnitDatetime:
		return 0, r.bad(r.line, cols.Timestamp, text, timeWant(UnitDatetime))
	}
	d := x * float64(unit)
	if math.IsNaN(d) || d < 0 || d > float64(math.MaxInt64/2) {
		return 0, r.bad(r.line, cols.Timestamp, text, timeWant(cols.TimeUnit))
	}
	return time.Duration(d), nil
}

// dateLayouts are the date forms a datetime timestamp may take: the Azure
// traces' "2023-11-16 18:17:03.9799600", with or without a zone, and RFC 3339.
var dateLayouts = []string{
	"2006-01-02 15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999 -0700",
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999",
}

func (r *Reader) dateTime(s, field string) (time.Duration, error) {
	for _, l := range dateLayouts {
		t, err := time.Parse(l, s)
		if err != nil {
			continue
		}
		if !r.hasDate {
			r.first, r.hasDate = t, true
		}
		d := t.Sub(r.first)
		if d < 0 {
			return 0, r.bad(r.line, field, s, "a time no earlier than the first request's ("+r.first.Format(dateLayouts[0])+")")
		}
		return d, nil
	}
	return 0, r.bad(r.line, field, s, timeWant(UnitDatetime))
}

// csvHeader is the columns a named CSV format must have.
func (r *Reader) csvFields() (Columns, []string) {
	switch r.spec.Format {
	case FormatAzure:
		return Columns{Timestamp: "TIMESTAMP", TimeUnit: UnitDatetime, Input: "ContextTokens", Output: "GeneratedTokens"}, nil
	case FormatBurstGPT:
		return Columns{Timestamp: "Timestamp", TimeUnit: UnitSeconds, Input: "Request tokens", Output: "Response tokens"}, []string{"Model", "Log Type"}
	}
	return r.spec.Columns, nil
}

func (r *Reader) openCSV() error {
	r.cv = csv.NewReader(r.cr)
	r.cv.ReuseRecord = true
	r.cv.TrimLeadingSpace = true
	head, err := r.cv.Read()
	if errors.Is(err, io.EOF) {
		return r.bad(1, "", "", "a header line naming the columns (the file is empty)")
	}
	if err != nil {
		return r.csvErr(err)
	}
	idx := map[string]int{}
	for i, h := range head {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		idx[h] = i
	}
	cols, extra := r.csvFields()
	find := func(name string) (int, error) {
		if name == "" {
			return -1, nil
		}
		i, ok := idx[name]
		if !ok {
			return 0, r.bad(1, "header", strings.Join(head, ","), fmt.Sprintf("a column named %q (%s format)", name, r.spec.Format))
		}
		return i, nil
	}
	if r.col.ts, err = find(cols.Timestamp); err != nil {
		return err
	}
	if r.col.in, err = find(cols.Input); err != nil {
		return err
	}
	if r.col.out, err = find(cols.Output); err != nil {
		return err
	}
	if r.col.ids, err = find(cols.HashIDs); err != nil {
		return err
	}
	for _, name := range extra {
		if _, err := find(name); err != nil {
			return err
		}
	}
	if r.spec.Format == FormatBurstGPT {
		model, logType := idx["Model"], idx["Log Type"]
		r.filter = func(rec []string) bool {
			return allowed(r.spec.Models, rec[model]) && allowed(r.spec.LogTypes, rec[logType])
		}
	}
	return nil
}

func allowed(list []string, v string) bool {
	if len(list) == 0 {
		return true
	}
	for _, a := range list {
		if strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(v)) {
			return true
		}
	}
	return false
}

func (r *Reader) csvErr(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return r.bad(pe.Line, "", "", "a CSV row ("+pe.Err.Error()+")")
	}
	return fmt.Errorf("workload: %s: %w", r.name, err)
}

func (r *Reader) nextCSV(req *Request) error {
	cols, _ := r.csvFields()
	for {
		rec, err := r.cv.Read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return io.EOF
			}
			return r.csvErr(err)
		}
		line, _ := r.cv.FieldPos(0)
		r.line = line
		if r.filter != nil && !r.filter(rec) {
			r.skipped++
			continue
		}
		*req = Request{Line: line, HashIDs: req.HashIDs[:0]}
		if r.col.ts >= 0 {
			if req.At, err = r.textTime(rec[r.col.ts], cols); err != nil {
				return err
			}
		}
		if req.Input, err = r.csvInt(rec[r.col.in], cols.Input, 0); err != nil {
			return err
		}
		if req.Output, err = r.csvInt(rec[r.col.out], cols.Output, 0); err != nil {
			return err
		}
		if r.col.ids >= 0 {
			for _, f := range strings.FieldsFunc(rec[r.col.ids], func(c rune) bool { return c == ' ' || c == ';' || c == '[' || c == ']' || c == ',' }) {
				id, err := strconv.ParseUint(f, 10, 64)
				if err != nil {
					return r.bad(line, cols.HashIDs, rec[r.col.ids], "non-negative integer block ids separated by spaces or semicolons")
				}
				req.HashIDs = append(req.HashIDs, id)
			}
			if err := r.checkBlocks(req, cols.HashIDs); err != nil {
				return err
			}
		}
		return nil
	}
}

func (r *Reader) csvInt(s, field string, least int) (int, error) {
	s = strings.TrimSpace(s)
	n, err := strconv.Atoi(s)
	if err != nil || n > math.MaxInt32 {
		return 0, r.bad(r.line, field, s, "a whole number of tokens")
	}
	if n < least {
		return 0, r.bad(r.line, field, s, fmt.Sprintf("a token count >= %d", least))
	}
	return n, nil
}

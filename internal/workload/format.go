package workload

import (
	"fmt"
	"strings"
)

// Format names a trace format.
type Format string

// The formats Open reads.
const (
	FormatMooncake Format = "mooncake" // JSON lines: timestamp (ms), input_length, output_length, hash_ids
	FormatAzure    Format = "azure"    // CSV: TIMESTAMP, ContextTokens, GeneratedTokens
	FormatBurstGPT Format = "burstgpt" // CSV: Timestamp, Model, Request tokens, Response tokens, Total tokens, Log Type
	FormatCSV      Format = "csv"      // CSV with a header, columns named by Spec.Columns
	FormatJSONL    Format = "jsonl"    // JSON lines, fields named by Spec.Columns
)

// Formats lists the formats, in the order docs and errors name them.
var Formats = []Format{FormatMooncake, FormatAzure, FormatBurstGPT, FormatCSV, FormatJSONL}

// DefaultBlockTokens is the size of a Mooncake prompt block: each hash id
// stands for 512 prompt tokens.
const DefaultBlockTokens = 512

// Time units of Columns.TimeUnit.
const (
	UnitSeconds      = "s"
	UnitMilliseconds = "ms"
	UnitMicroseconds = "us"
	UnitDatetime     = "datetime" // "2006-01-02 15:04:05.9999999", optionally with a zone; RFC 3339 too
)

// Columns names the fields of a generic csv or jsonl trace. Timestamp and
// HashIDs may be empty: without a timestamp every request comes at 0 (a
// trace that can be drawn from but not replayed); without hash ids no
// request shares a prefix.
type Columns struct {
	Timestamp string `yaml:"timestamp,omitempty"`
	TimeUnit  string `yaml:"time_unit,omitempty"` // s, ms, us or datetime; default s
	Input     string `yaml:"input_tokens,omitempty"`
	Output    string `yaml:"output_tokens,omitempty"`
	HashIDs   string `yaml:"hash_ids,omitempty"` // jsonl: an array of integers; csv: integers separated by spaces or semicolons
}

// Spec says how to read one trace file.
type Spec struct {
	Path   string `yaml:"trace,omitempty"`
	Format Format `yaml:"format,omitempty"`
	// Columns maps a csv or jsonl trace's fields; the named formats have
	// their publisher's columns and ignore it.
	Columns Columns `yaml:"columns,omitempty"`
	// Models and LogTypes keep only the BurstGPT rows whose Model (ChatGPT,
	// GPT-4) and Log Type (Conversation log, API log) are listed; empty
	// keeps all.
	Models   []string `yaml:"models,omitempty"`
	LogTypes []string `yaml:"log_types,omitempty"`
	// BlockTokens is how many prompt tokens one hash id stands for; 0 means
	// DefaultBlockTokens.
	BlockTokens int `yaml:"block_tokens,omitempty"`
}

// Block is the spec's block size in tokens.
func (s Spec) Block() int {
	if s.BlockTokens > 0 {
		return s.BlockTokens
	}
	return DefaultBlockTokens
}

// Validate reports the first problem with s, naming the field and value.
func (s Spec) Validate() error {
	if s.Path == "" {
		return fmt.Errorf("workload: trace is empty; expected the path of a trace file")
	}
	known := false
	for _, f := range Formats {
		known = known || s.Format == f
	}
	if !known {
		return fmt.Errorf("workload: format=%q; expected one of %s", s.Format, formatList())
	}
	if s.BlockTokens < 0 {
		return fmt.Errorf("workload: block_tokens=%d; expected a positive token count (0 = %d)", s.BlockTokens, DefaultBlockTokens)
	}
	if (len(s.Models) > 0 || len(s.LogTypes) > 0) && s.Format != FormatBurstGPT {
		return fmt.Errorf("workload: models/log_types with format=%q; expected format burstgpt (they filter BurstGPT's Model and Log Type columns)", s.Format)
	}
	if s.Format == FormatCSV || s.Format == FormatJSONL {
		c := s.Columns
		if c.Input == "" || c.Output == "" {
			return fmt.Errorf("workload: format=%s needs columns.input_tokens and columns.output_tokens (got %q and %q); expected the names of the trace's prompt and answer length fields",
				s.Format, c.Input, c.Output)
		}
		switch c.TimeUnit {
		case "", UnitSeconds, UnitMilliseconds, UnitMicroseconds, UnitDatetime:
		default:
			return fmt.Errorf("workload: columns.time_unit=%q; expected s, ms, us or datetime", c.TimeUnit)
		}
	} else if s.Columns != (Columns{}) {
		return fmt.Errorf("workload: columns with format=%q; expected format csv or jsonl (the %s format has fixed columns)", s.Format, s.Format)
	}
	return nil
}

func formatList() string {
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}

// ParseError is a bad line of a trace: the file, the line (1-based), the
// field, the value found and what was expected.
type ParseError struct {
	File  string
	Line  int
	Field string
	Value string
	Want  string
}

func (e *ParseError) Error() string {
	v := e.Value
	if len(v) > 80 {
		v = v[:80] + "…"
	}
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %q: expected %s", e.File, e.Line, v, e.Want)
	}
	return fmt.Sprintf("%s:%d: field %s=%q: expected %s", e.File, e.Line, e.Field, v, e.Want)
}

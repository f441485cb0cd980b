package workload

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"time"
)

// GenOptions shapes a synthetic trace. Lengths are drawn log-uniformly
// between their bounds; arrivals are a Poisson process at Rate.
type GenOptions struct {
	Requests int
	Seed     uint64
	Rate     float64 // requests per second; 0 means 1

	InputMin, InputMax   int // prompt tokens; 0 means 128 and 32768
	OutputMin, OutputMax int // answer tokens; 0 means 16 and 1024

	// Prefixes shared documents of PrefixBlocks blocks each; a request
	// starts with one of them (chosen uniformly) with probability
	// SharedProb, and its prompt is then at least one block longer than the
	// document. Block ids are written for mooncake and jsonl only.
	Prefixes     int
	PrefixBlocks int
	SharedProb   float64
	Block        int // tokens per block; 0 means DefaultBlockTokens

	// FailProb is BurstGPT's share of failed rows (Response tokens 0).
	FailProb float64
	// Start dates the first request of an azure trace; zero means 2023-11-16 18:17:03 UTC.
	Start time.Time
}

// GenericColumns are the columns Generate writes for FormatCSV and
// FormatJSONL (hash ids only in JSON lines).
var GenericColumns = Columns{Timestamp: "arrival_s", TimeUnit: UnitSeconds, Input: "prompt_tokens", Output: "completion_tokens", HashIDs: "block_ids"}

func (o *GenOptions) defaults() {
	if o.Rate <= 0 {
		o.Rate = 1
	}
	if o.InputMin <= 0 {
		o.InputMin = 128
	}
	if o.InputMax < o.InputMin {
		o.InputMax = max(32768, o.InputMin)
	}
	if o.OutputMin <= 0 {
		o.OutputMin = 16
	}
	if o.OutputMax < o.OutputMin {
		o.OutputMax = max(1024, o.OutputMin)
	}
	if o.Block <= 0 {
		o.Block = DefaultBlockTokens
	}
	if o.Start.IsZero() {
		o.Start = time.Date(2023, 11, 16, 18, 17, 3, 0, time.UTC)
	}
}

func logUniform(rng *rand.Rand, lo, hi int) int {
	if hi <= lo {
		return lo
	}
	return int(math.Round(math.Exp(math.Log(float64(lo)) + rng.Float64()*(math.Log(float64(hi))-math.Log(float64(lo))))))
}

// Generate writes a synthetic trace of o.Requests requests in format f, in
// the publisher's own columns (the generic formats use GenericColumns). The
// same options always write the same bytes.
func Generate(w io.Writer, f Format, o GenOptions) error {
	o.defaults()
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	bw := bufio.NewWriterSize(w, 256<<10)
	switch f {
	case FormatAzure:
		bw.WriteString("TIMESTAMP,ContextTokens,GeneratedTokens\n")
	case FormatBurstGPT:
		bw.WriteString("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n")
	case FormatCSV:
		fmt.Fprintf(bw, "%s,%s,%s\n", GenericColumns.Timestamp, GenericColumns.Input, GenericColumns.Output)
	case FormatMooncake, FormatJSONL:
	default:
		return fmt.Errorf("workload: generate: format=%q; expected one of %s", f, formatList())
	}
	nextID := uint64(o.Prefixes * o.PrefixBlocks) // ids below are the shared documents'
	var at float64                                // seconds
	var line []byte
	var ids []uint64
	for i := 0; i < o.Requests; i++ {
		if i > 0 {
			at += rng.ExpFloat64() / o.Rate
		}
		in := logUniform(rng, o.InputMin, o.InputMax)
		out := logUniform(rng, o.OutputMin, o.OutputMax)
		ids = ids[:0]
		if o.Prefixes > 0 && o.PrefixBlocks > 0 && rng.Float64() < o.SharedProb {
			doc := rng.IntN(o.Prefixes)
			for b := 0; b < o.PrefixBlocks; b++ {
				ids = append(ids, uint64(doc*o.PrefixBlocks+b))
			}
			in = max(in, o.PrefixBlocks*o.Block+1+rng.IntN(o.Block))
		}
		for len(ids)*o.Block < in {
			ids = append(ids, nextID)
			nextID++
		}
		line = line[:0]
		switch f {
		case FormatMooncake, FormatJSONL:
			names := Columns{Timestamp: "timestamp", Input: "input_length", Output: "output_length", HashIDs: "hash_ids"}
			ts := strconv.AppendInt(nil, int64(math.Round(at*1000)), 10)
			if f == FormatJSONL {
				names = GenericColumns
				ts = strconv.AppendFloat(nil, at, 'f', 3, 64)
			}
			line = append(line, `{"`...)
			line = append(line, names.Timestamp...)
			line = append(line, `": `...)
			line = append(line, ts...)
			line = append(line, `, "`...)
			line = append(line, names.Input...)
			line = append(line, `": `...)
			line = strconv.AppendInt(line, int64(in), 10)
			line = append(line, `, "`...)
			line = append(line, names.Output...)
			line = append(line, `": `...)
			line = strconv.AppendInt(line, int64(out), 10)
			line = append(line, `, "`...)
			line = append(line, names.HashIDs...)
			line = append(line, `": [`...)
			for j, id := range ids {
				if j > 0 {
					line = append(line, ", "...)
				}
				line = strconv.AppendUint(line, id, 10)
			}
			line = append(line, "]}\n"...)
		case FormatAzure:
			t := o.Start.Add(time.Duration(at * float64(time.Second)))
			line = t.AppendFormat(line, "2006-01-02 15:04:05.0000000")
			line = append(line, ',')
			line = strconv.AppendInt(line, int64(in), 10)
			line = append(line, ',')
			line = strconv.AppendInt(line, int64(out), 10)
			line = append(line, '\n')
		case FormatBurstGPT:
			model, logType := "ChatGPT", "Conversation log"
			if rng.Float64() < 0.2 {
				model = "GPT-4"
			}
			if rng.Float64() < 0.3 {
				logType = "API log"
			}
			if rng.Float64() < o.FailProb {
				out = 0
			}
			line = strconv.AppendInt(line, int64(math.Round(at)), 10)
			line = append(line, ',')
			line = append(line, model...)
			line = append(line, ',')
			line = strconv.AppendInt(line, int64(in), 10)
			line = append(line, ',')
			line = strconv.AppendInt(line, int64(out), 10)
			line = append(line, ',')
			line = strconv.AppendInt(line, int64(in+out), 10)
			line = append(line, ',')
			line = append(line, logType...)
			line = append(line, '\n')
		case FormatCSV:
			line = strconv.AppendFloat(line, at, 'f', 3, 64)
			line = append(line, ',')
			line = strconv.AppendInt(line, int64(in), 10)
			line = append(line, ',')
			line = strconv.AppendInt(line, int64(out), 10)
			line = append(line, '\n')
		}
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}

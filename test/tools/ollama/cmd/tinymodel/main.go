// Command tinymodel writes a tiny llama-architecture GGUF model with random weights, for running a
// real inference engine (Ollama, that is llama.cpp's ggml on CPU) in slaprobe's tests where no
// weights can be downloaded.
//
// The model is a real transformer (token embedding, attention with RoPE, a SwiGLU MLP, RMS norms,
// an output projection) over a byte-level BPE vocabulary learned from a built-in text, so the
// engine tokenizes, prefills and decodes exactly as it would a real model, only much faster.
//
// Random weights end an answer (sample EOS) at random. To control that, one residual dimension
// (pinned) is held at a constant: every token's embedding has the same value there, no layer writes
// to it (its row in each output projection is zero) and no layer reads it (its norm weight is zero).
// The output matrix's column for that dimension is then a per-token bias on the logits: a large
// negative one for EOS, BOS and the byte tokens that are not valid UTF-8 alone means they are never
// sampled; -eos-logit sets EOS's bias instead, so answers end early now and then.
//
// Usage:
//
//	tinymodel -out DIR [-layers 1] [-embd 64] [-ctx 131072] [-vocab 1024] [-eos-logit never|X] [-seed 1]
//
// It writes DIR/tiny.gguf and DIR/Modelfile (FROM the file, a plain template that concatenates the
// messages). `ollama create NAME -f DIR/Modelfile` then serves it.
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ollama/ollama/fs/ggml"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "tinymodel:", err)
		os.Exit(1)
	}
}

type options struct {
	out      string
	layers   int
	embd     int
	heads    int
	ff       int
	ctx      int
	vocab    int
	eosLogit float64 // math.Inf(-1): never
	seed     uint64
}

func run(args []string, stdout io.Writer) error {
	fl := flag.NewFlagSet("tinymodel", flag.ContinueOnError)
	var o options
	var eos string
	fl.StringVar(&o.out, "out", "", "directory to write tiny.gguf and Modelfile into (required)")
	fl.IntVar(&o.layers, "layers", 1, "transformer blocks")
	fl.IntVar(&o.embd, "embd", 64, "embedding length (a multiple of -heads)")
	fl.IntVar(&o.heads, "heads", 4, "attention heads")
	fl.IntVar(&o.ff, "ff", 128, "feed-forward length")
	fl.IntVar(&o.ctx, "ctx", 131072, "context length the model declares")
	fl.IntVar(&o.vocab, "vocab", 1024, "vocabulary size to aim for: 256 bytes, 2 control tokens and learned merges")
	fl.StringVar(&eos, "eos-logit", "never", `EOS's logit bias: "never", or a number (about 0 gives EOS the chance of an average token; 2 ends answers after ~100 tokens on average)`)
	fl.Uint64Var(&o.seed, "seed", 1, "seed of the random weights")
	if err := fl.Parse(args); err != nil {
		return err
	}
	switch {
	case o.out == "":
		return errors.New("-out is required: the directory to write tiny.gguf and Modelfile into")
	case o.layers < 1, o.heads < 1, o.ff < 1, o.ctx < 16:
		return fmt.Errorf("-layers=%d -heads=%d -ff=%d -ctx=%d: layers, heads and ff must be positive, ctx at least 16", o.layers, o.heads, o.ff, o.ctx)
	case o.embd < 8 || o.embd%o.heads != 0 || (o.embd/o.heads)%2 != 0:
		return fmt.Errorf("-embd=%d: expected at least 8, a multiple of -heads=%d with an even head size", o.embd, o.heads)
	case o.vocab < 300:
		return fmt.Errorf("-vocab=%d: expected at least 300 (256 byte tokens, 2 control tokens, some merges)", o.vocab)
	}
	if eos == "never" {
		o.eosLogit = math.Inf(-1)
	} else {
		v, err := strconv.ParseFloat(eos, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf(`-eos-logit=%q: expected "never" or a finite number`, eos)
		}
		o.eosLogit = v
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	path := filepath.Join(o.out, "tiny.gguf")
	n, err := write(path, o)
	if err != nil {
		return err
	}
	modelfile := fmt.Sprintf("FROM %s\nTEMPLATE \"\"\"{{- range .Messages }}{{ .Content }}{{ end }}\"\"\"\n", path)
	if err := os.WriteFile(filepath.Join(o.out, "Modelfile"), []byte(modelfile), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d layers, embedding %d, vocabulary %d, context %d, eos-logit %s\n",
		path, o.layers, o.embd, n, o.ctx, eos)
	return nil
}

// write builds the vocabulary and the weights and writes the GGUF; it returns the vocabulary size.
func write(path string, o options) (int, error) {
	v := buildVocab(o.vocab)
	nv := len(v.tokens)
	rng := rand.New(rand.NewPCG(o.seed, 0x51a9))

	const (
		pinValue   = 4.0   // the pinned dimension's value in every embedding
		weightStd  = 1.0   // the other embedding dimensions
		outStd     = 0.1   // output matrix: small, so the sampled tokens vary
		forbidBias = -60.0 // logit bias of tokens never to be sampled
	)
	d := o.embd - 1 // the pinned dimension
	// After RMS normalisation the pinned dimension is about pinValue / rms, with rms dominated by
	// it; scale the output column so a bias b comes out as about b on the logits.
	rms := math.Sqrt((pinValue*pinValue + float64(d)*weightStd*weightStd) / float64(o.embd))
	norm := pinValue / rms

	gauss := func(n int, std float64) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(rng.NormFloat64() * std)
		}
		return s
	}
	ones := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = 1
		}
		return s
	}
	// zeroRow clears output row r of a [in, out] matrix (in contiguous per output row).
	zeroRow := func(w []float32, in, r int) {
		clear(w[r*in : (r+1)*in])
	}

	embd := gauss(o.embd*nv, weightStd)
	for t := range nv {
		embd[t*o.embd+d] = pinValue
	}
	out := gauss(o.embd*nv, outStd)
	for t := range nv {
		bias := 0.0
		switch {
		case t == v.eos:
			bias = o.eosLogit
			if math.IsInf(bias, -1) {
				bias = forbidBias
			}
		case v.forbidden[t]:
			bias = forbidBias
		}
		out[t*o.embd+d] = float32(bias / norm)
	}

	ts := []*ggml.Tensor{
		tensor("token_embd.weight", embd, o.embd, nv),
		tensor("output_norm.weight", ones(o.embd), o.embd),
		tensor("output.weight", out, o.embd, nv),
	}
	headDim := o.embd / o.heads
	proj := 1 / math.Sqrt(float64(o.embd))
	for l := range o.layers {
		attnNorm, ffnNorm := ones(o.embd), ones(o.embd)
		attnNorm[d], ffnNorm[d] = 0, 0 // no layer reads the pinned dimension
		wo := gauss(o.embd*o.embd, proj)
		zeroRow(wo, o.embd, d) // ... nor writes it
		down := gauss(o.ff*o.embd, 1/math.Sqrt(float64(o.ff)))
		zeroRow(down, o.ff, d)
		p := fmt.Sprintf("blk.%d.", l)
		ts = append(ts,
			tensor(p+"attn_norm.weight", attnNorm, o.embd),
			tensor(p+"attn_q.weight", gauss(o.embd*o.embd, proj), o.embd, o.embd),
			tensor(p+"attn_k.weight", gauss(o.embd*o.embd, proj), o.embd, o.embd),
			tensor(p+"attn_v.weight", gauss(o.embd*o.embd, proj), o.embd, o.embd),
			tensor(p+"attn_output.weight", wo, o.embd, o.embd),
			tensor(p+"ffn_norm.weight", ffnNorm, o.embd),
			tensor(p+"ffn_gate.weight", gauss(o.embd*o.ff, proj), o.embd, o.ff),
			tensor(p+"ffn_up.weight", gauss(o.embd*o.ff, proj), o.embd, o.ff),
			tensor(p+"ffn_down.weight", down, o.ff, o.embd),
		)
	}

	kv := ggml.KV{
		"general.architecture":                   "llama",
		"general.name":                           "slaprobe-tiny",
		"general.file_type":                      uint32(0), // all F32
		"general.alignment":                      uint32(32),
		"llama.context_length":                   uint32(o.ctx),
		"llama.embedding_length":                 uint32(o.embd),
		"llama.block_count":                      uint32(o.layers),
		"llama.feed_forward_length":              uint32(o.ff),
		"llama.attention.head_count":             uint32(o.heads),
		"llama.attention.head_count_kv":          uint32(o.heads),
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"llama.rope.dimension_count":             uint32(headDim),
		"llama.rope.freq_base":                   float32(10000),
		"llama.vocab_size":                       uint32(nv),
		"tokenizer.ggml.model":                   "gpt2",
		"tokenizer.ggml.pre":                     "default",
		"tokenizer.ggml.tokens":                  v.tokens,
		"tokenizer.ggml.token_type":              v.types,
		"tokenizer.ggml.merges":                  v.merges,
		"tokenizer.ggml.bos_token_id":            uint32(v.bos),
		"tokenizer.ggml.eos_token_id":            uint32(v.eos),
		"tokenizer.ggml.add_bos_token":           true,
		"tokenizer.ggml.add_eos_token":           false,
	}
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	if err := ggml.WriteGGUF(f, kv, ts); err != nil {
		f.Close()
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	return nv, f.Close()
}

// f32 writes float32 values little-endian: a tensor's data in GGUF.
type f32 []float32

func (s f32) WriteTo(w io.Writer) (int64, error) {
	b := make([]byte, 4*len(s))
	for i, x := range s {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	n, err := w.Write(b)
	return int64(n), err
}

// tensor is an F32 tensor; shape lists the innermost (contiguous) dimension first.
func tensor(name string, data []float32, shape ...int) *ggml.Tensor {
	sh := make([]uint64, len(shape))
	for i, n := range shape {
		sh[i] = uint64(n)
	}
	return &ggml.Tensor{Name: name, Kind: 0, Shape: sh, WriterTo: f32(data)}
}

// vocab is a byte-level BPE vocabulary in GPT-2's encoding (each byte as a printable rune).
type vocab struct {
	tokens    []string
	types     []int32 // 1 normal, 3 control
	merges    []string
	bos, eos  int
	forbidden map[int]bool // never sampled: control tokens, and bytes that are not text alone
}

func buildVocab(size int) vocab {
	b2u := bytesToUnicode()
	v := vocab{forbidden: map[int]bool{}}
	for b := range 256 {
		v.tokens = append(v.tokens, string(b2u[b]))
		v.types = append(v.types, 1)
		// A lone byte of a multi-byte character is not valid UTF-8, and control characters
		// make poor text: the engine would hold them back or escape them.
		if b >= 0x80 || (b < 0x20 && b != '\n') || b == 0x7f {
			v.forbidden[b] = true
		}
	}
	seen := map[string]bool{}
	for _, t := range v.tokens {
		seen[t] = true
	}
	// Learn merges on the built-in text, pre-split on spaces the way the engine's
	// pre-tokenizer does (a word keeps its leading space).
	var words [][]string
	for _, w := range strings.SplitAfter(corpus, " ") {
		w = strings.TrimSuffix(w, " ")
		if w == "" {
			continue
		}
		w = " " + w
		var sym []string
		for _, b := range []byte(w) {
			sym = append(sym, string(b2u[b]))
		}
		words = append(words, sym)
	}
	for len(v.tokens) < size-2 {
		counts := map[[2]string]int{}
		for _, w := range words {
			for i := 0; i+1 < len(w); i++ {
				counts[[2]string{w[i], w[i+1]}]++
			}
		}
		best, bestN := [2]string{}, 0
		keys := make([][2]string, 0, len(counts))
		for k := range counts {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { // deterministic ties
			if keys[i][0] != keys[j][0] {
				return keys[i][0] < keys[j][0]
			}
			return keys[i][1] < keys[j][1]
		})
		for _, k := range keys {
			if counts[k] > bestN {
				best, bestN = k, counts[k]
			}
		}
		if bestN == 0 {
			break
		}
		merged := best[0] + best[1]
		v.merges = append(v.merges, best[0]+" "+best[1])
		if !seen[merged] {
			seen[merged] = true
			v.tokens = append(v.tokens, merged)
			v.types = append(v.types, 1)
		}
		for i, w := range words {
			var nw []string
			for j := 0; j < len(w); j++ {
				if j+1 < len(w) && w[j] == best[0] && w[j+1] == best[1] {
					nw = append(nw, merged)
					j++
					continue
				}
				nw = append(nw, w[j])
			}
			words[i] = nw
		}
	}
	v.bos = len(v.tokens)
	v.tokens, v.types = append(v.tokens, "<s>"), append(v.types, 3)
	v.eos = len(v.tokens)
	v.tokens, v.types = append(v.tokens, "</s>"), append(v.types, 3)
	v.forbidden[v.bos] = true
	for t, s := range v.tokens {
		if !utf8.ValidString(s) {
			v.forbidden[t] = true
		}
	}
	return v
}

// bytesToUnicode is GPT-2's reversible map from bytes to printable runes.
func bytesToUnicode() [256]rune {
	var m [256]rune
	n := 0
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			m[b] = rune(b)
		} else {
			m[b] = rune(256 + n)
			n++
		}
	}
	return m
}

// corpus is the text the merges are learned from: plain English about the thing being tested.
const corpus = `A language model server answers a stream of requests. Each request carries a prompt,
the server reads the prompt in one pass called prefill, and then it writes the answer one token at a
time in a loop called decode. The time to the first token is what a user waits before anything
appears on the screen, and the time between tokens is how fast the words then come. When many
requests share the server at once, each one gets a smaller slice of the hardware, so every user sees
the answer come more slowly, while the server as a whole writes more tokens per second. A prober sends
small synthetic requests shaped like the real ones and measures what the user would feel, so that the
operators of the service can see a slowdown before their users complain about it. The prompts of
these requests are long documents, retrieved passages, tool schemas and the history of an agent that
works through a task step by step, reading files, calling functions and writing code. The answers
are short chat turns, summaries and code completions. Every number the prober reports is checked
against an independent clock, and the thresholds come from the experience of people who read the
answers as they arrive: under a tenth of a second feels instant, a few seconds feels slow, and more
than ten seconds makes people give up and try again. The server may cut a prompt that is longer than
its context window, end an answer early when the model says it is done, or leave out the endpoints
that count tokens and export metrics. A careful prober notices each of these and says so plainly.`

// Package hostile is the worst inference server slaprobe may be pointed at:
// an http.Handler whose every behaviour is one path prefix, so that one
// server on loopback is many targets. Under each prefix it answers
// /v1/models, /tokenize and /props as an engine does (so a probe gets past
// its calibration), and misbehaves on the API endpoints (/v1/chat/completions,
// /v1/completions, /v1/responses, /v1/messages) and on /metrics:
//
//	/bigchunks/    content chunks of ChunkBytes each, without end (a conversation keeps them)
//	/hugeline/     one content chunk of 4 MiB on one line
//	/noline/       a data line that never ends
//	/headers/      response headers that never end
//	/drip/         one byte a second, without end
//	/gzip/         a gzip bomb (1 GiB of zeros) as the stream, and as /metrics
//	/redirect-X/   307 to Elsewhere on X (models, tokenize, props, chat, metrics); the rest as an engine
//	/ok/           a valid chat stream (the control)
//
// Each misbehaving stream stops after a gibibyte or when the client goes.
// /metrics: under /bigchunks/ a gibibyte of families nobody reads, under
// /hugeline/ a gibibyte of vllm:num_requests_running series (a family
// slaprobe reads), under /noline/ a line that never ends; /redirect-props/
// serves llama.cpp server's page, so that a scraper reads /props too.
//
// It is written for tests (cmd/slaprobe TestAttackHostile and
// TestAttackRedirect); test/hostile/cmd/hostile serves it for a manual run.
package hostile

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Model is the one model the server lists.
const Model = "hostile"

// gib is how much any endless answer sends at most.
const gib = 1 << 30

// Server is the hostile handler.
type Server struct {
	// ChunkBytes is the size of a /bigchunks/ content chunk (default 900 KiB:
	// under slaprobe's 1 MiB line limit, so only an answer cap stops it).
	ChunkBytes int
	// Elsewhere is where /redirect-*/ points (another origin: a second
	// loopback server), e.g. http://127.0.0.1:PORT.
	Elsewhere string
	// Drip is the pause between two bytes of /drip/ (default 1 s).
	Drip time.Duration

	mu   sync.Mutex
	hits map[string]int // requests by prefix and endpoint, e.g. "bigchunks /v1/chat/completions"

	bombOnce sync.Once
	bomb     []byte
}

// Hits returns the requests served by prefix and endpoint.
func (s *Server) Hits() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.hits))
	for k, v := range s.hits {
		out[k] = v
	}
	return out
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	mode, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	rest = "/" + rest
	s.mu.Lock()
	if s.hits == nil {
		s.hits = map[string]int{}
	}
	s.hits[mode+" "+rest]++
	s.mu.Unlock()
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(io.LimitReader(r.Body, 64<<20))
	}

	if what, ok := strings.CutPrefix(mode, "redirect-"); ok && redirects(what, rest) {
		http.Redirect(w, r, s.Elsewhere+r.URL.Path, http.StatusTemporaryRedirect)
		return
	}
	switch rest {
	case "/v1/models":
		models(w, mode)
		return
	case "/tokenize":
		tokenize(w, body)
		return
	case "/props":
		writeJSON(w, map[string]any{"total_slots": 1, "default_generation_settings": map[string]any{"n_ctx": 1 << 20}})
		return
	case "/metrics":
		s.metrics(w, r, mode)
		return
	}
	api := apiOf(rest)
	if api == "" {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Stream bool `json:"stream"`
	}
	if _ = json.Unmarshal(body, &req); !req.Stream {
		// A calibration's max_tokens: 1 request (the Responses and Messages
		// APIs have no /tokenize): its usage, as an engine answers.
		var v any
		_ = json.Unmarshal(body, &v)
		n := words(v, "")
		writeJSON(w, map[string]any{"usage": map[string]any{"prompt_tokens": n, "input_tokens": n, "completion_tokens": 1, "output_tokens": 1}})
		return
	}
	switch mode {
	case "bigchunks":
		chunk := strings.Repeat("a", s.chunkBytes())
		stream(w, r, func(write func(string) bool) {
			for sent := 0; sent < gib && write(contentEvent(api, chunk)); sent += len(chunk) {
			}
		})
	case "hugeline":
		stream(w, r, func(write func(string) bool) { write(contentEvent(api, strings.Repeat("a", 4<<20))) })
	case "noline":
		stream(w, r, func(write func(string) bool) {
			if !write(`data: {"choices":[{"index":0,"delta":{"content":"`) {
				return
			}
			pad := strings.Repeat("a", 64<<10)
			for sent := 0; sent < gib && write(pad); sent += len(pad) {
			}
		})
	case "headers":
		endlessHeaders(w)
	case "drip":
		s.drip(w, r, api)
	case "gzip":
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(s.gzipBomb())
	default: // ok, and the endpoints a redirect-* prefix does not redirect
		okStream(w, r, body)
	}
}

// okStream answers a chat or completions request as an engine does:
// max_tokens chunks of one word, usage counting the prompt's words.
func okStream(w http.ResponseWriter, r *http.Request, body []byte) {
	var req struct {
		MaxTokens int `json:"max_tokens"`
	}
	_ = json.Unmarshal(body, &req)
	var v any
	_ = json.Unmarshal(body, &v)
	n := min(max(req.MaxTokens, 1), 4096)
	stream(w, r, func(write func(string) bool) {
		for range n {
			if !write(contentEvent("chat", "ok ")) {
				return
			}
		}
		write(fmt.Sprintf(`data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d}}`+"\n\n", words(v, ""), n))
		write("data: [DONE]\n\n")
	})
}

func (s *Server) chunkBytes() int {
	if s.ChunkBytes > 0 {
		return s.ChunkBytes
	}
	return 900 << 10
}

// redirects reports whether /redirect-what/ redirects the endpoint rest.
func redirects(what, rest string) bool {
	switch what {
	case "models":
		return rest == "/v1/models"
	case "tokenize":
		return rest == "/tokenize"
	case "props":
		return rest == "/props"
	case "metrics":
		return rest == "/metrics"
	case "chat":
		return apiOf(rest) != ""
	}
	return true
}

func apiOf(path string) string {
	switch path {
	case "/v1/chat/completions":
		return "chat"
	case "/v1/completions":
		return "completions"
	case "/v1/responses":
		return "responses"
	case "/v1/messages":
		return "messages"
	}
	return ""
}

// contentEvent is one SSE event carrying text as output, in api's form.
func contentEvent(api, text string) string {
	t, _ := json.Marshal(text)
	switch api {
	case "completions":
		return `data: {"choices":[{"index":0,"text":` + string(t) + "}]}\n\n"
	case "responses":
		return `data: {"type":"response.output_text.delta","delta":` + string(t) + "}\n\n"
	case "messages":
		return "event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":` + string(t) + "}}\n\n"
	}
	return `data: {"choices":[{"index":0,"delta":{"content":` + string(t) + "}}]}\n\n"
}

// stream answers an SSE stream whose events body writes; write reports
// whether the client still reads.
func stream(w http.ResponseWriter, r *http.Request, body func(write func(string) bool)) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	body(func(s string) bool {
		if r.Context().Err() != nil {
			return false
		}
		if _, err := io.WriteString(w, s); err != nil {
			return false
		}
		return rc.Flush() == nil
	})
}

// endlessHeaders takes the connection and sends a status line and header
// lines without end (a gibibyte at most).
func endlessHeaders(w http.ResponseWriter) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n")
	pad := strings.Repeat("h", 1000)
	for i := 0; i < gib/1024; i++ {
		if _, err := fmt.Fprintf(buf, "X-Pad-%d: %s\r\n", i, pad); err != nil {
			return
		}
		if i%64 == 0 && buf.Flush() != nil {
			return
		}
	}
}

// drip sends a valid stream one byte at a time, s.Drip apart.
func (s *Server) drip(w http.ResponseWriter, r *http.Request, api string) {
	pause := s.Drip
	if pause <= 0 {
		pause = time.Second
	}
	ev := contentEvent(api, strings.Repeat("drip ", 1000))
	stream(w, r, func(write func(string) bool) {
		t := time.NewTicker(pause)
		defer t.Stop()
		for i := 0; ; i = (i + 1) % len(ev) {
			select {
			case <-r.Context().Done():
				return
			case <-t.C:
			}
			if !write(ev[i : i+1]) {
				return
			}
		}
	})
}

// gzipBomb is 1 GiB of zeros, gzipped (about 1 MiB), made once: 1024
// gzip members of 1 MiB of zeros each, one after the other (a valid
// multi-member gzip stream), so that only one MiB is ever compressed.
func (s *Server) gzipBomb() []byte {
	s.bombOnce.Do(func() {
		var m bytes.Buffer
		gz, _ := gzip.NewWriterLevel(&m, gzip.BestCompression)
		_, _ = gz.Write(make([]byte, 1<<20))
		_ = gz.Close()
		s.bomb = bytes.Repeat(m.Bytes(), gib>>20)
	})
	return s.bomb
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request, mode string) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	rc := http.NewResponseController(w)
	endless := func(line func(i int) string) {
		var b strings.Builder
		for sent, i := 0, 0; sent < gib; {
			b.Reset()
			for b.Len() < 64<<10 {
				b.WriteString(line(i))
				i++
			}
			if r.Context().Err() != nil {
				return
			}
			if _, err := io.WriteString(w, b.String()); err != nil {
				return
			}
			sent += b.Len()
		}
		_ = rc.Flush()
	}
	switch mode {
	case "bigchunks":
		endless(func(i int) string {
			return fmt.Sprintf("# TYPE filler_%d_total counter\nfiller_%d_total{pad=\"%064d\"} 1\n", i, i, i)
		})
	case "hugeline":
		_, _ = io.WriteString(w, "# TYPE vllm:num_requests_running gauge\n")
		endless(func(i int) string { return fmt.Sprintf("vllm:num_requests_running{engine=\"%d\"} 1\n", i) })
	case "noline":
		_, _ = io.WriteString(w, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"")
		endless(func(int) string { return "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee" })
	case "gzip":
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(s.gzipBomb())
	case "redirect-props":
		_, _ = io.WriteString(w, "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 0\n"+
			"# TYPE llamacpp:requests_deferred gauge\nllamacpp:requests_deferred 0\n")
	default:
		_, _ = io.WriteString(w, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n"+
			"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 0\n")
	}
}

// models lists Model; under /redirect-props/ without max_model_len, so
// that the prober reads /props for it (as it does for llama.cpp server).
func models(w http.ResponseWriter, mode string) {
	m := map[string]any{"id": Model, "object": "model", "root": Model, "max_model_len": 1 << 20}
	if mode == "redirect-props" {
		delete(m, "max_model_len")
	}
	writeJSON(w, map[string]any{"object": "list", "data": []any{m}})
}

// tokenize counts the words of every string of the request but its model:
// one token a word, which a calibration converges on.
func tokenize(w http.ResponseWriter, body []byte) {
	var v any
	_ = json.Unmarshal(body, &v)
	writeJSON(w, map[string]any{"count": max(1, words(v, "")), "max_model_len": 1 << 20})
}

func words(v any, key string) int {
	switch x := v.(type) {
	case string:
		if key == "model" {
			return 0
		}
		return len(strings.Fields(x))
	case []any:
		n := 0
		for _, e := range x {
			n += words(e, "")
		}
		return n
	case map[string]any:
		n := 0
		for k, e := range x {
			n += words(e, k)
		}
		return n
	}
	return 0
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

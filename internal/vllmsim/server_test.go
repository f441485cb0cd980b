package vllmsim

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestStreamShape(t *testing.T) {
	tests := []struct {
		name   string
		cfg    func(c *Config)
		path   string
		body   map[string]any
		tokens int
		check  func(t *testing.T, res streamResult)
	}{
		{
			name: "chat with usage", path: "/v1/chat/completions", tokens: 12,
			body: chatBody("Say something", 12, nil),
		},
		{
			name: "chat without usage", path: "/v1/chat/completions", tokens: 5,
			body: chatBody("Say something", 5, map[string]any{"stream_options": nil}),
			check: func(t *testing.T, res streamResult) {
				if u := res.finalUsage(); u != nil {
					t.Errorf("usage chunk without include_usage: %+v", u)
				}
			},
		},
		{
			name: "continuous usage", path: "/v1/chat/completions", tokens: 8,
			body: chatBody("Say something", 8, map[string]any{"stream_options": map[string]any{"include_usage": true, "continuous_usage_stats": true}}),
			check: func(t *testing.T, res streamResult) {
				prev := -1
				for _, ev := range res.events {
					if ev.chunk == nil {
						continue
					}
					if ev.chunk.Usage == nil {
						t.Fatalf("chunk without usage: %s", ev.data)
					}
					if ev.chunk.Usage.CompletionTokens < prev {
						t.Errorf("completion_tokens went back: %d after %d", ev.chunk.Usage.CompletionTokens, prev)
					}
					prev = ev.chunk.Usage.CompletionTokens
				}
				if first := res.events[0].chunk.Usage.CompletionTokens; first != 0 {
					t.Errorf("role chunk completion_tokens = %d, want 0", first)
				}
			},
		},
		{
			name: "multi-token chunks", path: "/v1/chat/completions", tokens: 10,
			cfg:  func(c *Config) { c.TokensPerStep = 3 },
			body: chatBody("Say something", 10, map[string]any{"stream_options": map[string]any{"include_usage": true, "continuous_usage_stats": true}}),
			check: func(t *testing.T, res streamResult) {
				// Prefill gives 1 token, then steps of 3: chunks of 1, 3, 3, 3. A handler that
				// lagged (a loaded machine) merges steps into one chunk, so check where chunks
				// end: always after 1 + 3k tokens.
				var per []int
				prev := 0
				multi := false
				for _, c := range res.outputChunks() {
					n := c.Usage.CompletionTokens
					if (n-1)%3 != 0 {
						t.Errorf("a chunk ends after %d tokens; want 1 + 3k (prefill 1, then steps of 3)", n)
					}
					per = append(per, n-prev)
					multi = multi || n-prev >= 3
					prev = n
				}
				if !multi {
					t.Errorf("chunk sizes %v: no multi-token chunk", per)
				}
			},
		},
		{
			name: "reasoning", path: "/v1/chat/completions", tokens: 9,
			cfg:  func(c *Config) { c.ReasoningTokens, c.ReasoningField = 4, ReasoningShortField },
			body: chatBody("Think first", 9, nil),
			check: func(t *testing.T, res streamResult) {
				r, c := CountTokens(res.text("reasoning")), CountTokens(res.text("content"))
				if r != 4 || c != 5 {
					t.Errorf("reasoning/content tokens = %d/%d, want 4/5", r, c)
				}
				first := res.outputChunks()[0].Choices[0].Delta
				if _, ok := first["reasoning"]; !ok {
					t.Errorf("first output delta %v has no reasoning field", first)
				}
			},
		},
		{
			name: "reasoning off by chat_template_kwargs", path: "/v1/chat/completions", tokens: 6,
			cfg: func(c *Config) { c.ReasoningTokens = 4 },
			body: chatBody("No thinking", 6, map[string]any{
				"chat_template_kwargs": map[string]any{"enable_thinking": false},
			}),
			check: func(t *testing.T, res streamResult) {
				if s := res.text("reasoning_content"); s != "" {
					t.Errorf("reasoning_content %q with enable_thinking=false", s)
				}
			},
		},
		{
			name: "role chunk with first token", path: "/v1/chat/completions", tokens: 4,
			cfg:  func(c *Config) { c.RoleChunkEarly = false },
			body: chatBody("Say something", 4, nil),
		},
		{
			name: "completions", path: "/v1/completions", tokens: 7,
			body: map[string]any{
				"prompt": "Once upon a time", "stream": true, "max_tokens": 7, "ignore_eos": true,
				"stream_options": map[string]any{"include_usage": true},
			},
			check: func(t *testing.T, res streamResult) {
				for _, ev := range res.events {
					if ev.chunk != nil && ev.chunk.Object != "text_completion" {
						t.Errorf("object %q, want text_completion", ev.chunk.Object)
					}
				}
			},
		},
		{
			name: "return token ids", path: "/v1/chat/completions", tokens: 5,
			body: chatBody("ids please", 5, map[string]any{"return_token_ids": true}),
			check: func(t *testing.T, res streamResult) {
				n := 0
				for _, c := range res.outputChunks() {
					n += len(c.Choices[0].TokenIDs)
				}
				if n != 5 {
					t.Errorf("token_ids carried %d ids, want 5", n)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fastConfig()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			ts := start(t, cfg)
			res := ts.post(t, tt.path, tt.body, nil)
			if res.status != 200 || res.readErr != nil {
				t.Fatalf("status %d, read error %v, body %s", res.status, res.readErr, res.body)
			}
			chat := tt.path == "/v1/chat/completions"
			// [DONE] last, nothing after it, every other event a chunk with the same id.
			if !res.done || res.events[len(res.events)-1].data != "[DONE]" {
				t.Fatalf("stream does not end with [DONE]: %v", res.events)
			}
			id := res.id()
			wantPrefix := "cmpl-"
			if chat {
				wantPrefix = "chatcmpl-"
			}
			if !strings.HasPrefix(id, wantPrefix) {
				t.Errorf("id %q, want prefix %q", id, wantPrefix)
			}
			for _, ev := range res.events[:len(res.events)-1] {
				if ev.chunk == nil || ev.chunk.ID != id || ev.chunk.Model != cfg.ModelName || ev.chunk.Created == 0 {
					t.Fatalf("bad chunk %s", ev.data)
				}
			}
			// Role-only chunk first (chat), none for completions.
			first := res.events[0].chunk.Choices
			if chat {
				if len(first) != 1 || len(first[0].Delta) != 2 || first[0].Delta["role"] != "assistant" || first[0].Delta["content"] != "" {
					t.Errorf("first chat chunk is not role-only: %s", res.events[0].data)
				}
			} else if len(first) == 1 && first[0].Delta != nil {
				t.Errorf("completions chunk has a delta: %s", res.events[0].data)
			}
			// Output tokens: finish_reason only on the last output chunk.
			out := res.outputChunks()
			for i, c := range out {
				fr := c.Choices[0].FinishReason
				if last := i == len(out)-1; last != (fr != nil) || (last && *fr != "length") {
					t.Errorf("output chunk %d/%d finish_reason %v", i, len(out), fr)
				}
			}
			text := res.text("text", "reasoning_content", "reasoning", "content")
			if n := CountTokens(text); n != tt.tokens {
				t.Errorf("output text has %d tokens, want %d: %q", n, tt.tokens, text)
			}
			tr, ok := ts.e.Trace(id)
			if !ok {
				t.Fatalf("no trace for %s", id)
			}
			if tr.CompletionTokens != tt.tokens || tr.FinishReason != "length" || tr.Status != 200 {
				t.Errorf("trace: completion %d finish %q status %d", tr.CompletionTokens, tr.FinishReason, tr.Status)
			}
			sum := 0
			for _, c := range tr.Chunks {
				sum += c.Tokens
			}
			if sum != tt.tokens || len(tr.Chunks) != len(out) {
				t.Errorf("trace chunks %v carry %d tokens in %d chunks; stream had %d output chunks", tr.Chunks, sum, len(tr.Chunks), len(out))
			}
			if chat && tr.RoleChunkWritten.IsZero() {
				t.Error("trace has no RoleChunkWritten")
			}
			if chat && !cfg.RoleChunkEarly && !tr.RoleChunkWritten.Equal(tr.FirstTokenWritten) {
				t.Errorf("late role chunk written at %v, first token at %v", tr.RoleChunkWritten, tr.FirstTokenWritten)
			}
			// Early: written on its own, before the first token's chunk (a late one is written
			// with it, at the same instant). Not compared with the prefill's duration: on a
			// loaded machine the handler may run only after the prefill step ended.
			if chat && cfg.RoleChunkEarly && !tr.RoleChunkWritten.Before(tr.FirstTokenWritten) {
				t.Errorf("early role chunk written at %v, not before the first token (%v)",
					tr.RoleChunkWritten.Sub(tr.Arrived), tr.FirstTokenWritten.Sub(tr.Arrived))
			}
			if u := res.finalUsage(); u != nil {
				if u.CompletionTokens != tt.tokens || u.PromptTokens != tr.PromptTokens || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
					t.Errorf("usage %+v, trace prompt %d", u, tr.PromptTokens)
				}
				if u.PromptTokensDetails == nil {
					t.Error("usage has no prompt_tokens_details")
				}
			}
			if tt.check != nil {
				tt.check(t, res)
			}
		})
	}
}

func TestNonStreaming(t *testing.T) {
	ts := start(t, fastConfig())
	for _, tc := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/chat/completions", chatBody("hello", 6, map[string]any{"stream": false, "stream_options": nil})},
		{"/v1/completions", map[string]any{"prompt": "hello", "max_tokens": 6, "ignore_eos": true}},
	} {
		res := ts.post(t, tc.path, tc.body, nil)
		if res.status != 200 {
			t.Fatalf("%s: status %d %s", tc.path, res.status, res.body)
		}
		var resp struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Choices []struct {
				Text    string `json:"text"`
				Message struct {
					Role    string `json:"role"`
					Content string `json:"content"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage usage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(res.body), &resp); err != nil {
			t.Fatalf("%s: %v in %s", tc.path, err, res.body)
		}
		text := resp.Choices[0].Text + resp.Choices[0].Message.Content
		if CountTokens(text) != 6 || resp.Usage.CompletionTokens != 6 || resp.Choices[0].FinishReason != "length" {
			t.Errorf("%s: %s", tc.path, res.body)
		}
		tr, ok := ts.e.Trace(resp.ID)
		if !ok || len(tr.Chunks) != 1 || tr.Chunks[0].Tokens != 6 || tr.Stream {
			t.Errorf("%s: trace %+v", tc.path, tr)
		}
	}
}

func TestTokenizeAgreesWithUsage(t *testing.T) {
	cfg := fastConfig()
	cfg.ReasoningTokens = 2 // a thinking model: enable_thinking changes the template
	cfg.DefaultSystemPrompt = "You are a helpful assistant."
	ts := start(t, cfg)
	messages := []map[string]any{
		{"role": "system", "content": "You answer in 3 words."},
		{"role": "user", "content": []map[string]any{{"type": "text", "text": "What's new, 2025?"}}},
	}
	tools := []map[string]any{{"type": "function", "function": map[string]any{"name": "get_time", "parameters": map[string]any{}}}}
	tests := []struct {
		name     string
		tokenize map[string]any
		path     string
		request  map[string]any
	}{
		{
			name:     "chat",
			tokenize: map[string]any{"model": cfg.ModelName, "messages": messages, "add_generation_prompt": true},
			path:     "/v1/chat/completions",
			request:  map[string]any{"messages": messages},
		},
		{
			name:     "chat default system prompt",
			tokenize: map[string]any{"messages": messages[1:]},
			path:     "/v1/chat/completions",
			request:  map[string]any{"messages": messages[1:]},
		},
		{
			name:     "chat with tools and thinking off",
			tokenize: map[string]any{"messages": messages, "tools": tools, "chat_template_kwargs": map[string]any{"enable_thinking": false}},
			path:     "/v1/chat/completions",
			request:  map[string]any{"messages": messages, "tools": tools, "chat_template_kwargs": map[string]any{"enable_thinking": false}},
		},
		{
			name:     "completions",
			tokenize: map[string]any{"model": cfg.ModelName, "prompt": "Count me: 1, 2, 3 and calibration."},
			path:     "/v1/completions",
			request:  map[string]any{"prompt": "Count me: 1, 2, 3 and calibration."},
		},
	}
	counts := map[int]string{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := ts.post(t, "/tokenize", tt.tokenize, nil)
			var tok struct {
				Count       int      `json:"count"`
				MaxModelLen int      `json:"max_model_len"`
				Tokens      []uint32 `json:"tokens"`
			}
			if err := json.Unmarshal([]byte(res.body), &tok); err != nil || res.status != 200 {
				t.Fatalf("tokenize: %d %s", res.status, res.body)
			}
			if tok.Count != len(tok.Tokens) || tok.MaxModelLen != cfg.MaxModelLen {
				t.Errorf("tokenize: %s", res.body)
			}
			req := map[string]any{"max_tokens": 1, "stream": true, "stream_options": map[string]any{"include_usage": true}}
			for k, v := range tt.request {
				req[k] = v
			}
			gen := ts.post(t, tt.path, req, nil)
			u := gen.finalUsage()
			if u == nil || u.PromptTokens != tok.Count {
				t.Fatalf("usage %+v, tokenize count %d", u, tok.Count)
			}
			if other, dup := counts[tok.Count]; dup {
				t.Errorf("%s and %s have the same count %d; the template options changed nothing", tt.name, other, tok.Count)
			}
			counts[tok.Count] = tt.name
		})
	}
	// Without the generation prompt, 5 tokens fewer.
	with := ts.post(t, "/tokenize", map[string]any{"messages": messages}, nil)
	without := ts.post(t, "/tokenize", map[string]any{"messages": messages, "add_generation_prompt": false}, nil)
	var a, b struct{ Count int }
	_ = json.Unmarshal([]byte(with.body), &a)
	_ = json.Unmarshal([]byte(without.body), &b)
	if a.Count-b.Count != generationPrompt {
		t.Errorf("generation prompt adds %d tokens, want %d", a.Count-b.Count, generationPrompt)
	}
}

func TestErrors(t *testing.T) {
	cfg := fastConfig()
	cfg.MaxModelLen = 100
	cfg.KVCacheTokens = 1000
	ts := start(t, cfg)
	tests := []struct {
		name   string
		path   string
		body   any
		header map[string]string
		status int
		typ    string
		msg    string
	}{
		{"unknown model", "/v1/chat/completions", chatBody("hi", 4, map[string]any{"model": "nope"}), nil, 404, "NotFoundError", "The model `nope` does not exist."},
		{"unknown model tokenize", "/tokenize", map[string]any{"model": "nope", "prompt": "x"}, nil, 404, "NotFoundError", "does not exist"},
		{"context too long", "/v1/chat/completions", chatBody(words(50), 60, nil), nil, 400, "BadRequestError", "maximum context length is 100 tokens. However, you requested 120 tokens (60 in the messages, 60 in the completion)"},
		{"prompt alone too long", "/v1/completions", map[string]any{"prompt": words(100)}, nil, 400, "BadRequestError", "maximum context length is 100 tokens"},
		{"max_tokens zero", "/v1/chat/completions", chatBody("hi", 0, map[string]any{"min_tokens": nil}), nil, 400, "BadRequestError", "max_tokens must be at least 1"},
		{"min above max", "/v1/chat/completions", chatBody("hi", 4, map[string]any{"min_tokens": 5}), nil, 400, "BadRequestError", "min_tokens must be less than or equal to max_tokens=4"},
		{"bad json", "/v1/chat/completions", []byte(`{"messages": [`), nil, 400, "BadRequestError", "invalid JSON body"},
		{"no messages", "/v1/chat/completions", map[string]any{"messages": []any{}}, nil, 400, "BadRequestError", "at least one message"},
		{"n=2", "/v1/chat/completions", chatBody("hi", 4, map[string]any{"n": 2}), nil, 400, "BadRequestError", "n=1 only"},
		{"stream options without stream", "/v1/chat/completions", chatBody("hi", 4, map[string]any{"stream": false}), nil, 400, "BadRequestError", "Stream options"},
		{"empty salt", "/v1/chat/completions", chatBody("hi", 4, map[string]any{"cache_salt": ""}), nil, 400, "BadRequestError", "cache_salt"},
		{"bad fault header", "/v1/chat/completions", chatBody("hi", 4, nil), map[string]string{FaultHeader: "explode"}, 400, "BadRequestError", "unknown fault"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := ts.post(t, tt.path, tt.body, tt.header)
			if res.status != tt.status {
				t.Fatalf("status %d, want %d: %s", res.status, tt.status, res.body)
			}
			var e struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Param   any    `json:"param"`
					Code    int    `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(res.body), &e); err != nil {
				t.Fatalf("error body %q: %v", res.body, err)
			}
			if e.Error.Type != tt.typ || e.Error.Code != tt.status || !strings.Contains(e.Error.Message, tt.msg) {
				t.Errorf("error %+v, want type %s code %d message containing %q", e.Error, tt.typ, tt.status, tt.msg)
			}
			if !strings.Contains(res.body, `"param":`) {
				t.Errorf("error body lacks param: %s", res.body)
			}
		})
	}
	if got := ts.e.Stats().RejectedRequests; got != uint64(len(tests)-1) { // tokenize is not a generation request
		t.Errorf("RejectedRequests = %d, want %d", got, len(tests)-1)
	}
	if st := ts.e.Stats(); st.TotalRequests != 0 {
		t.Errorf("TotalRequests = %d after only rejected requests", st.TotalRequests)
	}
}

func TestModelsHealthVersion(t *testing.T) {
	ts := start(t, fastConfig())
	status, body := ts.get(t, "/v1/models")
	var models struct {
		Object string `json:"object"`
		Data   []struct {
			ID          string `json:"id"`
			Object      string `json:"object"`
			Root        string `json:"root"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &models); err != nil || status != 200 {
		t.Fatalf("/v1/models: %d %s", status, body)
	}
	want := fastConfig()
	if models.Object != "list" || len(models.Data) != 1 || models.Data[0].ID != want.ModelName ||
		models.Data[0].Object != "model" || models.Data[0].Root != want.ModelRoot || models.Data[0].MaxModelLen != want.MaxModelLen {
		t.Errorf("/v1/models = %s", body)
	}
	if status, _ := ts.get(t, "/health"); status != 200 {
		t.Errorf("/health = %d", status)
	}
	if status, body := ts.get(t, "/version"); status != 200 || !strings.Contains(body, "version") {
		t.Errorf("/version = %d %s", status, body)
	}
}

func TestEarlyStop(t *testing.T) {
	cfg := fastConfig()
	cfg.EOSMeanTokens = 6
	lengths := func() []string {
		ts := start(t, cfg)
		var out []string
		for i := range 8 {
			extra := map[string]any{"ignore_eos": nil, "min_tokens": nil}
			if i == 6 {
				extra = map[string]any{"ignore_eos": nil, "min_tokens": 30} // min_tokens = max_tokens forbids a stop
			}
			if i == 7 {
				extra = nil // ignore_eos
			}
			res := ts.post(t, "/v1/chat/completions", chatBody("go", 30, extra), nil)
			u := res.finalUsage()
			out = append(out, fmt.Sprintf("%d:%s", u.CompletionTokens, *res.outputChunks()[len(res.outputChunks())-1].Choices[0].FinishReason))
		}
		return out
	}
	a, b := lengths(), lengths()
	if strings.Join(a, " ") != strings.Join(b, " ") {
		t.Errorf("early stops are not deterministic: %v vs %v", a, b)
	}
	stops := 0
	for _, s := range a[:6] {
		if strings.HasSuffix(s, ":stop") {
			stops++
		}
	}
	if stops == 0 || a[6] != "30:length" || a[7] != "30:length" {
		t.Errorf("outputs %v: want some early stops, then 30:length twice", a)
	}
}

func TestTraceRing(t *testing.T) {
	cfg := fastConfig()
	cfg.TraceCapacity = 3
	ts := start(t, cfg)
	var ids []string
	for range 5 {
		res := ts.post(t, "/v1/chat/completions", chatBody("x", 1, nil), nil)
		ids = append(ids, res.id())
	}
	for i, id := range ids {
		_, ok := ts.e.Trace(id)
		if want := i >= 2; ok != want {
			t.Errorf("Trace(%s) present = %v, want %v", id, ok, want)
		}
	}
	tr, _ := ts.e.Trace(ids[4])
	if tr.PromptHead != "x" || tr.MaxTokens != 1 || tr.MinTokens != 1 || !tr.IgnoreEOS || tr.CacheSalt != "" {
		t.Errorf("trace request fields: %+v", tr)
	}
}

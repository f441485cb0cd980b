package vllmsim

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestKVCacheEvictionOrder drives the block pool directly: blocks freed by finished requests stay
// cached, and new tokens take never-used blocks first, then free blocks least recently freed first
// (a request's tail before its head), never a held one.
func TestKVCacheEvictionOrder(t *testing.T) {
	// Each request owns two blocks with the hashes name+"1", name+"2".
	hashOf := func(s string) uint64 { return hashBlock(hashSeed(s), nil) }
	tests := []struct {
		name      string
		total     int
		script    func(c *kvCache, hold func(string) []*kvBlock)
		allocate  int
		remaining []string // cached hashes left, sorted
		evicted   uint64
	}{
		{"never-used blocks go first", 6, func(c *kvCache, hold func(string) []*kvBlock) {
			c.release(hold("a"))
			c.release(hold("b"))
		}, 2, []string{"a1", "a2", "b1", "b2"}, 0},
		{"least recently freed goes first", 4, func(c *kvCache, hold func(string) []*kvBlock) {
			c.release(hold("a"))
			c.release(hold("b"))
		}, 2, []string{"b1", "b2"}, 2},
		{"a request's tail goes before its head", 4, func(c *kvCache, hold func(string) []*kvBlock) {
			c.release(hold("a"))
			c.release(hold("b"))
		}, 1, []string{"a1", "b1", "b2"}, 1},
		{"a hit makes a block recently used", 4, func(c *kvCache, hold func(string) []*kvBlock) {
			c.release(hold("a"))
			c.release(hold("b"))
			hit := c.lookup([]uint64{hashOf("a1"), hashOf("a2")}, 2)
			for _, b := range hit {
				c.touch(b)
			}
			c.release(hit)
		}, 2, []string{"a1", "a2"}, 2},
		{"held blocks are never taken", 4, func(c *kvCache, hold func(string) []*kvBlock) {
			c.release(hold("a"))
			hold("b")
		}, 2, []string{"b1", "b2"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newKVCache(tt.total*BlockSize, true)
			names := map[uint64]string{}
			hold := func(req string) []*kvBlock {
				var bs []*kvBlock
				for i := 1; i <= 2; i++ {
					b := c.alloc()
					h := hashOf(fmt.Sprintf("%s%d", req, i))
					names[h] = fmt.Sprintf("%s%d", req, i)
					c.cache(b, h)
					bs = append(bs, b)
				}
				return bs
			}
			tt.script(c, hold)
			if c.numFree() < tt.allocate {
				t.Fatalf("numFree %d < %d", c.numFree(), tt.allocate)
			}
			for range tt.allocate {
				c.alloc()
			}
			var left []string
			for h := range c.byHash {
				left = append(left, names[h])
			}
			slices.Sort(left)
			if !slices.Equal(left, tt.remaining) || c.evicted != tt.evicted {
				t.Errorf("cached %v, evicted %d; want %v, %d", left, c.evicted, tt.remaining, tt.evicted)
			}
			if c.used != tt.allocate+2*strings.Count(tt.name, "held") || c.used+c.numFree() != c.total {
				t.Errorf("used %d, free %d, total %d", c.used, c.numFree(), c.total)
			}
		})
	}
}

// turn is one request of a conversation and what the engine answered.
type turn struct {
	answer       string
	promptTokens int
	cached       int
	id           string
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// converse sends msgs, not streaming, on one API and reads the answer and its usage.
func converse(t *testing.T, ts *testServer, api string, msgs []message, out int) turn {
	t.Helper()
	var path string
	body := map[string]any{"model": DefaultConfig().ModelName}
	switch api {
	case "chat":
		path = "/v1/chat/completions"
		body["messages"], body["max_tokens"], body["ignore_eos"] = msgs, out, true
	case "responses":
		path = "/v1/responses"
		body["input"], body["max_output_tokens"], body["ignore_eos"] = msgs, out, true
	case "messages":
		path = "/v1/messages"
		body["messages"], body["max_tokens"] = msgs, out
	}
	res := ts.post(t, path, body, nil)
	if res.status != 200 {
		t.Fatalf("%s: status %d: %s", path, res.status, res.body)
	}
	var r struct {
		ID      string `json:"id"`
		Choices []struct {
			Message message `json:"message"`
		} `json:"choices"`
		Output []struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
			InputTokens        int `json:"input_tokens"`
			InputTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"input_tokens_details"`
			CacheReadInputTokens int `json:"cache_read_input_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(res.body), &r); err != nil {
		t.Fatalf("%s: %v: %s", path, err, res.body)
	}
	u := r.Usage
	switch api {
	case "chat":
		return turn{r.Choices[0].Message.Content, u.PromptTokens, u.PromptTokensDetails.CachedTokens, r.ID}
	case "responses":
		return turn{r.Output[0].Content[0].Text, u.InputTokens, u.InputTokensDetails.CachedTokens, r.ID}
	default: // Messages: input_tokens are the uncached ones
		return turn{r.Content[len(r.Content)-1].Text, u.InputTokens + u.CacheReadInputTokens, u.CacheReadInputTokens, r.ID}
	}
}

// historyCached is what vLLM v1 has cached of a finished request of P prompt and O generated
// tokens: the full blocks of its first P+O−1 tokens (the last token's KV is never computed).
func historyCached(p, o int) int { return (p + o - 1) / BlockSize * BlockSize }

// TestConversationFollowUpHitsHistory: a follow-up that replays the model's answer as an assistant
// message, then adds a user message, finds the whole earlier conversation cached (prompt and
// answer), on every API; one that alters the answer hits only the prompt's full blocks.
func TestConversationFollowUpHitsHistory(t *testing.T) {
	cfg := fastConfig()
	ts := start(t, cfg)
	first := []message{{"user", "kvfl " + words(300)}}
	// Every case's prompt starts with a distinct one-token word, so cases share no block.
	p1 := cfg.ChatPromptTokens([]ChatMessage{{"user", "axyz " + first[0].Content}})
	// An answer that ends the history on a block boundary: its last block is not cached.
	boundary := (p1/BlockSize+8)*BlockSize - p1
	tests := []struct {
		api    string
		out    int
		salt   string
		alter  bool
		cached func(p, o int) int
	}{
		{"chat", 100, "a", false, historyCached},
		{"chat", boundary, "b", false, historyCached},
		{"chat", 100, "c", true, func(p, _ int) int { return p / BlockSize * BlockSize }},
		{"responses", 100, "d", false, historyCached},
		{"messages", 100, "e", false, historyCached},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/out=%d/alter=%v", tt.api, tt.out, tt.alter), func(t *testing.T) {
			msgs := []message{{"user", tt.salt + "xyz " + first[0].Content}}
			p := cfg.ChatPromptTokens([]ChatMessage{{"user", msgs[0].Content}})
			if p != p1 {
				t.Fatalf("prompt %d tokens, want %d", p, p1)
			}
			one := converse(t, ts, tt.api, msgs, tt.out)
			if one.promptTokens != p || one.cached != 0 || CountTokens(one.answer) != tt.out {
				t.Fatalf("first turn: prompt %d cached %d answer %d tokens; want %d, 0, %d", one.promptTokens, one.cached, CountTokens(one.answer), p, tt.out)
			}
			answer := one.answer
			if tt.alter {
				answer = "Altered " + answer
			}
			msgs = append(msgs, message{"assistant", answer}, message{"user", "next " + words(50)})
			two := converse(t, ts, tt.api, msgs, 4)
			if want := tt.cached(p, tt.out); two.cached != want {
				t.Errorf("follow-up (prompt %d) cached %d, want %d (history %d+%d)", two.promptTokens, two.cached, want, p, tt.out)
			}
			t.Logf("history %d+%d tokens, follow-up %d tokens, cached %d", p, tt.out, two.promptTokens, two.cached)
			if tr, _ := ts.e.Trace(two.id); tr.CachedTokens != two.cached {
				t.Errorf("trace cached %d, usage %d", tr.CachedTokens, two.cached)
			}
		})
	}
}

// conversationsFit is K: how many conversations' first turns (prompt p, answer o) the KV cache
// holds at once. Each finished turn leaves ⌈(p+o)/BlockSize⌉ blocks in the pool (its full blocks
// cached, its last one not), and a new turn takes never-used blocks before evicting any.
func conversationsFit(kvTokens, p, o int) int {
	return blocksFor(kvTokens) / blocksFor(p+o)
}

// TestEvictionStartsPastK: N conversations run their first turns one after another, then the
// oldest sends its follow-up. Up to K conversations, nothing is evicted and the follow-up hits its
// whole history; at K+1, the newest turn's blocks come from the oldest conversation's, tail
// first, and the oldest's follow-up loses exactly those blocks.
func TestEvictionStartsPastK(t *testing.T) {
	const out = 100
	content := func(i int) string { return strings.Repeat(string(rune('a'+i)), 4) + " " + words(490) }
	cfg := fastConfig()
	cfg.MaxModelLen = 2048
	p := cfg.ChatPromptTokens([]ChatMessage{{"user", content(0)}})
	b := blocksFor(p + out)                // blocks one finished turn leaves in the pool
	h := historyCached(p, out) / BlockSize // of which cached
	for _, kvTokens := range []int{6 * b * BlockSize, 4096} {
		k := conversationsFit(kvTokens, p, out)
		spare := blocksFor(kvTokens) - k*b // never-used blocks left after K turns
		// The (K+1)th turn takes the spare blocks, then the oldest turn's uncached last block,
		// then evicts its cached blocks from the tail.
		lost := min(max(b-spare-1, 0), h)
		for _, n := range []int{k - 1, k, k + 1} {
			t.Run(fmt.Sprintf("kv=%d/K=%d/N=%d", kvTokens, k, n), func(t *testing.T) {
				c := cfg
				c.KVCacheTokens = kvTokens
				ts := start(t, c)
				var answers []string
				for i := range n {
					one := converse(t, ts, "chat", []message{{"user", content(i)}}, out)
					if one.promptTokens != p || one.cached != 0 {
						t.Fatalf("turn 1 of %d: prompt %d cached %d, want %d, 0", i, one.promptTokens, one.cached, p)
					}
					answers = append(answers, one.answer)
				}
				st := ts.e.Stats()
				wantEvicted := uint64(0)
				if n > k {
					wantEvicted = uint64(lost)
				}
				if st.EvictedBlocks != wantEvicted || st.CachedBlocks != n*h-int(wantEvicted) {
					t.Errorf("after %d turns (K=%d, %d blocks per turn, %d blocks): evicted %d cached %d, want %d, %d",
						n, k, b, st.KVCacheBlocks, st.EvictedBlocks, st.CachedBlocks, wantEvicted, n*h-int(wantEvicted))
				}
				if usage, _ := metricValue(t, ts.e, "vllm:kv_cache_usage_perc", nil); usage != 0 || st.KVCacheTokensUsed != 0 {
					t.Errorf("idle engine with %d cached blocks: kv_cache_usage_perc %v, tokens used %d; want 0 (cached blocks are free)", st.CachedBlocks, usage, st.KVCacheTokensUsed)
				}
				two := converse(t, ts, "chat", []message{{"user", content(0)}, {"assistant", answers[0]}, {"user", "next " + words(50)}}, 4)
				want := (h - int(wantEvicted)) * BlockSize
				t.Logf("prompt %d + answer %d: %d blocks per turn, %d cached; %d blocks, K=%d; N=%d: evicted %d, oldest follow-up cached %d (want %d)",
					p, out, b, h, st.KVCacheBlocks, k, n, st.EvictedBlocks, two.cached, want)
				if two.cached != want {
					t.Errorf("oldest conversation's follow-up cached %d of its %d-token history, want %d", two.cached, h*BlockSize, want)
				}
			})
		}
	}
}

// TestPreemptionUnderKVPressure: two long requests that fit when admitted but not once both have
// grown: the newer one is preempted exactly once (its blocks freed, recomputed after the older
// finishes), and both complete.
func TestPreemptionUnderKVPressure(t *testing.T) {
	cfg := fastConfig()
	cfg.MaxModelLen = 1024
	cfg.KVCacheTokens = 80 * BlockSize // two requests of 800 tokens need 100 blocks
	ts := start(t, cfg)
	prompt := func(i int) string { return strings.Repeat(string(rune('p'+i)), 4) + " " + words(390) }
	p := cfg.ChatPromptTokens([]ChatMessage{{"user", prompt(0)}})
	const out = 400
	if 2*blocksFor(p+out) <= 80 || 2*blocksFor(p+1) > 80 {
		t.Fatalf("shape: prompt %d, out %d does not make KV pressure", p, out)
	}
	var wg sync.WaitGroup
	results := make([]streamResult, 2)
	for i := range results {
		wg.Go(func() { results[i] = ts.post(t, "/v1/chat/completions", chatBody(prompt(i), out, nil), nil) })
	}
	wg.Wait()
	preempted := 0
	for _, r := range results {
		if u := r.finalUsage(); !r.done || u == nil || u.CompletionTokens != out {
			t.Errorf("request %s: done %v usage %+v", r.id(), r.done, u)
		}
		tr, _ := ts.e.Trace(r.id())
		preempted += tr.Preemptions
	}
	st := ts.e.Stats()
	if st.Preemptions != 1 || preempted != 1 || st.MaxRunningSeen != 2 || st.KVCacheTokensUsed != 0 {
		t.Errorf("preemptions %d (traces %d), max running %d, KV used %d; want 1, 1, 2, 0", st.Preemptions, preempted, st.MaxRunningSeen, st.KVCacheTokensUsed)
	}
	if v, _ := metricValue(t, ts.e, "vllm:num_preemptions_total", nil); v != 1 {
		t.Errorf("vllm:num_preemptions_total = %v, want 1", v)
	}
}

// TestKVUsageCountsHeldBlocks: vllm:kv_cache_usage_perc is the share of blocks held by running
// requests: a block two requests share through the prefix cache counts once, and cached blocks
// that nobody holds count as free.
func TestKVUsageCountsHeldBlocks(t *testing.T) {
	cfg := fastConfig()
	cfg.MaxModelLen = 1024
	cfg.KVCacheTokens = 1024 // 64 blocks
	ts := start(t, cfg)
	content := "usage " + words(200)
	p := cfg.ChatPromptTokens([]ChatMessage{{"user", content}})
	const stallAt = 10
	// A stalled request holds its context and one decode step ahead: P + stallAt + 1 tokens.
	held := blocksFor(p + stallAt + 1)
	shared := (p - 1) / BlockSize // the second copy's prompt hits all but its last token
	var wg sync.WaitGroup
	defer wg.Wait()
	for i, want := range []int{held, 2*held - shared} {
		wg.Go(func() {
			ts.post(t, "/v1/chat/completions", chatBody(content, 20, nil), map[string]string{FaultHeader: fmt.Sprintf("stall=%d,2500ms", stallAt)})
		})
		waitFor(t, fmt.Sprintf("%d stalled requests holding %d blocks", i+1, want), func() bool {
			v, _ := metricValue(t, ts.e, "vllm:kv_cache_usage_perc", nil)
			return v == float64(want)/64
		})
		if st := ts.e.Stats(); st.KVCacheTokensUsed != want*BlockSize {
			t.Errorf("%d running: KV tokens used %d, want %d blocks", i+1, st.KVCacheTokensUsed, want)
		}
	}
	wg.Wait()
	st := ts.e.Stats()
	v, _ := metricValue(t, ts.e, "vllm:kv_cache_usage_perc", nil)
	if v != 0 || st.CachedBlocks == 0 {
		t.Errorf("idle: kv_cache_usage_perc %v with %d cached blocks, want 0 and some", v, st.CachedBlocks)
	}
}

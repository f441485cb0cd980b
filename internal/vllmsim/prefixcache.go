package vllmsim

import "container/list"

// blockHashes returns the chained hashes of the full BlockSize-token blocks of ids. The first
// block's hash includes salt (cache_salt), so a different salt, or any difference inside a block,
// changes that block's hash and every later one.
func blockHashes(ids []uint32, salt string) []uint64 {
	n := len(ids) / BlockSize
	out := make([]uint64, 0, n)
	h := uint64(fnvOffset64)
	for i := 0; i < len(salt); i++ {
		h ^= uint64(salt[i])
		h *= fnvPrime64
	}
	for b := 0; b < n; b++ {
		for _, id := range ids[b*BlockSize : (b+1)*BlockSize] {
			for shift := 0; shift < 32; shift += 8 {
				h ^= uint64(byte(id >> shift))
				h *= fnvPrime64
			}
		}
		out = append(out, h)
	}
	return out
}

// prefixCache is a bounded LRU set of block hashes ("blocks whose KV is still on the GPU").
// It is used only by the engine goroutine, under Engine.mu.
type prefixCache struct {
	capacity int
	order    *list.List // front = most recently used; values are uint64 hashes
	index    map[uint64]*list.Element
}

func newPrefixCache(capacityBlocks int) *prefixCache {
	return &prefixCache{
		capacity: max(capacityBlocks, 1),
		order:    list.New(),
		index:    make(map[uint64]*list.Element),
	}
}

// hitTokens returns how many leading prompt tokens are cached: whole leading blocks whose hashes
// are all present, capped so that at least one prompt token is computed (as vLLM does). It touches
// the blocks it hits.
func (c *prefixCache) hitTokens(hashes []uint64, promptTokens int) int {
	hits := 0
	for _, h := range hashes {
		el, ok := c.index[h]
		if !ok {
			break
		}
		c.order.MoveToFront(el)
		hits++
	}
	limit := (promptTokens - 1) / BlockSize * BlockSize
	return min(hits*BlockSize, max(limit, 0))
}

// insert records the blocks as cached, evicting the least recently used beyond capacity.
func (c *prefixCache) insert(hashes []uint64) {
	for _, h := range hashes {
		if el, ok := c.index[h]; ok {
			c.order.MoveToFront(el)
			continue
		}
		c.index[h] = c.order.PushFront(h)
		for c.order.Len() > c.capacity {
			last := c.order.Back()
			delete(c.index, last.Value.(uint64))
			c.order.Remove(last)
		}
	}
}

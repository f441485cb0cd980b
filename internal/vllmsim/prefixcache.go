package vllmsim

import "container/list"

// hashSeed starts a request's chain of block hashes: the first block's hash includes salt
// (cache_salt), so a different salt changes every block's hash.
func hashSeed(salt string) uint64 {
	h := uint64(fnvOffset64)
	for i := 0; i < len(salt); i++ {
		h ^= uint64(salt[i])
		h *= fnvPrime64
	}
	return h
}

// hashBlock chains one full block of token ids onto the previous block's hash (or hashSeed), so
// any difference inside a block changes its hash and every later one.
func hashBlock(prev uint64, block []uint32) uint64 {
	h := prev
	for _, id := range block {
		for shift := 0; shift < 32; shift += 8 {
			h ^= uint64(byte(id >> shift))
			h *= fnvPrime64
		}
	}
	return h
}

// blockHashes returns the chained hashes of the full BlockSize-token blocks of ids.
func blockHashes(ids []uint32, salt string) []uint64 {
	return extendHashes(nil, ids, salt)
}

// extendHashes appends to hashes (the chain of ids' first len(hashes) blocks) the hashes of ids'
// remaining full blocks.
func extendHashes(hashes []uint64, ids []uint32, salt string) []uint64 {
	h := hashSeed(salt)
	if len(hashes) > 0 {
		h = hashes[len(hashes)-1]
	}
	for b := len(hashes); (b+1)*BlockSize <= len(ids); b++ {
		h = hashBlock(h, ids[b*BlockSize:(b+1)*BlockSize])
		hashes = append(hashes, h)
	}
	return hashes
}

// kvBlock is one block of the KV cache.
type kvBlock struct {
	hash   uint64
	hashed bool          // registered in kvCache.byHash: its KV can be reused by a later request
	ref    int           // running requests holding it
	el     *list.Element // its place in the free queue while ref == 0
}

// kvCache is the engine's KV cache as vLLM v1's block pool manages it: a fixed number of
// BlockSize-token blocks, held by running requests (a block shared through the prefix cache is
// held once, with a reference count) or free. Free blocks wait in a queue, least recently freed
// first; a free block that still has a hash is a prefix-cache entry, reusable until a request
// takes it from the head of the queue for new tokens, which evicts it. Blocks never used yet come
// before the queue. It is used only under Engine.mu.
type kvCache struct {
	total   int
	fresh   int        // blocks never used yet (taken before the free queue)
	free    *list.List // of *kvBlock with ref == 0; front = next to be taken (evicted)
	byHash  map[uint64]*kvBlock
	caching bool   // prefix caching on: full blocks get hashes
	used    int    // blocks with ref > 0
	evicted uint64 // hashed blocks taken for new tokens
}

func newKVCache(tokens int, caching bool) *kvCache {
	total := (tokens + BlockSize - 1) / BlockSize
	return &kvCache{total: total, fresh: total, free: list.New(), byHash: make(map[uint64]*kvBlock), caching: caching}
}

// numFree is how many blocks can be taken now: never used, free, or cached but not held.
func (c *kvCache) numFree() int { return c.fresh + c.free.Len() }

// cachedBlocks is how many blocks hold reusable KV (held or not).
func (c *kvCache) cachedBlocks() int { return len(c.byHash) }

// lookup returns the cached blocks of the leading hashes, at most maxBlocks of them, without
// taking them.
func (c *kvCache) lookup(hashes []uint64, maxBlocks int) []*kvBlock {
	if !c.caching {
		return nil
	}
	var hit []*kvBlock
	for _, h := range hashes[:min(len(hashes), max(maxBlocks, 0))] {
		b, ok := c.byHash[h]
		if !ok {
			break
		}
		hit = append(hit, b)
	}
	return hit
}

// touch takes a reference on a cached block, taking it out of the free queue if it was there.
func (c *kvCache) touch(b *kvBlock) {
	if b.ref == 0 {
		c.free.Remove(b.el)
		b.el = nil
		c.used++
	}
	b.ref++
}

// alloc takes a block for new tokens: a never-used one, else the head of the free queue (the
// least recently freed), whose cached KV, if any, is evicted. The caller checks numFree first.
func (c *kvCache) alloc() *kvBlock {
	var b *kvBlock
	if c.fresh > 0 {
		c.fresh--
		b = &kvBlock{}
	} else {
		b = c.free.Remove(c.free.Front()).(*kvBlock)
		b.el = nil
		if b.hashed {
			delete(c.byHash, b.hash)
			b.hashed = false
			c.evicted++
		}
	}
	b.ref = 1
	c.used++
	return b
}

// release drops a request's references, last block first, as vLLM frees them: a request's tail
// blocks are then evicted before its head blocks, which other requests are more likely to share.
func (c *kvCache) release(blocks []*kvBlock) {
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		b.ref--
		if b.ref == 0 {
			b.el = c.free.PushBack(b)
			c.used--
		}
	}
}

// cache registers a full block under its hash, unless prefix caching is off, it already has one,
// or another block holds the same hash (the first one stays the cached copy).
func (c *kvCache) cache(b *kvBlock, h uint64) {
	if !c.caching || b.hashed {
		return
	}
	if _, ok := c.byHash[h]; ok {
		return
	}
	b.hash, b.hashed = h, true
	c.byHash[h] = b
}

// Package conversation keeps a session's conversation in a payload store, by
// reference, so that workflow inputs, model-step inputs and continue-as-new
// state carry a small Ref whatever the conversation's size.
//
// Each message is written once, under a content-addressed key of its
// session; a conversation is a manifest (the list of its messages' keys),
// also content-addressed. Appending writes the new messages and a new
// manifest; a retried activity rewrites the same objects. Objects are
// immutable, so a worker caches what it read or wrote.
package conversation

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/eve-temporal/eve/model"
)

// Ref is a stored conversation. The zero Ref is the empty conversation.
type Ref struct {
	// Manifest is the key of the manifest ("" when empty).
	Manifest string `json:"manifest,omitempty"`
	// Messages is how many messages it holds.
	Messages int `json:"messages,omitempty"`
	// Bytes is the encoded size of its messages.
	Bytes int64 `json:"bytes,omitempty"`
}

// Empty reports whether the conversation has no messages.
func (r Ref) Empty() bool { return r.Messages == 0 }

// BytesPerToken is the estimate Tokens uses: about four bytes of English
// text or JSON per token, for every provider eve supports.
const BytesPerToken = 4

// Tokens estimates the conversation's size in tokens.
func (r Ref) Tokens() int { return int(r.Bytes / BytesPerToken) }

// EstimateTokens estimates the tokens of messages not yet stored.
func EstimateTokens(msgs []model.Message) int {
	n := 0
	for _, m := range msgs {
		b, _ := json.Marshal(m)
		n += len(b)
	}
	return n / BytesPerToken
}

// A manifest lists a conversation's message keys in chunks of at most
// chunkKeys: the newest chunk names the one before it (Parent), so an append
// writes one small chunk whatever the conversation's length.
type manifest struct {
	Parent string `json:"parent,omitempty"`
	// Before is how many messages the parent chain holds.
	Before int      `json:"before,omitempty"`
	Keys   []string `json:"keys"`
	// Bytes is the size of all the conversation's messages.
	Bytes int64 `json:"bytes"`
}

const chunkKeys = 256

// Objects is the object store a Store keeps conversations in: a
// payloadstore.Store. Declared here so that the packages which only name a
// Ref (the contract package signals, and every client importing it) do not
// pull in the payload store's S3 and Temporal drivers.
type Objects interface {
	Put(ctx context.Context, key string, data []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
	Location() string
}

// Store reads and writes conversations. It is safe for concurrent use.
type Store struct {
	objects Objects
	cache   *lru
}

// DefaultCacheBytes bounds the decoded messages and manifests a Store keeps
// in memory.
const DefaultCacheBytes = 64 << 20

// New returns a Store over objects with the default cache.
func New(objects Objects) *Store {
	return &Store{objects: objects, cache: newLRU(DefaultCacheBytes)}
}

var unsafeKey = regexp.MustCompile(`[^a-zA-Z0-9._-]`)

// sessionPrefix is the key prefix of a session's objects. Ids with other
// characters than the store allows are hashed, so any id maps to one prefix.
func sessionPrefix(sessionID string) string {
	if sessionID == "" || len(sessionID) > 128 || unsafeKey.MatchString(sessionID) || sessionID[0] == '.' {
		sum := sha256.Sum256([]byte(sessionID))
		return "sessions/h-" + hex.EncodeToString(sum[:16])
	}
	return "sessions/" + sessionID
}

func contentKey(prefix, kind string, b []byte) string {
	sum := sha256.Sum256(b)
	return prefix + "/" + kind + "/" + hex.EncodeToString(sum[:])
}

// Load returns the conversation's messages, oldest first.
func (s *Store) Load(ctx context.Context, ref Ref) ([]model.Message, error) {
	if ref.Manifest == "" {
		return nil, nil
	}
	keys, err := s.keys(ctx, ref.Manifest)
	if err != nil {
		return nil, err
	}
	out := make([]model.Message, len(keys))
	var missing []int
	for i, k := range keys {
		if v, ok := s.cache.get(k); ok {
			out[i] = v.(model.Message)
		} else {
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		return out, nil // a model step's usual case: this worker wrote them
	}
	// Messages the cache lacks are read concurrently: from S3 a cold
	// conversation of n messages costs n/ioParallelism round trips, not n.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(ioParallelism)
	for _, i := range missing {
		k := keys[i]
		g.Go(func() error {
			b, err := s.objects.Get(gctx, k)
			if err != nil {
				return fmt.Errorf("read message %d of conversation %s from %s: %w", i, ref.Manifest, s.objects.Location(), err)
			}
			var m model.Message
			if err := json.Unmarshal(b, &m); err != nil {
				return fmt.Errorf("decode message %s: %w", k, err)
			}
			s.cache.put(k, m, int64(len(b)))
			out[i] = m
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// ioParallelism bounds the objects one Load reads, or one Append writes, at
// once.
const ioParallelism = 16

// keys returns the message keys of a manifest and its parents, oldest first.
func (s *Store) keys(ctx context.Context, key string) ([]string, error) {
	var chunks [][]string
	n := 0
	for key != "" {
		man, err := s.manifest(ctx, key)
		if err != nil {
			return nil, err
		}
		chunks = append(chunks, man.Keys)
		n += len(man.Keys)
		key = man.Parent
	}
	out := make([]string, 0, n)
	for i := len(chunks) - 1; i >= 0; i-- {
		out = append(out, chunks[i]...)
	}
	return out, nil
}

func (s *Store) manifest(ctx context.Context, key string) (manifest, error) {
	if v, ok := s.cache.get(key); ok {
		return v.(manifest), nil
	}
	b, err := s.objects.Get(ctx, key)
	if err != nil {
		return manifest{}, fmt.Errorf("read conversation %s from %s: %w", key, s.objects.Location(), err)
	}
	var man manifest
	if err := json.Unmarshal(b, &man); err != nil {
		return manifest{}, fmt.Errorf("decode conversation %s: %w", key, err)
	}
	s.cache.put(key, man, int64(len(b)))
	return man, nil
}

// Append stores msgs after base's messages and returns the new conversation.
// Appending nothing returns base.
//
// Its writes go to the store concurrently, manifests included: nothing reads
// a manifest before a Ref naming it is returned, and Append returns one only
// once every write has succeeded. A write that fails leaves objects nothing
// names, which a retry rewrites.
func (s *Store) Append(ctx context.Context, sessionID string, base Ref, msgs ...model.Message) (Ref, error) {
	if len(msgs) == 0 {
		return base, nil
	}
	var cur manifest
	if base.Manifest != "" {
		m, err := s.manifest(ctx, base.Manifest)
		if err != nil {
			return Ref{}, err
		}
		cur = manifest{Parent: m.Parent, Before: m.Before, Keys: append(make([]string, 0, len(m.Keys)+len(msgs)), m.Keys...), Bytes: m.Bytes}
	}
	prefix := sessionPrefix(sessionID)
	var w writes
	for _, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return Ref{}, fmt.Errorf("encode message: %w", err)
		}
		key := contentKey(prefix, "messages", b)
		w.add(s, key, b, m, "message")
		if len(cur.Keys) == chunkKeys {
			full, err := w.addManifest(s, prefix, cur)
			if err != nil {
				return Ref{}, err
			}
			cur = manifest{Parent: full, Before: cur.Before + len(cur.Keys), Bytes: cur.Bytes}
		}
		cur.Keys = append(cur.Keys, key)
		cur.Bytes += int64(len(b))
	}
	key, err := w.addManifest(s, prefix, cur)
	if err != nil {
		return Ref{}, err
	}
	if err := w.run(ctx, s); err != nil {
		return Ref{}, err
	}
	return Ref{Manifest: key, Messages: cur.Before + len(cur.Keys), Bytes: cur.Bytes}, nil
}

// writes are the objects one Append stores, skipping those the cache holds
// (objects are immutable, so a cached one is stored already).
type writes struct {
	list []write
	seen map[string]bool
}

type write struct {
	key, kind string // kind is "message" or "conversation", for errors
	data      []byte
	val       any
}

func (w *writes) add(s *Store, key string, data []byte, val any, kind string) {
	if w.seen[key] {
		return // the same message twice in one append
	}
	if _, ok := s.cache.get(key); ok {
		return
	}
	if w.seen == nil {
		w.seen = map[string]bool{}
	}
	w.seen[key] = true
	w.list = append(w.list, write{key: key, kind: kind, data: data, val: val})
}

func (w *writes) addManifest(s *Store, prefix string, man manifest) (string, error) {
	b, err := json.Marshal(man)
	if err != nil {
		return "", fmt.Errorf("encode conversation: %w", err)
	}
	key := contentKey(prefix, "conversations", b)
	w.add(s, key, b, man, "conversation")
	return key, nil
}

// run stores the writes concurrently and caches each once it is stored.
func (w *writes) run(ctx context.Context, s *Store) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(ioParallelism)
	for _, o := range w.list {
		g.Go(func() error {
			if err := s.objects.Put(gctx, o.key, o.data); err != nil {
				return fmt.Errorf("write %s to %s: %w", o.kind, s.objects.Location(), err)
			}
			s.cache.put(o.key, o.val, int64(len(o.data)))
			return nil
		})
	}
	return g.Wait()
}

// lru is a cache of immutable values bounded by their encoded size.
type lru struct {
	mu    sync.Mutex
	max   int64
	size  int64
	order *list.List
	items map[string]*list.Element
}

type entry struct {
	key  string
	val  any
	size int64
}

func newLRU(max int64) *lru {
	return &lru{max: max, order: list.New(), items: map[string]*list.Element{}}
}

func (c *lru) get(key string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*entry).val, true
	}
	return nil, false
}

func (c *lru) put(key string, val any, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.order.MoveToFront(el)
		return
	}
	if size > c.max {
		return
	}
	c.items[key] = c.order.PushFront(&entry{key, val, size})
	c.size += size
	for c.size > c.max {
		el := c.order.Back()
		e := el.Value.(*entry)
		c.order.Remove(el)
		delete(c.items, e.key)
		c.size -= e.size
	}
}

// ReplaceLast returns base with its last message replaced by m: one new
// message and one new manifest chunk, whatever the conversation's length.
// A turn uses it to show the model the call that ran when a person edited
// its input (the model's answer is the last message its step stored).
func (s *Store) ReplaceLast(ctx context.Context, sessionID string, base Ref, m model.Message) (Ref, error) {
	if base.Manifest == "" {
		return Ref{}, fmt.Errorf("replace the last message: the conversation is empty")
	}
	cur, err := s.manifest(ctx, base.Manifest)
	if err != nil {
		return Ref{}, err
	}
	if len(cur.Keys) == 0 {
		return Ref{}, fmt.Errorf("replace the last message: conversation %s has an empty chunk", base.Manifest)
	}
	oldBytes, err := s.messageBytes(ctx, cur.Keys[len(cur.Keys)-1])
	if err != nil {
		return Ref{}, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return Ref{}, fmt.Errorf("encode message: %w", err)
	}
	prefix := sessionPrefix(sessionID)
	key := contentKey(prefix, "messages", b)
	next := manifest{Parent: cur.Parent, Before: cur.Before, Keys: append(append([]string(nil), cur.Keys[:len(cur.Keys)-1]...), key),
		Bytes: cur.Bytes - int64(len(oldBytes)) + int64(len(b))}
	var w writes
	w.add(s, key, b, m, "message")
	mkey, err := w.addManifest(s, prefix, next)
	if err != nil {
		return Ref{}, err
	}
	if err := w.run(ctx, s); err != nil {
		return Ref{}, err
	}
	return Ref{Manifest: mkey, Messages: next.Before + len(next.Keys), Bytes: next.Bytes}, nil
}

// messageBytes is one stored message's encoding (its size counts in Ref.Bytes).
func (s *Store) messageBytes(ctx context.Context, key string) ([]byte, error) {
	if v, ok := s.cache.get(key); ok {
		return json.Marshal(v.(model.Message))
	}
	b, err := s.objects.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read message %s from %s: %w", key, s.objects.Location(), err)
	}
	return b, nil
}

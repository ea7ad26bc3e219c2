// Package conversation keeps a session's conversation in a payload store, by
// reference, so that workflow inputs, model-step inputs and continue-as-new
// state carry a small Ref whatever the conversation's size.
//
// A conversation is a manifest: the list of its messages' keys, stored
// under a content-addressed key of its session. Appending writes one new
// manifest that holds the appended messages too (FormatInline), or each
// message as an object of its own and then the manifest (FormatObjects, as
// eve 0.4 wrote them); a retried activity rewrites the same objects.
// Objects are immutable, so a worker caches what it read or wrote.
package conversation

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
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
	Before int `json:"before,omitempty"`
	// Keys name the messages: an object's key, "<manifest key>#<i>" for
	// the i-th message held inline by another manifest, or "#<i>" for this
	// manifest's own Messages[i].
	Keys []string `json:"keys"`
	// Bytes is the size of all the conversation's messages.
	Bytes int64 `json:"bytes"`
	// Messages are the messages this manifest's append added
	// (FormatInline): one object per append instead of one per message.
	Messages []json.RawMessage `json:"messages,omitempty"`
}

// Format is how a Store writes a conversation.
type Format int

const (
	// FormatInline stores each append's messages in its manifest: one
	// object per append (per model step), however many messages it adds.
	FormatInline Format = iota
	// FormatObjects stores each message as an object of its own, then the
	// manifest: what eve 0.4 wrote and all a 0.4 worker reads. For a fleet
	// that still runs 0.4 workers beside this build (docs/deploy.md).
	FormatObjects
)

// ParseFormat reads a Format by name: "inline" or "objects" ("": inline).
func ParseFormat(name string) (Format, error) {
	switch name {
	case "", "inline":
		return FormatInline, nil
	case "objects":
		return FormatObjects, nil
	}
	return 0, fmt.Errorf("conversation format %q: want inline (one object per append, the default) or objects (one per message, readable by eve 0.4)", name)
}

// inlineRef splits an inline message's key into its manifest's key and
// its index; ok is false for a message stored as an object.
func inlineRef(key string) (manifestKey string, i int, ok bool) {
	at := strings.LastIndexByte(key, '#')
	if at < 0 {
		return "", 0, false
	}
	i, err := strconv.Atoi(key[at+1:])
	if err != nil || i < 0 {
		return "", 0, false
	}
	return key[:at], i, true
}

// absolute makes the keys of manifest key's chunk usable outside it: "#i"
// names the manifest's own message, a key without a "/" one of another
// manifest in its directory (the session's).
func absolute(keys []string, key string) []string {
	dir := key[:strings.LastIndexByte(key, '/')+1]
	out := make([]string, len(keys))
	for i, k := range keys {
		switch {
		case strings.HasPrefix(k, "#"):
			k = key + k
		case !strings.Contains(k, "/"):
			k = dir + k
		}
		out[i] = k
	}
	return out
}

// compactKeys is how an inline manifest stores its keys: inline messages'
// without their session's directory, and a run of one manifest's
// messages as one range ("<key>#3-5"). A cold load reads every manifest
// that holds its messages, and each lists its chunk's keys so far: this
// keeps those lists short.
func compactKeys(keys []string, prefix string) []string {
	out := make([]string, 0, len(keys))
	for i := 0; i < len(keys); {
		k := strings.TrimPrefix(keys[i], prefix+"/")
		mk, first, ok := inlineRef(k)
		if !ok {
			out = append(out, keys[i])
			i++
			continue
		}
		last := first
		for i+1 < len(keys) {
			nk, n, ok := inlineRef(strings.TrimPrefix(keys[i+1], prefix+"/"))
			if !ok || nk != mk || n != last+1 {
				break
			}
			last = n
			i++
		}
		i++
		if last > first {
			k = fmt.Sprintf("%s#%d-%d", mk, first, last)
		}
		out = append(out, k)
	}
	return out
}

// decodeManifest reads manifest key (encoded b), its ranges expanded.
func decodeManifest(key string, b []byte) (manifest, error) {
	var man manifest
	if err := json.Unmarshal(b, &man); err != nil {
		return manifest{}, fmt.Errorf("decode conversation %s: %w", key, err)
	}
	keys := make([]string, 0, len(man.Keys))
	for _, k := range man.Keys {
		at := strings.LastIndexByte(k, '#')
		dash := strings.LastIndexByte(k, '-')
		if at < 0 || dash < at {
			keys = append(keys, k)
			continue
		}
		first, err1 := strconv.Atoi(k[at+1 : dash])
		last, err2 := strconv.Atoi(k[dash+1:])
		if err1 != nil || err2 != nil || first < 0 || last < first || last-first >= chunkKeys {
			return manifest{}, fmt.Errorf("decode conversation %s: bad key range %q", key, k)
		}
		for n := first; n <= last; n++ {
			keys = append(keys, k[:at+1]+strconv.Itoa(n))
		}
	}
	man.Keys = keys
	return man, nil
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
	format  Format
}

// DefaultCacheBytes bounds the decoded messages and manifests a Store keeps
// in memory.
const DefaultCacheBytes = 64 << 20

// New returns a Store over objects with the default cache, writing
// FormatInline. It reads both formats.
func New(objects Objects) *Store {
	return NewFormat(objects, FormatInline)
}

// NewFormat returns a Store that writes conversations in format f.
func NewFormat(objects Objects, f Format) *Store {
	return &Store{objects: objects, cache: newLRU(DefaultCacheBytes), format: f}
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
	// conversation of n messages costs n/ioParallelism round trips, not n
	// (and one per append whose manifest holds them inline).
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(ioParallelism)
	inline := map[string][]int{} // manifest key → indexes into out
	for _, i := range missing {
		k := keys[i]
		if mk, _, ok := inlineRef(k); ok {
			inline[mk] = append(inline[mk], i)
			continue
		}
		g.Go(func() error {
			b, err := s.objects.Get(gctx, k)
			if err != nil {
				return fmt.Errorf("read message %d of conversation %s from %s: %w", i, ref.Manifest, s.objects.Location(), err)
			}
			m, err := s.decode(k, b)
			out[i] = m
			return err
		})
	}
	for mk, idx := range inline {
		g.Go(func() error {
			man, err := s.inlineManifest(gctx, mk)
			if err != nil {
				return err
			}
			for _, i := range idx {
				b, err := inlineBytes(man, keys[i])
				if err != nil {
					return err
				}
				if out[i], err = s.decode(keys[i], b); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// inlineManifest reads the manifest that holds inline messages a load
// lacks. Unlike a chain's manifest it is not cached: the messages are,
// and its list of keys (up to a chunk's) would only crowd them out.
func (s *Store) inlineManifest(ctx context.Context, key string) (manifest, error) {
	return s.readManifest(ctx, key, false)
}

// decode reads one stored message and caches it.
func (s *Store) decode(key string, b []byte) (model.Message, error) {
	var m model.Message
	if err := json.Unmarshal(b, &m); err != nil {
		return model.Message{}, fmt.Errorf("decode message %s: %w", key, err)
	}
	s.cache.put(key, m, int64(len(b)))
	return m, nil
}

// inlineBytes is the encoding of inline message key in its manifest man.
func inlineBytes(man manifest, key string) ([]byte, error) {
	_, i, _ := inlineRef(key)
	if i >= len(man.Messages) {
		return nil, fmt.Errorf("read message %s: its conversation holds %d messages inline", key, len(man.Messages))
	}
	return man.Messages[i], nil
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
		chunks = append(chunks, absolute(man.Keys, key))
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
	return s.readManifest(ctx, key, true)
}

// readManifest reads manifest key from the cache or the store; keep
// caches what it read from the store.
func (s *Store) readManifest(ctx context.Context, key string, keep bool) (manifest, error) {
	if v, ok := s.cache.get(key); ok {
		return v.(manifest), nil
	}
	b, err := s.objects.Get(ctx, key)
	if err != nil {
		return manifest{}, fmt.Errorf("read conversation %s from %s: %w", key, s.objects.Location(), err)
	}
	man, err := decodeManifest(key, b)
	if err != nil {
		return manifest{}, err
	}
	if keep {
		s.cache.put(key, man, int64(len(b)))
	}
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
		cur = manifest{Parent: m.Parent, Before: m.Before, Keys: append(make([]string, 0, len(m.Keys)+len(msgs)), absolute(m.Keys, base.Manifest)...), Bytes: m.Bytes}
	}
	prefix := sessionPrefix(sessionID)
	var w writes
	// stored is cur's key while cur is base's chunk unchanged: a full
	// one becomes the parent as it is, not rewritten.
	stored := base.Manifest
	for _, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return Ref{}, fmt.Errorf("encode message: %w", err)
		}
		if len(cur.Keys) == chunkKeys {
			full := stored
			if full == "" {
				if full, err = w.addManifest(s, prefix, cur); err != nil {
					return Ref{}, err
				}
			}
			cur = manifest{Parent: full, Before: cur.Before + len(cur.Keys), Bytes: cur.Bytes}
		}
		stored = ""
		cur.Keys = append(cur.Keys, w.addMessage(s, prefix, &cur, b, m))
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
	// inline are the messages of the chunk being built (FormatInline);
	// cached, those of the chunks built, to cache once all are stored.
	inline []model.Message
	cached []cachedMessage
}

type cachedMessage struct {
	key  string
	m    model.Message
	size int64
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

// addMessage adds message m (encoded b) to the chunk man and returns its
// key there: inline in the chunk's manifest, or an object of its own.
func (w *writes) addMessage(s *Store, prefix string, man *manifest, b []byte, m model.Message) string {
	if s.format == FormatObjects {
		key := contentKey(prefix, "messages", b)
		w.add(s, key, b, m, "message")
		return key
	}
	man.Messages = append(man.Messages, b)
	w.inline = append(w.inline, m)
	return "#" + strconv.Itoa(len(man.Messages)-1)
}

func (w *writes) addManifest(s *Store, prefix string, man manifest) (string, error) {
	stored := man
	if s.format == FormatInline {
		stored.Keys = compactKeys(man.Keys, prefix)
	}
	b, err := json.Marshal(stored)
	if err != nil {
		return "", fmt.Errorf("encode conversation: %w", err)
	}
	key := contentKey(prefix, "conversations", b)
	if s.format == FormatInline {
		// No subdirectory: a file store creates one directory per
		// session, not two.
		sum := sha256.Sum256(b)
		key = prefix + "/conversation-" + hex.EncodeToString(sum[:])
	}
	// Once stored, its inline messages are cached under their full keys,
	// as a message object is: the next model step reads none of them.
	for i, m := range w.inline {
		w.cached = append(w.cached, cachedMessage{key: key + "#" + strconv.Itoa(i), m: m, size: int64(len(man.Messages[i]))})
	}
	w.inline = nil
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
	if err := g.Wait(); err != nil {
		return err
	}
	for _, c := range w.cached {
		s.cache.put(c.key, c.m, c.size)
	}
	return nil
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
	oldBytes, err := s.messageBytes(ctx, absolute(cur.Keys[len(cur.Keys)-1:], base.Manifest)[0])
	if err != nil {
		return Ref{}, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return Ref{}, fmt.Errorf("encode message: %w", err)
	}
	prefix := sessionPrefix(sessionID)
	next := manifest{Parent: cur.Parent, Before: cur.Before, Keys: absolute(cur.Keys[:len(cur.Keys)-1], base.Manifest),
		Bytes: cur.Bytes - int64(len(oldBytes)) + int64(len(b))}
	var w writes
	next.Keys = append(next.Keys, w.addMessage(s, prefix, &next, b, m))
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
	if mk, _, ok := inlineRef(key); ok {
		man, err := s.inlineManifest(ctx, mk)
		if err != nil {
			return nil, err
		}
		return inlineBytes(man, key)
	}
	b, err := s.objects.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read message %s from %s: %w", key, s.objects.Location(), err)
	}
	return b, nil
}

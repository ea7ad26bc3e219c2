package conversation_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eve-temporal/eve/conversation"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/payloadstore"
)

// Every payload store can hold conversations.
var _ conversation.Objects = payloadstore.Store(nil)

func openStore(t *testing.T) *payloadstore.Counting {
	t.Helper()
	s, err := payloadstore.Open(context.Background(), "file:"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return payloadstore.NewCounting(s)
}

func msg(i int) model.Message {
	return model.Message{Role: model.RoleUser, Text: fmt.Sprintf("message %d", i)}
}

var formats = []struct {
	name   string
	format conversation.Format
	// puts is how many objects an append of n messages writes.
	puts func(n int) int64
}{
	{"inline", conversation.FormatInline, func(int) int64 { return 1 }},
	{"objects", conversation.FormatObjects, func(n int) int64 { return int64(n) + 1 }},
}

// A long conversation reads back whole and in order, also by a process
// that never saw it written (empty cache), and each append writes an amount
// that does not grow with the conversation's length.
func TestAppendLoadChunks(t *testing.T) {
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			ctx := context.Background()
			objects := openStore(t)
			s := conversation.NewFormat(objects, f.format)
			var ref conversation.Ref
			var perAppend []int64
			for i := 0; i < 1000; i++ {
				before := objects.Stats()
				var err error
				ref, err = s.Append(ctx, "ses_1", ref, msg(i))
				if err != nil {
					t.Fatal(err)
				}
				after := objects.Stats()
				perAppend = append(perAppend, after.BytesWritten-before.BytesWritten)
				if puts := after.Puts - before.Puts; puts != f.puts(1) {
					t.Fatalf("append %d wrote %d objects, want %d", i, puts, f.puts(1))
				}
			}
			if ref.Messages != 1000 || ref.Bytes == 0 || ref.Tokens() != int(ref.Bytes/conversation.BytesPerToken) {
				t.Fatalf("ref = %+v", ref)
			}
			fresh := conversation.New(objects)
			got, err := fresh.Load(ctx, ref)
			if err != nil || len(got) != 1000 {
				t.Fatalf("load: %d messages, %v", len(got), err)
			}
			for i, m := range got {
				if m.Text != msg(i).Text {
					t.Fatalf("message %d = %q", i, m.Text)
				}
			}
			// Chunks hold 256 keys: the 1000th append writes no more than the 256th.
			var most int64
			for _, n := range perAppend {
				most = max(most, n)
			}
			if most > 40<<10 {
				t.Fatalf("an append wrote %d bytes", most)
			}
			// The same append twice gives the same ref (content-addressed).
			a, _ := s.Append(ctx, "ses_1", ref, msg(1000))
			b, _ := conversation.NewFormat(objects, f.format).Append(ctx, "ses_1", ref, msg(1000))
			if a != b {
				t.Fatalf("appends differ: %+v %+v", a, b)
			}
			// An earlier ref still reads its own prefix.
			prefix, err := fresh.Load(ctx, conversation.Ref{})
			if err != nil || prefix != nil {
				t.Fatalf("empty ref: %v %v", prefix, err)
			}
		})
	}
}

// A conversation eve 0.4 wrote (one object per message) goes on in the
// inline format, and each format's store reads what the other wrote.
func TestFormatsMix(t *testing.T) {
	ctx := context.Background()
	objects := openStore(t)
	old := conversation.NewFormat(objects, conversation.FormatObjects)
	ref, err := old.Append(ctx, "ses_1", conversation.Ref{}, msg(0), msg(1))
	if err != nil {
		t.Fatal(err)
	}
	ref, err = conversation.New(objects).Append(ctx, "ses_1", ref, msg(2), msg(3))
	if err != nil {
		t.Fatal(err)
	}
	ref, err = old.Append(ctx, "ses_1", ref, msg(4))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range formats {
		got, err := conversation.NewFormat(objects, f.format).Load(ctx, ref)
		if err != nil || len(got) != 5 {
			t.Fatalf("%s: load: %d messages, %v", f.name, len(got), err)
		}
		for i, m := range got {
			if m.Text != msg(i).Text {
				t.Fatalf("%s: message %d = %q", f.name, i, m.Text)
			}
		}
	}
	if _, err := conversation.ParseFormat("objekts"); err == nil || !strings.Contains(err.Error(), "inline") {
		t.Fatalf("ParseFormat(objekts) = %v, want an error naming the formats", err)
	}
}

func TestSessionIDsMapToSafeKeys(t *testing.T) {
	ctx := context.Background()
	s := conversation.New(openStore(t))
	for _, id := range []string{"ses_ok", "../../etc", "with space/and slash", ""} {
		ref, err := s.Append(ctx, id, conversation.Ref{}, msg(1))
		if err != nil {
			t.Fatalf("session %q: %v", id, err)
		}
		if got, err := s.Load(ctx, ref); err != nil || len(got) != 1 {
			t.Fatalf("session %q: %v %v", id, got, err)
		}
	}
}

// gate is a store whose Puts (or Gets) each wait until want of them are in
// flight at once: it proves that a caller issues them concurrently. Calls
// that never meet fail after a deadline rather than hang the test.
type gate struct {
	conversation.Objects
	gets    bool // gate Gets, not Puts
	pass    int  // calls let through before the gate
	want    int
	mu      sync.Mutex
	arrived int
	open    chan struct{}
}

func newGate(objects conversation.Objects, want int, gets bool) *gate {
	return &gate{Objects: objects, want: want, gets: gets, open: make(chan struct{})}
}

func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	if g.pass > 0 {
		g.pass--
		g.mu.Unlock()
		return nil
	}
	g.arrived++
	if g.arrived == g.want {
		close(g.open)
	}
	g.mu.Unlock()
	select {
	case <-g.open:
		return nil
	case <-time.After(10 * time.Second):
		g.mu.Lock()
		defer g.mu.Unlock()
		return fmt.Errorf("only %d of %d calls were in flight at once", g.arrived, g.want)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gate) Put(ctx context.Context, key string, data []byte) error {
	if !g.gets {
		if err := g.wait(ctx); err != nil {
			return err
		}
	}
	return g.Objects.Put(ctx, key, data)
}

func (g *gate) Get(ctx context.Context, key string) ([]byte, error) {
	if g.gets {
		if err := g.wait(ctx); err != nil {
			return nil, err
		}
	}
	return g.Objects.Get(ctx, key)
}

// An append writes its messages and its manifest at once, not one after
// another (each write to S3 is a round trip, each to a file an fsync), and a
// load of a conversation the cache lacks reads its messages at once too.
func TestAppendWritesAndLoadReadsConcurrently(t *testing.T) {
	ctx := context.Background()
	t.Run("objects", func(t *testing.T) {
		objects := openStore(t)
		// Three messages and the manifest: four writes in flight together.
		writer := conversation.NewFormat(newGate(objects, 4, false), conversation.FormatObjects)
		ref, err := writer.Append(ctx, "ses_1", conversation.Ref{}, msg(0), msg(1), msg(2))
		if err != nil {
			t.Fatal(err)
		}
		if got := objects.Stats().Puts; got != 4 {
			t.Fatalf("%d puts, want 4", got)
		}
		// A fresh store (empty cache) reads the manifest, then the three
		// messages together.
		g := newGate(objects, 3, true)
		g.pass = 1
		reader := conversation.New(g)
		got, err := reader.Load(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[0].Text != msg(0).Text || got[2].Text != msg(2).Text {
			t.Fatalf("loaded %+v", got)
		}
	})
	t.Run("inline", func(t *testing.T) {
		objects := openStore(t)
		// 600 messages in one append: three chunks, written together.
		var msgs []model.Message
		for i := range 600 {
			msgs = append(msgs, msg(i))
		}
		writer := conversation.New(newGate(objects, 3, false))
		ref, err := writer.Append(ctx, "ses_1", conversation.Ref{}, msgs...)
		if err != nil {
			t.Fatal(err)
		}
		if got := objects.Stats().Puts; got != 3 {
			t.Fatalf("%d puts, want 3", got)
		}
		// A fresh store reads the three chunks and nothing else: they hold
		// the messages.
		before := objects.Stats().Gets
		got, err := conversation.New(objects).Load(ctx, ref)
		if err != nil || len(got) != 600 || got[0].Text != msg(0).Text || got[599].Text != msg(599).Text {
			t.Fatalf("loaded %d messages, %v", len(got), err)
		}
		if gets := objects.Stats().Gets - before; gets != 3 {
			t.Fatalf("%d gets, want 3", gets)
		}
	})
}

// A failed write fails the append, and the append's retry stores the
// conversation whole.
func TestAppendFailedWriteThenRetry(t *testing.T) {
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			ctx := context.Background()
			objects := openStore(t)
			flaky := &failNth{Objects: objects, fail: int(f.puts(3))}
			s := conversation.NewFormat(flaky, f.format)
			if _, err := s.Append(ctx, "ses_1", conversation.Ref{}, msg(0), msg(1), msg(2)); err == nil {
				t.Fatal("append with a failed write succeeded")
			}
			ref, err := s.Append(ctx, "ses_1", conversation.Ref{}, msg(0), msg(1), msg(2))
			if err != nil {
				t.Fatal(err)
			}
			got, err := conversation.New(objects).Load(ctx, ref)
			if err != nil || len(got) != 3 {
				t.Fatalf("load after retry: %d messages, %v", len(got), err)
			}
		})
	}
}

// failNth fails its fail-th Put.
type failNth struct {
	conversation.Objects
	mu   sync.Mutex
	n    int
	fail int
}

func (f *failNth) Put(ctx context.Context, key string, data []byte) error {
	f.mu.Lock()
	f.n++
	n := f.n
	f.mu.Unlock()
	if n == f.fail {
		return errors.New("disk full")
	}
	return f.Objects.Put(ctx, key, data)
}

// ReplaceLast swaps the last message only: the messages before it, the
// count and the size follow (as if appended so), it writes one message and
// one chunk, and the base conversation is unchanged.
func TestReplaceLast(t *testing.T) {
	ctx := context.Background()
	for _, f := range formats {
		for _, n := range []int{1, 3, 256, 258} {
			objects := openStore(t)
			s := conversation.NewFormat(objects, f.format)
			var msgs []model.Message
			for i := 0; i < n; i++ {
				msgs = append(msgs, msg(i))
			}
			base, err := s.Append(ctx, "ses_1", conversation.Ref{}, msgs...)
			if err != nil {
				t.Fatal(err)
			}
			edited := model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: "refund", Input: json.RawMessage(`{"amount":5}`)}}}
			before := objects.Stats().Puts
			got, err := conversation.NewFormat(objects, f.format).ReplaceLast(ctx, "ses_1", base, edited)
			if err != nil {
				t.Fatal(err)
			}
			if puts := objects.Stats().Puts - before; puts != f.puts(1) {
				t.Fatalf("%s n=%d: %d writes, want %d (the message and its chunk)", f.name, n, puts, f.puts(1))
			}
			want, err := s.Append(ctx, "ses_1", conversation.Ref{}, append(append([]model.Message(nil), msgs[:n-1]...), edited)...)
			if err != nil {
				t.Fatal(err)
			}
			if got.Messages != want.Messages || got.Bytes != want.Bytes {
				t.Fatalf("%s n=%d: ref %+v, want the count and size of %+v (the same conversation appended whole)", f.name, n, got, want)
			}
			fresh := conversation.New(objects)
			loaded, err := fresh.Load(ctx, got)
			if err != nil || len(loaded) != n || string(loaded[n-1].ToolCalls[0].Input) != `{"amount":5}` || (n > 1 && loaded[n-2].Text != msgs[n-2].Text) {
				t.Fatalf("%s n=%d: loaded %d messages, %v", f.name, n, len(loaded), err)
			}
			if old, _ := fresh.Load(ctx, base); old[n-1].Text != msgs[n-1].Text {
				t.Fatalf("%s n=%d: the base changed: %+v", f.name, n, old[n-1])
			}
		}
		if _, err := conversation.NewFormat(openStore(t), f.format).ReplaceLast(ctx, "ses_1", conversation.Ref{}, model.Message{}); err == nil {
			t.Fatal("replacing in an empty conversation succeeded")
		}
	}
}

// An inline manifest lists its chunk's keys compactly (relative to the
// session, a run of one manifest's messages as a range): its appends
// write less than half of what one object per message writes, and a cold
// load still reads every message.
func TestInlineKeysCompact(t *testing.T) {
	ctx := context.Background()
	last := map[string]int64{}
	for _, f := range formats {
		objects := openStore(t)
		s := conversation.NewFormat(objects, f.format)
		var ref conversation.Ref
		for i := 0; i < 254; i += 2 {
			before := objects.Stats().BytesWritten
			var err error
			if ref, err = s.Append(ctx, "ses_01M8X4CBJW717089H1B15YX382", ref, msg(i), msg(i+1)); err != nil {
				t.Fatal(err)
			}
			last[f.name] = objects.Stats().BytesWritten - before
		}
		got, err := conversation.New(objects).Load(ctx, ref)
		if err != nil || len(got) != 254 || got[253].Text != msg(253).Text {
			t.Fatalf("%s: loaded %d messages, %v", f.name, len(got), err)
		}
	}
	if last["inline"]*2 > last["objects"] {
		t.Fatalf("the 127th append wrote %d bytes inline, %d as objects: want less than half", last["inline"], last["objects"])
	}
}

// A manifest whose key range is corrupt fails its load, naming it.
func TestBadKeyRange(t *testing.T) {
	ctx := context.Background()
	objects := openStore(t)
	key := "sessions/ses_1/conversation-bad"
	if err := objects.Put(ctx, key, []byte(`{"keys":["#3-1"],"bytes":1}`)); err != nil {
		t.Fatal(err)
	}
	_, err := conversation.New(objects).Load(ctx, conversation.Ref{Manifest: key, Messages: 1, Bytes: 1})
	if err == nil || !strings.Contains(err.Error(), `bad key range "#3-1"`) {
		t.Fatalf("load = %v, want a bad key range error", err)
	}
}

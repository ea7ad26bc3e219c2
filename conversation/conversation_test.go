package conversation_test

import (
	"context"
	"fmt"
	"testing"

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

// A long conversation reads back whole and in order, also by a process
// that never saw it written (empty cache), and each append writes an amount
// that does not grow with the conversation's length.
func TestAppendLoadChunks(t *testing.T) {
	ctx := context.Background()
	objects := openStore(t)
	s := conversation.New(objects)
	var ref conversation.Ref
	var perAppend []int64
	for i := 0; i < 1000; i++ {
		before := objects.Stats().BytesWritten
		var err error
		ref, err = s.Append(ctx, "ses_1", ref, msg(i))
		if err != nil {
			t.Fatal(err)
		}
		perAppend = append(perAppend, objects.Stats().BytesWritten-before)
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
	b, _ := fresh.Append(ctx, "ses_1", ref, msg(1000))
	if a != b {
		t.Fatalf("appends differ: %+v %+v", a, b)
	}
	// An earlier ref still reads its own prefix.
	prefix, err := fresh.Load(ctx, conversation.Ref{})
	if err != nil || prefix != nil {
		t.Fatalf("empty ref: %v %v", prefix, err)
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

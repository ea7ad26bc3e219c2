package notify

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/eve-temporal/eve/internal/notify/pgtest"
)

// Two PostgreSQL buses on one database: what one is told, the other hears
// (and so does the first); a burst for one session coalesces.
func TestPostgresBus(t *testing.T) {
	url := pgtest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := OpenPostgres(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenPostgres(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan [2]any, 100)
	defer b.Subscribe(func(id string, n int) { got <- [2]any{id, n} })()
	for i := 1; i <= 50; i++ {
		a.Notify("ses_1", i)
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case m := <-got:
			if m[0] != "ses_1" {
				t.Fatalf("heard %v", m)
			}
			if m[1] == 50 {
				return
			}
		case <-deadline:
			t.Fatal("no notification with the last count within 5 s")
		}
	}
}

func TestOpenSettings(t *testing.T) {
	if b, err := Open(context.Background(), "", nil); b != nil || err != nil {
		t.Fatalf("empty: %v %v", b, err)
	}
	if b, err := Open(context.Background(), "local", nil); b == nil || err != nil {
		t.Fatalf("local: %v %v", b, err)
	}
	if _, err := Open(context.Background(), "redis://u:secret@h", nil); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("unknown scheme: %v", err)
	}
}

// Package storetest is the conformance suite every payloadstore.Store must
// pass:
//
//	func TestMyStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) payloadstore.Store { return openMine(t) })
//	}
//
// open must return an empty store (or one whose keys the suite's keys do not
// collide with); it is called once per subtest.
package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/eve-temporal/eve/payloadstore"
)

// Run runs the suite as subtests of t.
func Run(t *testing.T, open func(t *testing.T) payloadstore.Store) {
	ctx := func(t *testing.T) context.Context {
		c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		t.Cleanup(cancel)
		return c
	}

	t.Run("PutGet", func(t *testing.T) {
		s := open(t)
		want := []byte("hello, store")
		if err := s.Put(ctx(t), "roundtrip", want); err != nil {
			t.Fatalf("put: %v", err)
		}
		got, err := s.Get(ctx(t), "roundtrip")
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("get = %q, want %q", got, want)
		}
		if err := s.Put(ctx(t), "empty", nil); err != nil {
			t.Fatalf("put empty: %v", err)
		}
		if got, err := s.Get(ctx(t), "empty"); err != nil || len(got) != 0 {
			t.Fatalf("get empty = %q, %v; want no bytes", got, err)
		}
	})

	t.Run("Overwrite", func(t *testing.T) {
		s := open(t)
		for _, v := range []string{"first", "second, longer than the first", "third"} {
			if err := s.Put(ctx(t), "over/write", []byte(v)); err != nil {
				t.Fatalf("put %q: %v", v, err)
			}
			got, err := s.Get(ctx(t), "over/write")
			if err != nil || string(got) != v {
				t.Fatalf("get = %q, %v; want %q", got, err, v)
			}
		}
	})

	t.Run("Missing", func(t *testing.T) {
		s := open(t)
		for _, key := range []string{"missing", "no/such/dir/key"} {
			_, err := s.Get(ctx(t), key)
			if !errors.Is(err, payloadstore.ErrNotFound) {
				t.Errorf("get %s: err = %v, want one wrapping ErrNotFound", key, err)
			}
		}
	})

	t.Run("NestedKeys", func(t *testing.T) {
		s := open(t)
		keys := []string{"a/b/c", "a/b/d", "a/e", "x.y_z-1/2/3/4/5/6", "A-Z.09_"}
		for _, k := range keys {
			if err := s.Put(ctx(t), k, []byte("v:"+k)); err != nil {
				t.Fatalf("put %s: %v", k, err)
			}
		}
		for _, k := range keys {
			got, err := s.Get(ctx(t), k)
			if err != nil || string(got) != "v:"+k {
				t.Fatalf("get %s = %q, %v; want %q", k, got, err, "v:"+k)
			}
		}
		if _, err := s.Get(ctx(t), "a/b"); !errors.Is(err, payloadstore.ErrNotFound) {
			t.Errorf("get of a key's parent a/b: err = %v, want ErrNotFound", err)
		}
	})

	t.Run("BadKeys", func(t *testing.T) {
		s := open(t)
		for _, k := range []string{"", "/", "/abs", "trailing/", "a//b", ".", "..", "a/../b", "a/./b", "../escape",
			"sp ace", "back\\slash", "q?uery", "h#ash", "colon:", "star*", "tab\t", "nul\x00", "é"} {
			if err := s.Put(ctx(t), k, []byte("x")); err == nil {
				t.Errorf("put %q succeeded, want an error", k)
			}
			if _, err := s.Get(ctx(t), k); err == nil || errors.Is(err, payloadstore.ErrNotFound) {
				t.Errorf("get %q: err = %v, want a bad-key error (not ErrNotFound)", k, err)
			}
		}
	})

	t.Run("Large", func(t *testing.T) {
		s := open(t)
		big := make([]byte, 5<<20)
		rand.Read(big)
		if err := s.Put(ctx(t), "large/object", big); err != nil {
			t.Fatalf("put 5 MB: %v", err)
		}
		got, err := s.Get(ctx(t), "large/object")
		if err != nil {
			t.Fatalf("get 5 MB: %v", err)
		}
		if !bytes.Equal(got, big) {
			t.Fatalf("got %d bytes back, not the %d put", len(got), len(big))
		}
	})

	t.Run("ConcurrentPuts", func(t *testing.T) {
		s := open(t)
		data := bytes.Repeat([]byte("same bytes "), 20000)
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := 0; i < 16; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.Put(ctx(t), "concurrent/key", data); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("concurrent put: %v", err)
		}
		got, err := s.Get(ctx(t), "concurrent/key")
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("get after concurrent puts: %d bytes, %v; want the %d put", len(got), err, len(data))
		}
	})

	t.Run("Location", func(t *testing.T) {
		s := open(t)
		if s.Location() == "" {
			t.Fatal("Location is empty")
		}
	})

	t.Run("Driver", func(t *testing.T) {
		s := open(t)
		d := payloadstore.Driver(s)
		if d.Name() != payloadstore.DriverName || d.Type() != payloadstore.DriverType {
			t.Fatalf("driver %s/%s, want %s/%s", d.Name(), d.Type(), payloadstore.DriverName, payloadstore.DriverType)
		}
		big := make([]byte, 300<<10)
		rand.Read(big)
		payloads := []*commonpb.Payload{
			{Metadata: map[string][]byte{"encoding": []byte("binary/plain"), "k": []byte("v")}, Data: big},
			{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"small"`)},
			{Metadata: map[string][]byte{"encoding": []byte("binary/plain"), "k": []byte("v")}, Data: big}, // same as the first
		}
		claims, err := d.Store(converter.StorageDriverStoreContext{Context: ctx(t)}, payloads)
		if err != nil {
			t.Fatalf("Store: %v", err)
		}
		if len(claims) != len(payloads) {
			t.Fatalf("Store returned %d claims for %d payloads", len(claims), len(payloads))
		}
		if claims[0].ClaimData["key"] == "" || claims[0].ClaimData["key"] != claims[2].ClaimData["key"] || claims[0].ClaimData["key"] == claims[1].ClaimData["key"] {
			t.Fatalf("claims %v: want content-addressed keys (equal payloads, equal keys)", claims)
		}
		// Retried stores rewrite the same objects.
		again, err := d.Store(converter.StorageDriverStoreContext{Context: ctx(t), Limiter: &countingLimiter[*commonpb.Payload]{}}, payloads)
		if err != nil || fmt.Sprint(again) != fmt.Sprint(claims) {
			t.Fatalf("Store again = %v, %v; want the same claims %v", again, err, claims)
		}
		lim := &countingLimiter[converter.StorageDriverClaim]{}
		got, err := d.Retrieve(converter.StorageDriverRetrieveContext{Context: ctx(t), Limiter: lim}, claims)
		if err != nil {
			t.Fatalf("Retrieve: %v", err)
		}
		if lim.n() != len(claims) {
			t.Errorf("Retrieve took %d permits for %d claims", lim.n(), len(claims))
		}
		if len(got) != len(payloads) {
			t.Fatalf("Retrieve returned %d payloads for %d claims", len(got), len(claims))
		}
		for i := range payloads {
			if !proto.Equal(got[i], payloads[i]) {
				t.Errorf("payload %d differs after Store and Retrieve", i)
			}
		}
		_, err = d.Retrieve(converter.StorageDriverRetrieveContext{Context: ctx(t)},
			[]converter.StorageDriverClaim{{ClaimData: map[string]string{"key": "payloads/sha256/00"}}})
		if !errors.Is(err, payloadstore.ErrNotFound) {
			t.Errorf("Retrieve of a missing key: err = %v, want ErrNotFound", err)
		}
	})
}

type countingLimiter[T any] struct {
	mu    sync.Mutex
	count int
}

func (l *countingLimiter[T]) Permit(ctx context.Context, _ T, fn func() error) error {
	l.mu.Lock()
	l.count++
	l.mu.Unlock()
	return fn()
}

func (l *countingLimiter[T]) n() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count
}

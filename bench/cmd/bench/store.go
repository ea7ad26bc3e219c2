package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/eve-temporal/eve/payloadstore"
)

// openStore opens the payload store a target's clients and agents use:
// -store file (eve's default store, fsync'ed files under dir) or mem (in
// this process, to show what the store costs), with -store-delay added to
// each call (a remote store's round trip, S3's for example).
func openStore(ctx context.Context, f flags, dir string) (payloadstore.Store, error) {
	var s payloadstore.Store
	switch f.store {
	case "file":
		var err error
		if s, err = payloadstore.Open(ctx, "file:"+dir); err != nil {
			return nil, err
		}
	case "mem":
		s = &memStore{objects: map[string][]byte{}}
	default:
		return nil, fmt.Errorf("-store %q: want file or mem", f.store)
	}
	if f.storeDelay > 0 {
		s = delayStore{Store: s, delay: f.storeDelay}
	}
	return s, nil
}

// memStore keeps objects in a map.
type memStore struct {
	mu      sync.Mutex
	objects map[string][]byte
}

func (s *memStore) Put(ctx context.Context, key string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[key] = append([]byte(nil), data...)
	return nil
}

func (s *memStore) Get(ctx context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.objects[key]
	if !ok {
		return nil, fmt.Errorf("%w: %s in mem:", payloadstore.ErrNotFound, key)
	}
	return b, nil
}

func (s *memStore) Location() string { return "mem:" }

// delayStore waits before each call.
type delayStore struct {
	payloadstore.Store
	delay time.Duration
}

func (s delayStore) wait(ctx context.Context) error {
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s delayStore) Put(ctx context.Context, key string, data []byte) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	return s.Store.Put(ctx, key, data)
}

func (s delayStore) Get(ctx context.Context, key string) ([]byte, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.Store.Get(ctx, key)
}

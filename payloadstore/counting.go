package payloadstore

import (
	"context"
	"sync/atomic"
)

// Stats counts a Counting store's successful operations.
type Stats struct {
	Puts, Gets              int64
	BytesWritten, BytesRead int64
}

// Counting wraps a store and counts what goes through it (the bench reports
// the bytes written per turn). It is safe for concurrent use.
type Counting struct {
	s                       Store
	puts, gets              atomic.Int64
	bytesWritten, bytesRead atomic.Int64
}

// NewCounting wraps s.
func NewCounting(s Store) *Counting { return &Counting{s: s} }

var _ Store = (*Counting)(nil)

// Put writes through and counts the bytes on success.
func (c *Counting) Put(ctx context.Context, key string, data []byte) error {
	if err := c.s.Put(ctx, key, data); err != nil {
		return err
	}
	c.puts.Add(1)
	c.bytesWritten.Add(int64(len(data)))
	return nil
}

// Get reads through and counts the bytes on success.
func (c *Counting) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := c.s.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	c.gets.Add(1)
	c.bytesRead.Add(int64(len(b)))
	return b, nil
}

// Location is the wrapped store's.
func (c *Counting) Location() string { return c.s.Location() }

// Stats returns the counts so far.
func (c *Counting) Stats() Stats {
	return Stats{Puts: c.puts.Load(), Gets: c.gets.Load(), BytesWritten: c.bytesWritten.Load(), BytesRead: c.bytesRead.Load()}
}

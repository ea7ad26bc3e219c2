package notify

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Channel is the PostgreSQL channel of the notifications.
const Channel = "eve_sessions"

// maxPayload keeps a NOTIFY payload under PostgreSQL's 8000-byte limit.
const maxPayload = 7000

// Postgres is a Bus over PostgreSQL LISTEN/NOTIFY. Notify queues (one
// pending count per session, so a burst of deltas costs one notification
// per round trip); a publisher connection sends the queue in payloads of
// "events sessionID" lines; a listener connection delivers them. Both
// reconnect with backoff; after the listener reconnects, subscribers hear
// "" (anything may have changed).
type Postgres struct {
	url   string
	log   *slog.Logger
	local *Local
	mu    sync.Mutex
	queue map[string]int
	kick  chan struct{}
}

// OpenPostgres connects to url and runs the bus until ctx ends. It returns
// once the listener listens (or with the first connection's error).
func OpenPostgres(ctx context.Context, url string, logger *slog.Logger) (*Postgres, error) {
	if logger == nil {
		logger = slog.Default()
	}
	p := &Postgres{url: url, log: logger, local: NewLocal(), queue: map[string]int{}, kick: make(chan struct{}, 1)}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, url)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(cctx, "LISTEN "+Channel); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	go p.listen(ctx, conn)
	go p.publish(ctx)
	return p, nil
}

// Notify queues the notification; it never blocks.
func (p *Postgres) Notify(sessionID string, events int) {
	p.mu.Lock()
	if n, ok := p.queue[sessionID]; !ok || events > n {
		p.queue[sessionID] = events
	}
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Subscribe adds fn.
func (p *Postgres) Subscribe(fn func(string, int)) func() { return p.local.Subscribe(fn) }

func backoff(attempt int) time.Duration {
	return min(50*time.Millisecond<<min(attempt, 6), 3*time.Second)
}

func (p *Postgres) listen(ctx context.Context, conn *pgx.Conn) {
	for attempt := 0; ; {
		if conn != nil {
			for {
				n, err := conn.WaitForNotification(ctx)
				if err != nil {
					break
				}
				attempt = 0
				for _, line := range strings.Split(n.Payload, "\n") {
					count, id, ok := strings.Cut(line, " ")
					if !ok || id == "" {
						continue
					}
					c, _ := strconv.Atoi(count)
					p.local.Notify(id, c)
				}
			}
			conn.Close(context.Background())
			conn = nil
		}
		if ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff(attempt)):
		}
		attempt++
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c, err := pgx.Connect(cctx, p.url)
		if err == nil {
			if _, err = c.Exec(cctx, "LISTEN "+Channel); err != nil {
				c.Close(context.Background())
			}
		}
		cancel()
		if err != nil {
			p.log.Warn("notify: PostgreSQL listener reconnecting", "err", err)
			continue
		}
		conn = c
		p.log.Info("notify: PostgreSQL listener reconnected")
		p.local.Notify("", 0) // notifications may have been lost meanwhile
	}
}

func (p *Postgres) publish(ctx context.Context) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	attempt := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		}
		for {
			// Swap the queue under the lock; an empty one stays (and is
			// never read outside the lock: Notify writes to it).
			p.mu.Lock()
			q := p.queue
			empty := len(q) == 0
			if !empty {
				p.queue = map[string]int{}
			}
			p.mu.Unlock()
			if empty {
				break
			}
			var payloads []string
			var b strings.Builder
			for id, n := range q {
				line := strconv.Itoa(n) + " " + id
				if b.Len() > 0 && b.Len()+1+len(line) > maxPayload {
					payloads = append(payloads, b.String())
					b.Reset()
				}
				if b.Len() > 0 {
					b.WriteByte('\n')
				}
				b.WriteString(line)
			}
			payloads = append(payloads, b.String())
			for {
				err := ctx.Err()
				if err != nil {
					return
				}
				if conn == nil {
					cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					conn, err = pgx.Connect(cctx, p.url)
					cancel()
				}
				if err == nil {
					batch := &pgx.Batch{}
					for _, pl := range payloads {
						batch.Queue("SELECT pg_notify($1, $2)", Channel, pl)
					}
					cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					err = conn.SendBatch(cctx, batch).Close()
					cancel()
					if err != nil {
						conn.Close(context.Background())
						conn = nil
					}
				}
				if err == nil {
					attempt = 0
					break
				}
				// Readers fall back to their next change or reconnect; keep
				// trying with what is queued (newer counts win).
				p.log.Warn("notify: PostgreSQL publisher retrying", "err", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff(attempt)):
				}
				attempt++
			}
		}
	}
}

package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/eve-temporal/eve/protocol"
)

// Decision is one settled request of the decision record.
type Decision = protocol.Decision

// DecisionFilter chooses what Decisions exports: one session's record
// (SessionID), or every readable session's decisions made since Since (and
// until Until). Tool, Principal (a requester's or decider's id) and Outcome
// narrow either.
type DecisionFilter struct {
	SessionID    string
	Since, Until time.Time
	Tool         string
	Principal    string
	Outcome      string
}

// Decisions streams the decision record (GET /eve/v1/decisions, JSON
// lines) to fn, a record at a time, in the order they were made within
// each session; fn's error stops the export and is returned.
func (c *Client) Decisions(ctx context.Context, f DecisionFilter, fn func(Decision) error) error {
	q := query(map[string]string{"session": f.SessionID, "tool": f.Tool, "principal": f.Principal, "outcome": f.Outcome}, 0)
	if !f.Since.IsZero() {
		q.Set("since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	if !f.Until.IsZero() {
		q.Set("until", f.Until.UTC().Format(time.RFC3339Nano))
	}
	req, err := c.newRequest(ctx, http.MethodGet, "/eve/v1/decisions", q, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return decodeError(resp.StatusCode, data)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var d struct {
			Decision
			protocol.DecisionsIncomplete
		}
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			return fmt.Errorf("GET /eve/v1/decisions: decode a line: %w", err)
		}
		if d.Incomplete {
			return &IncompleteDecisionsError{Sessions: d.Sessions, Message: d.DecisionsIncomplete.Error}
		}
		if err := fn(d.Decision); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("GET /eve/v1/decisions: read the export: %w", err)
	}
	return nil
}

// IncompleteDecisionsError ends an export across sessions that could not
// read some of them: every record passed to fn before it is true, but
// those sessions' are missing.
type IncompleteDecisionsError struct {
	Sessions []string
	Message  string
}

func (e *IncompleteDecisionsError) Error() string { return "decisions export incomplete: " + e.Message }

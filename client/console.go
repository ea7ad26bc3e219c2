package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/eve-temporal/eve/protocol"
)

// SessionFilter narrows Sessions; every field is optional.
type SessionFilter struct {
	// Status is idle, running, waiting-input, waiting-tasks or closed.
	Status string
	// Owner is the owner's principal id.
	Owner string
	// Tool: sessions waiting on this tool.
	Tool string
	// Limit is the sessions one page holds (default 50, at most 200).
	Limit  int
	Cursor string
}

// SessionPage is a page of sessions, newest first.
type SessionPage = protocol.SessionPage

// Sessions lists the sessions the caller may stream (GET /eve/v1/sessions).
// A page has a NextCursor only when full: follow it until it is empty.
func (c *Client) Sessions(ctx context.Context, f SessionFilter) (SessionPage, error) {
	var p SessionPage
	err := c.getJSON(ctx, "/eve/v1/sessions", query(map[string]string{"status": f.Status, "owner": f.Owner, "tool": f.Tool, "cursor": f.Cursor}, f.Limit), &p)
	return p, err
}

// JobFilter narrows Jobs; every field is optional.
type JobFilter struct {
	SessionID string
	Tool      string
	Limit     int
	Cursor    string
}

// JobPage is a page of delegated jobs.
type JobPage = protocol.JobPage

// Jobs lists the delegated jobs running turns wait on, with their deadline
// and last heartbeat, that the caller may cancel (GET /eve/v1/jobs).
// Cancel one with Cancel on its session (its turn's jobs stop together).
func (c *Client) Jobs(ctx context.Context, f JobFilter) (JobPage, error) {
	var p JobPage
	err := c.getJSON(ctx, "/eve/v1/jobs", query(map[string]string{"session": f.SessionID, "tool": f.Tool, "cursor": f.Cursor}, f.Limit), &p)
	return p, err
}

func query(params map[string]string, limit int) url.Values {
	q := url.Values{}
	for k, v := range params {
		if v != "" {
			q.Set(k, v)
		}
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return q
}

// getJSON GETs path and decodes a 200 answer into out.
func (c *Client) getJSON(ctx context.Context, path string, q url.Values, out any) error {
	req, err := c.newRequest(ctx, http.MethodGet, path, q, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return decodeError(resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("GET %s: decode answer: %w", path, err)
	}
	return nil
}

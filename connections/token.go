package connections

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/eve-temporal/eve/auth"
)

// maxCachedTokens bounds a worker's token cache (one entry per connection
// and principal).
const maxCachedTokens = 4096

// tokenCache keeps each connection's token per principal on this worker,
// so a call asks GetToken only when its token is missing, about to
// expire, or refused.
type tokenCache struct {
	mu     sync.Mutex
	tokens map[string]Token // by identity and principal
}

func (tc *tokenCache) get(ctx context.Context, c *Connection, p *auth.Principal, force bool) (string, error) {
	key := c.identity() + "\x00"
	if p != nil {
		key += p.ID
	}
	tc.mu.Lock()
	t, ok := tc.tokens[key]
	tc.mu.Unlock()
	if ok && !force && (t.ExpiresAt.IsZero() || time.Until(t.ExpiresAt) > TokenRefreshMargin) {
		return t.Value, nil
	}
	t, err := c.Auth.GetToken(ctx, p)
	if err != nil {
		// GetToken's own message, which must not hold the token.
		return "", fmt.Errorf("connection %q: get its token: %w", c.Name, err)
	}
	if t.Value == "" {
		return "", fmt.Errorf("connection %q: GetToken returned an empty token", c.Name)
	}
	tc.mu.Lock()
	if tc.tokens == nil {
		tc.tokens = map[string]Token{}
	}
	if len(tc.tokens) >= maxCachedTokens {
		// Bounded: drop the expired ones, or all when none is (a token
		// not kept is fetched again).
		for k, old := range tc.tokens {
			if !old.ExpiresAt.IsZero() && time.Until(old.ExpiresAt) <= TokenRefreshMargin {
				delete(tc.tokens, k)
			}
		}
		if len(tc.tokens) >= maxCachedTokens {
			clear(tc.tokens)
		}
	}
	tc.tokens[key] = t
	tc.mu.Unlock()
	return t.Value, nil
}

// httpClient is the client of one call or discovery: it sets the
// connection's headers and bearer token on every request, and on a 401
// gets a fresh token and sends the request once more.
func (r *runtime) httpClient(c *Connection, p *auth.Principal) *http.Client {
	return &http.Client{Transport: &authTransport{rt: r, c: c, p: p, base: http.DefaultTransport}}
}

type authTransport struct {
	rt   *runtime
	c    *Connection
	p    *auth.Principal
	base http.RoundTripper
}

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	send := func(force bool) (*http.Response, error) {
		out := req.Clone(req.Context())
		if force && req.Body != nil {
			if req.GetBody == nil {
				return nil, errors.New("cannot resend the request after a 401")
			}
			b, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			out.Body = b
		}
		for k, v := range t.c.Headers {
			out.Header.Set(k, v)
		}
		if t.c.Auth != nil {
			tok, err := t.rt.tokens.get(req.Context(), t.c, t.p, force)
			if err != nil {
				return nil, err
			}
			out.Header.Set("Authorization", "Bearer "+tok)
		}
		return t.base.RoundTrip(out)
	}
	resp, err := send(false)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || t.c.Auth == nil {
		return resp, err
	}
	if req.Body != nil && req.GetBody == nil {
		return resp, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return send(true)
}

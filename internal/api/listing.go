package api

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.temporal.io/api/serviceerror"

	"github.com/eve-temporal/eve/auth"
)

// The listings (GET /eve/v1/inbox, /sessions, /jobs) page over what the
// caller may see, never over what Visibility matched: a page holds only
// items the caller may see, and a cursor comes only with a full page
// (limit items the caller may see) or after MaxListScan entries were read,
// so an empty page never carries one because of someone else's entries.
// The cursor is sealed (AES-GCM): it names Visibility's position, which may
// be another principal's entry, so it must be opaque, and a cursor that was
// changed, or issued for another listing, caller or filters, is refused
// before anything reaches Temporal. docs/http-api.md, "Listings".

// MaxListScan bounds the Visibility entries one listing page reads. A page
// that read this many without filling stops there, with a cursor: all the
// caller learns is that more than MaxListScan entries match its filters.
const MaxListScan = 5000

// listScanPage is the Visibility page size once a listing page reads on
// past its first query (a caller that sees few of the entries).
const listScanPage = 500

// ListTimeout bounds one Visibility query of a listing. Past it the answer
// is 504 visibility_timeout: a query the store could not answer in time
// is not one to retry as it is.
const ListTimeout = 10 * time.Second

// CodeVisibilityTimeout: Visibility did not answer a listing in time.
const CodeVisibilityTimeout = "visibility_timeout"

// MaxCursorLength bounds ?cursor= (characters), checked before anything
// decodes it; the cursors this server issues are far shorter.
const MaxCursorLength = 2048

// MaxFilterLength bounds a listing's filter value (bytes).
const MaxFilterLength = 256

// listPos is a listing's position: where its next page starts.
type listPos struct {
	// Token is Visibility's page token (none: the first page); Size the
	// page size it was read with, so the same page reads again.
	Token []byte `json:"t,omitempty"`
	Size  int    `json:"s,omitempty"`
	// After is the key of the last entry of that page already listed.
	After string `json:"a,omitempty"`
	// End: nothing follows (the last page was full).
	End bool `json:"e,omitempty"`
}

// cursorSealer seals and opens listing cursors.
type cursorSealer struct{ aead cipher.AEAD }

// newCursorSealer keys cursors with secret (every API server of a
// deployment given the same one opens the others' cursors), or with a
// random key when secret is empty.
func newCursorSealer(secret []byte) (*cursorSealer, error) {
	key := make([]byte, 32)
	if len(secret) == 0 {
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("api: a key for listing cursors: %w", err)
		}
	} else {
		mac := hmac.New(sha256.New, secret)
		mac.Write([]byte("eve.listing-cursor/v1"))
		key = mac.Sum(nil)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &cursorSealer{aead: aead}, nil
}

func (c *cursorSealer) seal(scope string, p listPos) string {
	plain, _ := json.Marshal(p)
	nonce := make([]byte, c.aead.NonceSize())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(c.aead.Seal(nonce, nonce, plain, []byte(scope)))
}

func (c *cursorSealer) open(scope, raw string) (listPos, error) {
	var p listPos
	bad := func(why string) (listPos, error) {
		return p, errorf(http.StatusBadRequest, CodeBadRequest, "cursor: %s: pass the previous page's nextCursor unchanged, with the same filters and API key "+
			"(a cursor lasts while the API server's key does: it changes when a server without EVE_ACTION_SECRET restarts, and servers with different secrets refuse each other's)", why)
	}
	if len(raw) > MaxCursorLength {
		return bad(fmt.Sprintf("%d characters, longer than any cursor this server issues (at most %d)", len(raw), MaxCursorLength))
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil || len(b) < c.aead.NonceSize()+c.aead.Overhead() {
		return bad("malformed")
	}
	plain, err := c.aead.Open(nil, b[:c.aead.NonceSize()], b[c.aead.NonceSize():], []byte(scope))
	if err != nil || json.Unmarshal(plain, &p) != nil {
		return bad("not one this server issued for this listing")
	}
	return p, nil
}

// listScope binds a cursor to its listing: the route, the caller and the
// filters (every query parameter but cursor and limit).
func listScope(route string, caller *auth.Principal, v url.Values) string {
	keys := make([]string, 0, len(v))
	for k := range v {
		if k != "cursor" && k != "limit" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString("eve.listing/v1\x00" + route + "\x00" + caller.Type + "\x00" + caller.ID)
	for _, k := range keys {
		for _, x := range v[k] {
			b.WriteString("\x00" + k + "=" + x)
		}
	}
	return b.String()
}

// listCursor opens the request's ?cursor= (the zero position without one).
func (s *Server) listCursor(r *http.Request, route string) (listPos, error) {
	v := r.URL.Query()
	raw := v.Get("cursor")
	if raw == "" {
		return listPos{}, nil
	}
	return s.cursors.open(listScope(route, Caller(r.Context()), v), raw)
}

// nextCursor seals the position after a page ("" when nothing follows).
func (s *Server) nextCursor(r *http.Request, route string, next *listPos) string {
	if next == nil {
		return ""
	}
	return s.cursors.seal(listScope(route, Caller(r.Context()), r.URL.Query()), *next)
}

// checkFilters refuses filter values a Visibility store cannot take in a
// query, before any query: longer than MaxFilterLength, not UTF-8, or
// holding quotes, a backslash or control characters (NUL …). Temporal
// escapes them, but its stores do not all parse the result (SQLite
// Visibility hangs on an escaped quote until the call times out), and no
// tool name, principal id or kind holds one.
func checkFilters(v url.Values, names ...string) error {
	for _, name := range names {
		for _, x := range v[name] {
			if err := checkFilter(name, x); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkFilter(name, x string) error {
	switch {
	case len(x) > MaxFilterLength:
		return errorf(http.StatusBadRequest, CodeBadRequest, "%s: %d bytes; the limit is %d", name, len(x), MaxFilterLength)
	case !utf8.ValidString(x):
		return errorf(http.StatusBadRequest, CodeBadRequest, "%s: not UTF-8", name)
	}
	for _, c := range x {
		if c == '"' || c == '\'' || c == '\\' || c == '`' || unicode.IsControl(c) {
			return errorf(http.StatusBadRequest, CodeBadRequest, "%s: %q may not hold quotes, backslashes or control characters", name, x)
		}
	}
	return nil
}

// scan reads a listing page from pos: Visibility pages (fetch), whose
// entries keep says the caller may see, until limit entries are kept (the
// page is full), Visibility has no more, or MaxListScan entries were read.
// next is the position after the page, nil when nothing follows. key
// names an entry within its Visibility page.
func scan[E any](ctx context.Context, pos listPos, limit int,
	fetch func(ctx context.Context, token []byte, size int) ([]E, []byte, error),
	key func(E) string,
	keep func(ctx context.Context, entries []E) ([]bool, error)) (kept []E, next *listPos, err error) {
	if pos.End {
		return nil, nil, nil
	}
	token, after, size := pos.Token, pos.After, pos.Size
	if size <= 0 {
		size = limit
	}
	for scanned, pages := 0, 0; ; pages++ {
		qctx, cancel := context.WithTimeout(ctx, ListTimeout)
		entries, nextToken, err := fetch(qctx, token, size)
		cancel()
		if err != nil {
			return nil, nil, err
		}
		if after != "" {
			// Resume after the last entry listed; if Visibility no longer
			// lists it, from the page's start (an entry may show twice,
			// none is skipped).
			if i := slices.IndexFunc(entries, func(e E) bool { return key(e) == after }); i >= 0 {
				entries = entries[i+1:]
			}
			after = ""
		}
		ok, err := keep(ctx, entries)
		if err != nil {
			return nil, nil, err
		}
		for i, e := range entries {
			if !ok[i] {
				continue
			}
			if kept = append(kept, e); len(kept) < limit {
				continue
			}
			// Full: the cursor follows from what the caller may see alone.
			switch {
			case i < len(entries)-1:
				return kept, &listPos{Token: token, Size: size, After: key(e)}, nil
			case len(nextToken) > 0:
				return kept, &listPos{Token: nextToken}, nil
			default:
				return kept, &listPos{End: true}, nil
			}
		}
		scanned += len(entries)
		if len(nextToken) == 0 {
			return kept, nil, nil
		}
		token, size = nextToken, max(limit, listScanPage)
		// Empty Visibility pages that still name a next one count too.
		if scanned >= MaxListScan || pages >= MaxListScan/listScanPage+1 {
			return kept, &listPos{Token: token}, nil
		}
	}
}

// listFailure maps a listing's Visibility failure: a query that did not
// answer within ListTimeout is 504 visibility_timeout (no Retry-After: the
// same query would most likely time out again), the rest as any Temporal
// error.
func (s *Server) listFailure(what string, err error) error {
	var deadline *serviceerror.DeadlineExceeded
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &deadline) {
		s.log.Warn("api: a listing's Visibility query timed out", "what", what, "err", err)
		return errorf(http.StatusGatewayTimeout, CodeVisibilityTimeout, "could not %s: Temporal Visibility did not answer the query within %s. "+
			"Its store may be overloaded, or the query too costly for it: narrow the filters (session, tool, status, a time range) or a smaller limit", what, ListTimeout)
	}
	return s.temporalError(what, "", err)
}

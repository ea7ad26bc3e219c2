// Package console serves eve's web console: static HTML, CSS and vanilla
// JavaScript embedded in the binary (no build step, no Node at run time)
// that call only the public HTTP API, on the API's origin. The page signs
// in with a bearer key it keeps in sessionStorage and sends as an
// Authorization header, never in a cookie or URL, so a cross-site page has
// nothing to forge; a strict Content-Security-Policy allows only these
// files.
package console

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var files embed.FS

// Prefix is where the console is served.
const Prefix = "/console/"

// Config is what the page reads from /console/config.json.
type Config struct {
	// TemporalUIWorkflowURL is the Temporal Web UI's workflows page of the
	// namespace (e.g. http://localhost:8233/namespaces/default/workflows);
	// the console links a turn as <this>/<workflow id>. Empty: no links.
	TemporalUIWorkflowURL string `json:"temporalUIWorkflowURL,omitempty"`
	// Open: the server has no keys (every caller is anonymous), so the page
	// asks for none.
	Open bool `json:"open"`
}

// ContentSecurityPolicy allows the console's own files and API calls only.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// Handler serves the console under Prefix (GET and HEAD).
func Handler(cfg Config) http.Handler {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	conf, _ := json.Marshal(cfg)
	static := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "the console is read-only: GET or HEAD", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(path.Clean("/"+strings.TrimPrefix(r.URL.Path, Prefix)), "/")
		switch name {
		case "", "index.html":
			// Every page of the single-page console is index.html.
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/"
			static.ServeHTTP(w, r2)
		case "config.json":
			h.Set("Content-Type", "application/json")
			w.Write(conf) //nolint:errcheck // the client went away
		default:
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/" + name
			static.ServeHTTP(w, r2)
		}
	})
}

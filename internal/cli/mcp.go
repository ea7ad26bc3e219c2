package cli

import (
	"github.com/eve-temporal/eve/internal/httpbody"

	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/eve-temporal/eve/internal/config"
	"github.com/eve-temporal/eve/internal/mcpserver"
	"github.com/eve-temporal/eve/internal/notify"
	"github.com/eve-temporal/eve/internal/toolsapi"
)

// MCPPath is where `eve mcp --http` serves streamable HTTP.
const MCPPath = "/mcp"

func newMCPCommand(app App) *cobra.Command {
	var (
		tc        config.Temporal
		httpAddr  string
		user      string
		key       string
		wireNames bool
		bareNames bool
		logLevel  string
		idle      time.Duration
		taskTools map[string]string
		oauth     oauthFlags
		origins   []string
		notifyURL string
	)
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the agent's tools over MCP: stdio by default, streamable HTTP with --http",
		Long: `mcp serves the agent's tool catalog to MCP clients with the official
Go SDK. Every tools/call runs as a durable execution workflow on the workers of
--task-queue (run {bin} worker or {bin} dev beside it), exactly like the tools API.

By default it speaks MCP on stdin/stdout (logs go to stderr), for hosts that
launch it as a subprocess:

  {"command": "{bin}", "args": ["mcp"]}

With --http ADDR it serves streamable HTTP at http://ADDR/mcp; when
EVE_API_KEY (--eve-api-key) is set, requests need Authorization: Bearer <key>.
Every HTTP request passes the MCP SDK's checks first: on a loopback address a
Host that is not loopback is refused (DNS rebinding), as are browsers'
cross-origin requests (--trusted-origin allows one) and POSTs that are not
application/json. Idle sessions close after --session-timeout.

Async tools (delegated: their result arrives later) are listed only for
clients that negotiate MCP Tasks, and run as tasks.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level %q: want debug, info, warn or error", logLevel)
			}
			// stdout carries the protocol on stdio: log to stderr only.
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: lvl}))
			a, err := app.agent()
			if err != nil {
				return err
			}
			defer closeResolvers(a, logger)
			if err := tc.UseAgentTaskQueue(a.Name); err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := tc.Dial(ctx, logger, nil)
			if err != nil {
				return err
			}
			defer c.Close()
			svc, err := toolsapi.New(toolsapi.Options{Client: c, TaskQueue: tc.TaskQueue, Agent: a, Logger: logger})
			if err != nil {
				return err
			}
			if idle == 0 {
				idle = -1 // 0 on the command line: never expire
			}
			stateKey, err := mcpStateKey()
			if err != nil {
				return err
			}
			bus, err := notify.Open(ctx, notifyURL, logger)
			if err != nil {
				return fmt.Errorf("--notify: %w", err)
			}
			srv, err := mcpserver.New(mcpserver.Options{Tools: svc, UserID: user, WireNames: wireNames, BareNames: bareNames, Logger: logger,
				SessionTimeout: idle, TrustedOrigins: origins, TaskTools: taskTools, StateKey: stateKey, Bus: bus})
			if err != nil {
				return err
			}
			if httpAddr == "" {
				t := &mcp.IOTransport{Reader: io.NopCloser(cmd.InOrStdin()), Writer: nopWriteCloser{cmd.OutOrStdout()}}
				err := srv.Serve(ctx, t)
				if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed) {
					return nil
				}
				return err
			}
			o, err := oauth.config(key)
			if err != nil {
				return err
			}
			return serveMCPHTTP(ctx, cmd.ErrOrStderr(), logger, srv, httpAddr, key, o)
		},
	}
	tc.Bind(cmd.Flags(), app.TaskQueue)
	cmd.Flags().StringVar(&httpAddr, "http", "", "serve streamable HTTP on this host:port instead of stdio (path "+MCPPath+")")
	cmd.Flags().StringVar(&user, "user", config.Env("EVE_USER_ID", ""), "user the tool calls run for (env EVE_USER_ID; default \"anonymous\")")
	cmd.Flags().StringVar(&key, "eve-api-key", config.Env("EVE_API_KEY", ""), "with --http: bearer key clients must send (env EVE_API_KEY)")
	cmd.Flags().BoolVar(&wireNames, "wire-names", false, "name tools by their provider-safe wire names (demo_get_weather) instead of canonical names (demo.get_weather)")
	cmd.Flags().BoolVar(&bareNames, "bare-names", false, "name tools by the agent's own tool names (get_weather), without the toolkit")
	cmd.Flags().StringVar(&logLevel, "log-level", config.Env("EVE_LOG_LEVEL", "warn"), "debug, info, warn or error (env EVE_LOG_LEVEL)")
	cmd.Flags().DurationVar(&idle, "session-timeout", mcpserver.DefaultSessionTimeout, "with --http: close sessions idle this long, forgetting their tasks (0: never)")
	cmd.Flags().StringVar(&oauth.issuer, "oauth-issuer", config.Env("EVE_MCP_OAUTH_ISSUER", ""), "with --http: the OAuth authorization server (issuer URL) MCP hosts get tokens from; publishes protected-resource metadata and requires its tokens (env EVE_MCP_OAUTH_ISSUER)")
	cmd.Flags().StringVar(&oauth.jwks, "oauth-jwks", config.Env("EVE_MCP_OAUTH_JWKS", ""), "with --oauth-issuer: the JWKS URL whose keys sign its tokens (RS256) (env EVE_MCP_OAUTH_JWKS)")
	cmd.Flags().StringVar(&oauth.resource, "oauth-resource", config.Env("EVE_MCP_OAUTH_RESOURCE", ""), "with --oauth-issuer: this server's public URL (https://mcp.example.com/mcp), the audience tokens must name (env EVE_MCP_OAUTH_RESOURCE)")
	cmd.Flags().StringSliceVar(&oauth.scopes, "oauth-scope", nil, "with --oauth-issuer: a scope every token must carry (repeatable)")
	cmd.Flags().StringToStringVar(&taskTools, "task-tool", nil, "a tool (its MCP name) that runs as a task for clients that negotiate MCP Tasks: NAME=optional or NAME=required (repeatable; async tools are always required)")
	cmd.Flags().StringVar(&notifyURL, "notify", config.Env("EVE_NOTIFY", ""), "bus the workers announce execution changes on (postgres://user@host:port/db, as for serve): tasks created on stdio get notifications/tasks/status; empty: clients poll tasks/get (env EVE_NOTIFY)")
	cmd.Flags().StringSliceVar(&origins, "trusted-origin", nil, "with --http: a browser origin (https://app.example.com) whose cross-origin requests are accepted (repeatable)")
	return cmd
}

// minStateKey is the shortest EVE_MCP_STATE_KEY accepted.
const minStateKey = 32

// mcpStateKey reads EVE_MCP_STATE_KEY, the secret that signs client input
// rounds' requestState (nil: a random key per process). An environment
// variable only: a secret on the command line shows in process lists.
func mcpStateKey() ([]byte, error) {
	k := config.Env("EVE_MCP_STATE_KEY", "")
	if k == "" {
		return nil, nil
	}
	if len(k) < minStateKey {
		return nil, fmt.Errorf("EVE_MCP_STATE_KEY is %d bytes: give it at least %d random bytes (openssl rand -hex 32), the same on every eve mcp instance", len(k), minStateKey)
	}
	return []byte(k), nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// oauthFlags are eve mcp's MCP authorization flags.
type oauthFlags struct {
	issuer, jwks, resource string
	scopes                 []string
}

// config is the OAuth configuration the flags ask for (nil: none). The
// bearer key, when set, is accepted beside the issuer's tokens.
func (f oauthFlags) config(key string) (*mcpserver.OAuth, error) {
	if f.issuer == "" {
		if f.jwks != "" || f.resource != "" {
			return nil, errors.New("--oauth-jwks and --oauth-resource need --oauth-issuer")
		}
		return nil, nil
	}
	if f.jwks == "" || f.resource == "" {
		return nil, errors.New("--oauth-issuer needs --oauth-jwks (the keys that sign its tokens) and --oauth-resource (this server's public URL, the tokens' audience)")
	}
	verify := mcpserver.JWKSVerifier(f.jwks, f.issuer, f.resource, nil)
	if key != "" {
		jwks := verify
		verify = func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
			if subtle.ConstantTimeCompare([]byte(token), []byte(key)) == 1 {
				return &auth.TokenInfo{Expiration: time.Now().Add(time.Hour)}, nil
			}
			return jwks(ctx, token, r)
		}
	}
	return &mcpserver.OAuth{Resource: f.resource, AuthorizationServers: []string{f.issuer}, Scopes: f.scopes, Verify: verify}, nil
}

// mcpMux routes MCPPath (behind the bearer key, or OAuth when o is set)
// and, with OAuth, the protected-resource metadata.
func mcpMux(srv *mcpserver.Server, key string, o *mcpserver.OAuth) (*http.ServeMux, error) {
	var h http.Handler = srv.HTTPHandler(nil)
	mux := http.NewServeMux()
	switch {
	case o != nil:
		protected, meta, err := o.Protect(h)
		if err != nil {
			return nil, err
		}
		h = protected
		mux.Handle(mcpserver.MetadataPath(MCPPath), meta)
		mux.Handle(mcpserver.MetadataPath(""), meta)
	case key != "":
		h = requireBearer(key, h)
	}
	mux.Handle(MCPPath, bodyDeadline(h, httpbody.DefaultReadTimeout))
	return mux, nil
}

func serveMCPHTTP(ctx context.Context, out io.Writer, logger *slog.Logger, srv *mcpserver.Server, addr, key string, o *mcpserver.OAuth) error {
	mux, err := mcpMux(srv, key, o)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("mcp --http: listen on %s: %w (give --http another host:port)", addr, err)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	fmt.Fprintf(out, "eve MCP      http://%s%s (streamable HTTP)\n", ln.Addr(), MCPPath)
	if key == "" && o == nil {
		logger.Warn("MCP over HTTP is open: set EVE_API_KEY (or --eve-api-key) to require a bearer key")
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			hs.Close()
		}
		return nil
	}
}

// requireBearer answers 401 unless the request carries the key.
// bodyDeadline gives every request's body timeout to arrive (JSON-RPC
// messages are small); the SSE streams that follow, and GET streams, which
// have no body, are not cut by it.
func bodyDeadline(next http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, httpbody.Deadline(w, r, timeout))
	})
}

func requireBearer(key string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, token, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), []byte(key)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="eve"`)
			httpbody.Refusing(w, r) // answered before the body is read, even one that stalls
			http.Error(w, "missing or invalid API key: send Authorization: Bearer <key>", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

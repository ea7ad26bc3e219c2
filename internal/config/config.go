// Package config reads eve's settings from flags and the environment (a flag
// wins over its variable) and dials Temporal with them.
package config

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"google.golang.org/grpc"

	"github.com/eve-temporal/eve/payloadstore"
)

// Defaults of the public configuration contract (shared/design.md).
const (
	DefaultAddress   = "127.0.0.1:7233"
	DefaultNamespace = "default"
	// DefaultTaskQueue is the demo binaries' (cmd/eve, cmd/worker) queue;
	// an app's default is its agent's name (UseAgentTaskQueue).
	DefaultTaskQueue = "eve"
	DefaultEveAddr   = "127.0.0.1:4111"
	// DefaultMetricsAddr is where a worker serves /metrics unless
	// EVE_METRICS_ADDR or --metrics-addr says otherwise. When another
	// process (a second worker on the host) holds it, the worker serves on
	// a free loopback port instead and logs which.
	DefaultMetricsAddr = "127.0.0.1:9464"
)

// Env returns the variable's value, or def when unset or empty.
func Env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// EnvOrEmpty returns the variable's value when it is set, even to "" (for
// settings that an empty value turns off, like EVE_METRICS_ADDR), or def
// when it is unset.
func EnvOrEmpty(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// EnvInt returns an integer variable, or def.
func EnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// Temporal is how to reach the Temporal cluster, which task queue the
// agent's workers poll, and where large payloads and conversations live.
// Every worker, API server and CLI of a deployment must use the same
// PayloadStore. It is eve.Temporal; TemporalFromEnv reads it from the
// environment and Bind binds the commands' flags onto it.
type Temporal struct {
	Address       string // TEMPORAL_ADDRESS, default 127.0.0.1:7233
	Namespace     string // TEMPORAL_NAMESPACE, default "default"
	APIKey        string // TEMPORAL_API_KEY: Temporal Cloud API key (implies TLS)
	TLSCert       string // TEMPORAL_TLS_CERT: mTLS client certificate (PEM file)
	TLSKey        string // TEMPORAL_TLS_KEY: its key
	TLSCA         string // TEMPORAL_TLS_CA: CA bundle to verify the server
	TLSServerName string // TEMPORAL_TLS_SERVER_NAME
	TaskQueue     string // EVE_TASK_QUEUE; empty: the agent's name
	// PayloadStore is where payloads too large for Temporal's history and
	// sessions' conversations go (payloadstore.Open's spec: file:<dir> or
	// s3://bucket/prefix; EVE_PAYLOAD_STORE, default file:.eve/payloads);
	// every process of a deployment must name the same store. "" means
	// $EVE_PAYLOAD_STORE, else payloadstore.DefaultSpec.
	PayloadStore string
	// DialOptions are added to the gRPC connection of every client Dial
	// makes (eve dev: devserver.ShieldOption, for the dev server's sake).
	DialOptions []grpc.DialOption

	// store caches the opened store. Bind allocates it, so copies of a
	// bound Temporal share one store.
	store *storeCache
}

type storeCache struct {
	mu   sync.Mutex
	spec string
	s    payloadstore.Store
}

// Bind registers the connection flags, defaulting from the environment.
// taskQueue is --task-queue's default when EVE_TASK_QUEUE is unset; ""
// leaves TaskQueue empty for the command to fill in with its agent's name
// (UseAgentTaskQueue), so an app's binary polls a queue of its own.
func (t *Temporal) Bind(fs *pflag.FlagSet, taskQueue string) {
	env := TemporalFromEnv()
	fs.StringVar(&t.Address, "address", env.Address, "Temporal frontend host:port (env TEMPORAL_ADDRESS)")
	fs.StringVar(&t.Namespace, "namespace", env.Namespace, "Temporal namespace (env TEMPORAL_NAMESPACE)")
	fs.StringVar(&t.APIKey, "api-key", env.APIKey, "Temporal Cloud API key; implies TLS (env TEMPORAL_API_KEY)")
	fs.StringVar(&t.TLSCert, "tls-cert", env.TLSCert, "client certificate for mTLS (env TEMPORAL_TLS_CERT)")
	fs.StringVar(&t.TLSKey, "tls-key", env.TLSKey, "client key for mTLS (env TEMPORAL_TLS_KEY)")
	fs.StringVar(&t.TLSCA, "tls-ca", env.TLSCA, "CA bundle to verify the server (env TEMPORAL_TLS_CA)")
	fs.StringVar(&t.TLSServerName, "tls-server-name", env.TLSServerName, "server name to verify (env TEMPORAL_TLS_SERVER_NAME)")
	queueUsage := "task queue of the agent's workers (env EVE_TASK_QUEUE)"
	if taskQueue == "" {
		queueUsage = "task queue of the agent's workers (env EVE_TASK_QUEUE; default: the agent's name)"
	}
	fs.StringVar(&t.TaskQueue, "task-queue", cmp.Or(env.TaskQueue, taskQueue), queueUsage)
	fs.StringVar(&t.PayloadStore, "payload-store", env.PayloadStore,
		"where large payloads and conversations go, shared by every worker, API server and CLI: file:<dir> or s3://bucket/prefix with the AWS_* variables (env "+payloadstore.EnvVar+")")
	if t.store == nil {
		t.store = &storeCache{}
	}
}

// Store opens the payload store once and returns it on every later call
// (also from copies of a bound Temporal). Dial's clients and the agents of
// workers must use this store.
func (t *Temporal) Store(ctx context.Context) (payloadstore.Store, error) {
	if t.store == nil {
		t.store = &storeCache{}
	}
	spec := t.PayloadStore
	if spec == "" {
		spec = Env(payloadstore.EnvVar, payloadstore.DefaultSpec)
	}
	c := t.store
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.s != nil && c.spec == spec {
		return c.s, nil
	}
	s, err := payloadstore.Open(ctx, spec)
	if err != nil {
		return nil, err
	}
	c.spec, c.s = spec, s
	return s, nil
}

// TemporalFromEnv reads Temporal from the environment, with eve's
// defaults, as the commands' flags do.
func TemporalFromEnv() Temporal {
	return Temporal{
		Address:       Env("TEMPORAL_ADDRESS", DefaultAddress),
		Namespace:     Env("TEMPORAL_NAMESPACE", DefaultNamespace),
		APIKey:        Env("TEMPORAL_API_KEY", ""),
		TLSCert:       Env("TEMPORAL_TLS_CERT", ""),
		TLSKey:        Env("TEMPORAL_TLS_KEY", ""),
		TLSCA:         Env("TEMPORAL_TLS_CA", ""),
		TLSServerName: Env("TEMPORAL_TLS_SERVER_NAME", ""),
		TaskQueue:     Env("EVE_TASK_QUEUE", ""), // empty: the agent's name
		PayloadStore:  Env(payloadstore.EnvVar, payloadstore.DefaultSpec),
	}
}

// WithDefaults fills in an empty Address and Namespace with eve's
// defaults (an app's literal Temporal{} reaches the local dev server).
func (t Temporal) WithDefaults() Temporal {
	if t.Address == "" {
		t.Address = DefaultAddress
	}
	if t.Namespace == "" {
		t.Namespace = DefaultNamespace
	}
	return t
}

// Validate reports bad combinations with how to fix them. A client needs
// no task queue (workerhost.New checks a worker's).
func (t Temporal) Validate() error {
	if t.Address == "" {
		return errors.New("--address is empty: set TEMPORAL_ADDRESS or --address to host:port")
	}
	if (t.TLSCert == "") != (t.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together: set both for mTLS, or neither")
	}
	return nil
}

// UseAgentTaskQueue fills in an empty TaskQueue (neither --task-queue nor
// EVE_TASK_QUEUE named one) with the agent's name: each app's workers and
// API servers then meet on a queue of their own.
func (t *Temporal) UseAgentTaskQueue(agentName string) error {
	if t.TaskQueue != "" {
		return nil
	}
	if agentName == "" {
		return errors.New("no task queue: the default is the agent's name, and the agent has none; set Agent.Name, or EVE_TASK_QUEUE or --task-queue")
	}
	t.TaskQueue = agentName
	return nil
}

// ClientOptions builds the SDK's options.
func (t Temporal) ClientOptions(logger *slog.Logger) (client.Options, error) {
	if err := t.Validate(); err != nil {
		return client.Options{}, err
	}
	opts := client.Options{HostPort: t.Address, Namespace: t.Namespace}
	if logger != nil {
		opts.Logger = tlog.NewStructuredLogger(logger)
	}
	var tlsCfg *tls.Config
	if t.APIKey != "" || t.TLSCert != "" || t.TLSCA != "" {
		tlsCfg = &tls.Config{ServerName: t.TLSServerName, MinVersion: tls.VersionTLS12}
	}
	if t.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(t.TLSCert, t.TLSKey)
		if err != nil {
			return opts, fmt.Errorf("load TLS client certificate %s / key %s: %w", t.TLSCert, t.TLSKey, err)
		}
		tlsCfg.Certificates = []tls.Certificate{cert}
	}
	if t.TLSCA != "" {
		pem, err := os.ReadFile(t.TLSCA)
		if err != nil {
			return opts, fmt.Errorf("read TLS CA %s: %w", t.TLSCA, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return opts, fmt.Errorf("TLS CA %s holds no PEM certificates", t.TLSCA)
		}
		tlsCfg.RootCAs = pool
	}
	if tlsCfg != nil {
		opts.ConnectionOptions.TLS = tlsCfg
	}
	if t.APIKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(t.APIKey)
	}
	return opts, nil
}

// Dial connects and checks the server answers within timeout. When it
// cannot, the error is one line naming the address and how to start a
// dev server. Payloads of DefaultThreshold bytes and more go to the store
// (see Store) instead of Temporal's history.
func (t *Temporal) Dial(ctx context.Context, logger *slog.Logger, extra func(*client.Options)) (client.Client, error) {
	opts, err := t.ClientOptions(logger)
	if err != nil {
		return nil, err
	}
	store, err := t.Store(ctx)
	if err != nil {
		return nil, err
	}
	opts.ExternalStorage = payloadstore.ExternalStorage(store)
	opts.ConnectionOptions.DialOptions = append(opts.ConnectionOptions.DialOptions, t.DialOptions...)
	if extra != nil {
		extra(&opts)
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := client.DialContext(dctx, opts)
	if err != nil {
		return nil, Unreachable(t.Address, t.Namespace, err)
	}
	return c, nil
}

// Unreachable is the one-line error for a Temporal server that does not answer.
func Unreachable(addr, namespace string, err error) error {
	// No binary's name here: this runs in eve.Main apps and in apps of
	// their own alike.
	return fmt.Errorf("cannot reach Temporal at %s (namespace %q): %v — start a dev server (an eve binary's dev command runs one with the whole stack; or `temporal server start-dev`), or point TEMPORAL_ADDRESS at your cluster", addr, namespace, oneLine(err))
}

func oneLine(err error) string {
	s := err.Error()
	for i, r := range s {
		if r == '\n' {
			return s[:i]
		}
	}
	return s
}

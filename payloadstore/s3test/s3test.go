// Package s3test serves an in-process, in-memory S3-compatible server
// (gofakes3) for tests of code that uses an s3:// payload store.
//
//	srv := s3test.Start(t)
//	srv.SetEnv(t) // AWS credentials and region for this process
//	store, err := payloadstore.Open(ctx, srv.Spec("payloads"))
//	cmd.Env = append(os.Environ(), srv.Env()...) // for subprocesses
package s3test

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Region is the region the server's specs and Env name.
const Region = "us-east-1"

// Server is a running fake S3 with one bucket.
type Server struct {
	// URL is the endpoint (http://127.0.0.1:port).
	URL string
	// Bucket exists from the start.
	Bucket string
}

// Start serves a fake S3 with the bucket "eve-test" until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	backend := s3mem.New()
	const bucket = "eve-test"
	if err := backend.CreateBucket(bucket); err != nil {
		t.Fatalf("s3test: create bucket: %v", err)
	}
	hs := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(hs.Close)
	return &Server{URL: hs.URL, Bucket: bucket}
}

// Spec is the payload-store spec of prefix in the bucket, naming the
// endpoint and region (credentials come from the environment: see Env).
func (s *Server) Spec(prefix string) string {
	q := url.Values{"endpoint": {s.URL}, "region": {Region}}
	return "s3://" + s.Bucket + "/" + prefix + "?" + q.Encode()
}

// Env returns the AWS variables (KEY=VALUE) a process needs to use the
// server: dummy credentials (the server does not check them) and the region.
func (s *Server) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=eve-test",
		"AWS_SECRET_ACCESS_KEY=eve-test-secret",
		"AWS_REGION=" + Region,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// SetEnv sets Env in this process for the test (t.Setenv).
func (s *Server) SetEnv(t testing.TB) {
	t.Helper()
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

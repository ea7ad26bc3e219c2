package payloadstore_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/payloadstore"
	"github.com/eve-temporal/eve/payloadstore/s3test"
	"github.com/eve-temporal/eve/payloadstore/storetest"
)

func TestFileStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) payloadstore.Store {
		s, err := payloadstore.Open(context.Background(), "file:"+t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestS3Store(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	storetest.Run(t, func(t *testing.T) payloadstore.Store {
		s, err := payloadstore.Open(context.Background(), srv.Spec("suite/"+strings.ReplaceAll(t.Name(), "/", "-")))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// The endpoint may come from AWS_ENDPOINT_URL_S3 instead of the spec;
// path-style addressing follows.
func TestS3EndpointFromEnv(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	t.Setenv("AWS_ENDPOINT_URL_S3", srv.URL)
	ctx := context.Background()
	s, err := payloadstore.Open(ctx, "s3://"+srv.Bucket+"/env")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Location(), "s3://"+srv.Bucket+"/env"; got != want {
		t.Errorf("Location = %q, want %q", got, want)
	}
	if err := s.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	// The same object through the spec with the endpoint in it.
	s2, err := payloadstore.Open(ctx, srv.Spec("env"))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := s2.Get(ctx, "k"); err != nil || string(b) != "v" {
		t.Fatalf("get through the other spec = %q, %v", b, err)
	}
}

func TestLocationReopens(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t)
	srv.SetEnv(t)
	dir := t.TempDir()
	rel, err := filepath.Rel(mustGetwd(t), filepath.Join(dir, "rel"))
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []string{"file:" + dir, "file://" + dir + "/x", "file:" + rel, srv.Spec("a/b"), srv.Spec("") + "&path_style=true"} {
		s, err := payloadstore.Open(ctx, spec)
		if err != nil {
			t.Fatalf("Open(%q): %v", spec, err)
		}
		loc := s.Location()
		if strings.HasPrefix(loc, "file:") && !filepath.IsAbs(strings.TrimPrefix(loc, "file:")) {
			t.Errorf("Open(%q).Location() = %q, want an absolute directory", spec, loc)
		}
		if strings.Contains(loc, "eve-test-secret") || strings.Contains(loc, "@") {
			t.Errorf("Location %q holds credentials", loc)
		}
		if err := s.Put(ctx, "reopen/key", []byte(spec)); err != nil {
			t.Fatal(err)
		}
		again, err := payloadstore.Open(ctx, loc)
		if err != nil {
			t.Fatalf("Open(Location()=%q): %v", loc, err)
		}
		if again.Location() != loc {
			t.Errorf("reopened Location = %q, want %q", again.Location(), loc)
		}
		if b, err := again.Get(ctx, "reopen/key"); err != nil || string(b) != spec {
			t.Errorf("get through %q = %q, %v", loc, b, err)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for spec, want := range map[string]string{
		"":                                      "want file:<dir> or s3://bucket/prefix",
		"/tmp/x":                                "EVE_PAYLOAD_STORE=/tmp/x: unknown kind of store: want file:<dir> or s3://bucket/prefix",
		"gs://bucket/p":                         "want file:<dir> or s3://bucket/prefix",
		"file:":                                 "no directory",
		"file:" + file + "/sub":                 "cannot create the directory",
		"s3://":                                 "no bucket",
		"s3://b/p?colour=red":                   "unknown option ?colour",
		"s3://b/p?path_style=x":                 "want true or false",
		"s3://b/p?endpoint=ftp://x":             "want an http:// or https:// URL",
		"s3://user:pw@b/p":                      "credentials do not go in the spec",
		"s3://missing/p?endpoint=" + srv.URL:    "bucket \"missing\" does not exist",
		"s3://b/bad prefix?endpoint=" + srv.URL: "bad prefix",
	} {
		_, err := payloadstore.Open(context.Background(), spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q) = %v, want an error containing %q", spec, err, want)
		}
	}
}

func TestS3NeedsRegion(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	_, err := payloadstore.Open(context.Background(), "s3://"+srv.Bucket+"/p?endpoint="+srv.URL)
	if err == nil || !strings.Contains(err.Error(), "set AWS_REGION") {
		t.Fatalf("Open without a region = %v, want one saying to set AWS_REGION", err)
	}
}

func TestFromEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(payloadstore.EnvVar, "file:"+dir)
	s, err := payloadstore.FromEnv(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Location() != "file:"+dir {
		t.Fatalf("Location = %q, want file:%s", s.Location(), dir)
	}
	t.Chdir(t.TempDir())
	t.Setenv(payloadstore.EnvVar, "")
	s, err = payloadstore.FromEnv(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(s.Location(), "/.eve/payloads") {
		t.Fatalf("default Location = %q, want .../.eve/payloads", s.Location())
	}
}

func TestCounting(t *testing.T) {
	ctx := context.Background()
	base, err := payloadstore.Open(ctx, "file:"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := payloadstore.NewCounting(base)
	if c.Location() != base.Location() {
		t.Errorf("Location = %q, want %q", c.Location(), base.Location())
	}
	_ = c.Put(ctx, "a", []byte("12345"))
	_ = c.Put(ctx, "b", []byte("123"))
	_, _ = c.Get(ctx, "a")
	_, _ = c.Get(ctx, "missing")
	_ = c.Put(ctx, "bad key", []byte("x"))
	if got, want := c.Stats(), (payloadstore.Stats{Puts: 2, Gets: 1, BytesWritten: 8, BytesRead: 5}); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
}

// The SDK validates ExternalStorage when a client is built (and panics on
// a bad one).
func TestExternalStorageAcceptedBySDK(t *testing.T) {
	s, err := payloadstore.Open(context.Background(), "file:"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	es := payloadstore.ExternalStorage(s)
	if es.PayloadSizeThreshold != payloadstore.DefaultThreshold || len(es.Drivers) != 1 {
		t.Fatalf("ExternalStorage = %+v", es)
	}
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1", ExternalStorage: es})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func mustGetwd(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

package payloadstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/proxy"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/eve-temporal/eve/internal/devserver"
	"github.com/eve-temporal/eve/internal/devserver/devtest"
	"github.com/eve-temporal/eve/payloadstore"
	"github.com/eve-temporal/eve/payloadstore/s3test"
)

func TestMain(m *testing.M) { devtest.Main(m) }

const bigSize = 3 << 20

// bigActivity takes 3 MB and returns 3 MB.
func bigActivity(_ context.Context, in []byte) ([]byte, error) {
	if len(in) != bigSize {
		return nil, fmt.Errorf("activity input is %d bytes, want %d", len(in), bigSize)
	}
	out := make([]byte, len(in))
	for i, b := range in {
		out[len(in)-1-i] = b
	}
	return out, nil
}

func bigWorkflow(ctx workflow.Context, in []byte) ([]byte, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var out []byte
	err := workflow.ExecuteActivity(ctx, bigActivity, in).Get(ctx, &out)
	return out, err
}

// TestOffloadThroughTemporal runs a workflow whose input, activity input,
// activity result and result are 3 MB each (above the server's 2 MB blob
// limit) against a real dev server, with the store as the client's
// ExternalStorage, and finds no payload at or above the threshold in the
// history — only references to objects in the store.
func TestOffloadThroughTemporal(t *testing.T) {
	srv := devtest.Shared(t)
	t.Run("file", func(t *testing.T) {
		store, err := payloadstore.Open(context.Background(), "file:"+t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		runBig(t, srv, payloadstore.NewCounting(store))
	})
	t.Run("s3", func(t *testing.T) {
		s3 := s3test.Start(t)
		s3.SetEnv(t)
		store, err := payloadstore.Open(context.Background(), s3.Spec("offload"))
		if err != nil {
			t.Fatal(err)
		}
		runBig(t, srv, payloadstore.NewCounting(store))
	})
	t.Run("server store", func(t *testing.T) {
		// devtest.Client offloads to the server's own store.
		runBigWith(t, srv, devtest.Client(t, srv), srv.PayloadStore())
	})
}

func runBig(t *testing.T, srv *devserver.Server, store *payloadstore.Counting) {
	c, err := srv.Dial(client.Options{ExternalStorage: payloadstore.ExternalStorage(store)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	runBigWith(t, srv, c, store)
	st := store.Stats()
	// Workflow input, activity input, activity result, workflow result
	// (equal payloads share an object, but each write is counted).
	if st.Puts < 3 || st.BytesWritten < 3*bigSize || st.Gets < 3 {
		t.Errorf("store stats %+v: want at least 3 puts and gets of 3 MB", st)
	}
}

func runBigWith(t *testing.T, srv *devserver.Server, c client.Client, store payloadstore.Store) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tq := devtest.TaskQueue(t)
	w := worker.New(c, tq, worker.Options{})
	w.RegisterWorkflow(bigWorkflow)
	w.RegisterActivity(bigActivity)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	in := make([]byte, bigSize)
	rand.Read(in)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "big-" + tq, TaskQueue: tq}, bigWorkflow, in)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	var out []byte
	if err := run.Get(ctx, &out); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	want, _ := bigActivity(ctx, in)
	if !bytes.Equal(out, want) {
		t.Fatalf("result: %d bytes, not the %d expected", len(out), len(want))
	}

	// Read the history raw, with a client that resolves no references.
	plain, err := client.Dial(client.Options{HostPort: srv.Addr, Namespace: srv.Namespace, Logger: devserver.WarnLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	it := plain.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var refs []*sdkpb.ExternalStorageReference
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		err = proxy.VisitPayloads(ctx, ev, proxy.VisitPayloadsOptions{
			Visitor: func(_ *proxy.VisitPayloadsContext, ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
				for _, p := range ps {
					if n := proto.Size(p); n >= payloadstore.DefaultThreshold {
						t.Errorf("event %d (%s) holds a %d-byte payload, at or above the threshold %d", ev.GetEventId(), ev.GetEventType(), n, payloadstore.DefaultThreshold)
					}
					if len(p.GetExternalPayloads()) > 0 {
						ref := &sdkpb.ExternalStorageReference{}
						if err := protojson.Unmarshal(p.GetData(), ref); err != nil {
							t.Errorf("event %d: reference %s: %v", ev.GetEventId(), p.GetData(), err)
							continue
						}
						refs = append(refs, ref)
					}
				}
				return ps, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(refs) < 4 {
		t.Fatalf("history holds %d references to stored payloads, want at least 4 (workflow input, activity input and result, workflow result)", len(refs))
	}
	for _, ref := range refs {
		if ref.GetDriverName() != payloadstore.DriverName {
			t.Errorf("reference by driver %q, want %q", ref.GetDriverName(), payloadstore.DriverName)
		}
		key := ref.GetClaimData()["key"]
		b, err := store.Get(ctx, key)
		if err != nil {
			t.Errorf("the store lacks %s: %v", key, err)
			continue
		}
		if len(b) < bigSize {
			t.Errorf("%s holds %d bytes, want a 3 MB payload", key, len(b))
		}
	}
}

package payloadstore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"
)

// DefaultThreshold is the serialized payload size from which payloads leave
// Temporal's history for the store.
const DefaultThreshold = 64 << 10

// DriverName is the driver's name, recorded in history with every claim:
// every process reading a history must register a driver of this name.
const DriverName = "eve-payloads"

// DriverType is the driver's type.
const DriverType = "eve.payloadstore"

const payloadKeyPrefix = "payloads/sha256/"

// Driver returns the SDK storage driver that keeps payloads in s under
// payloads/sha256/<hex of the serialized payload>: content-addressed, so a
// retried task rewrites the same object and equal payloads share one.
func Driver(s Store) converter.StorageDriver { return driver{s: s} }

// ExternalStorage is the client option that offloads payloads of at least
// DefaultThreshold bytes to s.
func ExternalStorage(s Store) converter.ExternalStorage {
	return converter.ExternalStorage{
		Drivers:              []converter.StorageDriver{Driver(s)},
		PayloadSizeThreshold: DefaultThreshold,
	}
}

type driver struct{ s Store }

func (driver) Name() string { return DriverName }
func (driver) Type() string { return DriverType }

func (d driver) Store(ctx converter.StorageDriverStoreContext, payloads []*commonpb.Payload) ([]converter.StorageDriverClaim, error) {
	claims := make([]converter.StorageDriverClaim, len(payloads))
	limiter := ctx.GetLimiter()
	g, gctx := errgroup.WithContext(ctx.Context)
	for i, p := range payloads {
		data, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("payloadstore: marshal payload: %w", err)
		}
		sum := sha256.Sum256(data)
		key := payloadKeyPrefix + hex.EncodeToString(sum[:])
		claims[i] = converter.StorageDriverClaim{ClaimData: map[string]string{"key": key}}
		g.Go(func() error {
			return limiter.Permit(gctx, p, func() error { return d.s.Put(gctx, key, data) })
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return claims, nil
}

func (d driver) Retrieve(ctx converter.StorageDriverRetrieveContext, claims []converter.StorageDriverClaim) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(claims))
	limiter := ctx.GetLimiter()
	g, gctx := errgroup.WithContext(ctx.Context)
	for i, c := range claims {
		key := c.ClaimData["key"]
		if !strings.HasPrefix(key, payloadKeyPrefix) {
			return nil, fmt.Errorf("payloadstore: claim %v has no key under %s", c.ClaimData, payloadKeyPrefix)
		}
		g.Go(func() error {
			return limiter.Permit(gctx, c, func() error {
				data, err := d.s.Get(gctx, key)
				if err != nil {
					return err
				}
				sum := sha256.Sum256(data)
				if hex.EncodeToString(sum[:]) != strings.TrimPrefix(key, payloadKeyPrefix) {
					return fmt.Errorf("payloadstore: %s in %s is corrupt (its bytes do not hash to its key)", key, d.s.Location())
				}
				p := &commonpb.Payload{}
				if err := proto.Unmarshal(data, p); err != nil {
					return fmt.Errorf("payloadstore: %s in %s: %w", key, d.s.Location(), err)
				}
				out[i] = p
				return nil
			})
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

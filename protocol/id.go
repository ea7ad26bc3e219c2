package protocol

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"
)

// EventID returns "evt_<ULID>" whose time part is at and whose entropy is
// derived from (scope, index). Workflows call it with workflow time, so a
// replay stamps the same id again.
func EventID(at time.Time, scope string, index int) string {
	h := sha256.New()
	h.Write([]byte(scope))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(index))
	h.Write(b[:])
	sum := h.Sum(nil)
	var id ulid.ULID
	if err := id.SetTime(ulid.Timestamp(at)); err != nil {
		panic(fmt.Sprintf("event id time %v: %v", at, err))
	}
	if err := id.SetEntropy(sum[:10]); err != nil {
		panic(fmt.Sprintf("event id entropy: %v", err))
	}
	return "evt_" + id.String()
}

// NewEvent builds a stamped event. data is marshalled with encoding/json;
// a marshal failure is a programming error in the caller's data type.
func NewEvent(typ string, data any, id string, at time.Time, deliveryIDs []string) Event {
	raw, err := json.Marshal(data)
	if err != nil {
		panic(fmt.Sprintf("marshal %s data: %v", typ, err))
	}
	return Event{Type: typ, Data: raw, Meta: Meta{ID: id, At: at.UTC().Format("2006-01-02T15:04:05.000Z07:00"), DeliveryIDs: deliveryIDs}}
}

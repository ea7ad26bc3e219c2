package workflows

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/internal/visibility"
)

// The search attributes the workflows upsert are those eve registers
// (internal/visibility), with the same types.
func TestSearchAttributesAreRegistered(t *testing.T) {
	typeName := map[enumspb.IndexedValueType]string{
		enumspb.INDEXED_VALUE_TYPE_KEYWORD:      "Keyword",
		enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST: "KeywordList",
		enumspb.INDEXED_VALUE_TYPE_DATETIME:     "Datetime",
	}
	upserted := map[string]string{}
	for _, k := range []temporal.SearchAttributeKey{searchStatus, searchTools, searchSession, searchInbox, searchRequester, searchRequestKind, searchParkedAt} {
		upserted[k.GetName()] = typeName[k.GetValueType()]
	}
	if diff := cmp.Diff(visibility.SearchAttributeTypes, upserted); diff != "" {
		t.Errorf("search attributes (-registered +upserted):\n%s", diff)
	}
	for _, name := range visibility.InboxAttributes {
		if _, ok := upserted[name]; !ok {
			t.Errorf("inbox attribute %s is not upserted", name)
		}
	}
}

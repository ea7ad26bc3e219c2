// Package visibility checks and registers eve's search attributes on a
// Temporal namespace.
package visibility

import (
	"context"
	"fmt"
	"sort"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
)

var types = map[string]enumspb.IndexedValueType{
	"Keyword":     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"KeywordList": enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
	"Datetime":    enumspb.INDEXED_VALUE_TYPE_DATETIME,
}

// Missing lists eve's search attributes the namespace lacks.
func Missing(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("list search attributes of namespace %s: %w", namespace, err)
	}
	var missing []string
	for name, typ := range SearchAttributeTypes {
		got, ok := resp.GetCustomAttributes()[name]
		if !ok || got != types[typ] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	return missing, nil
}

// Register adds eve's search attributes (dev servers and self-hosted
// clusters; Temporal Cloud registers them in its console or tcld).
func Register(ctx context.Context, c client.Client, namespace string) error {
	missing, err := Missing(ctx, c, namespace)
	if err != nil || len(missing) == 0 {
		return err
	}
	add := map[string]enumspb.IndexedValueType{}
	for _, name := range missing {
		add[name] = types[SearchAttributeTypes[name]]
	}
	if _, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: add}); err != nil {
		return fmt.Errorf("register search attributes %v: %w", missing, err)
	}
	return nil
}

// Commands returns the CLI commands that register the attributes.
func Commands(namespace string) []string {
	names := make([]string, 0, len(SearchAttributeTypes))
	for n := range SearchAttributeTypes {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("temporal operator search-attribute create --namespace %s --name %s --type %s", namespace, n, SearchAttributeTypes[n])
	}
	return out
}

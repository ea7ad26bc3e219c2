// Package catalog is the tool catalog behind the tools API: canonical tool
// definitions ("<toolkit>.<tool>"), validated when they load, served in five
// model-facing formats with collision-free wire names, searched with BM25F,
// and executed from provider tool calls.
//
// It is pure Go and knows nothing of Temporal: execution goes through the
// Executor interface, which the runtime implements with one workflow per
// execution.
//
//	c, err := catalog.New(defs...)            // or NewBuilder().AddToolkit(...).Build()
//	bundle, _ := c.Get(catalog.GetToolsOptions{Toolkits: []string{"gmail"}, Format: catalog.FormatAnthropic})
//	// send bundle.Tools to the model; then, with its tool_use blocks:
//	results := catalog.ExecuteAnthropicToolCalls(ctx, catalog.ValidatingExecutor(c, exec), calls,
//		catalog.ExecuteToolCallsOptions{NameMap: bundle.NameMap, UserID: "user_42"})
//
// The rules, formats, name-map algorithm and strict-mode fallback are
// documented in docs/catalog.md.
package catalog

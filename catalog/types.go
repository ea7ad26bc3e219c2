package catalog

import (
	"encoding/json"

	"github.com/eve-temporal/eve/protocol"
)

// Definition is the canonical definition of one tool: the catalog's unit.
// JSON field names follow the tools API reference (ToolDefinition).
type Definition struct {
	// Name is exactly "<toolkit>.<tool>", for example "gmail.send_email".
	Name string `json:"name"`
	// Toolkit is the slug before the dot in Name.
	Toolkit string `json:"toolkit"`
	// Capability is a slug grouping tools by what they do ("email.send").
	Capability string `json:"capability"`
	// Description is the LLM-facing purpose, selection guidance, exclusions
	// and consequences.
	Description string `json:"description"`
	// InputSchema is a JSON Schema 2020-12 object schema.
	InputSchema json.RawMessage `json:"inputSchema"`
	// OutputSchema, when present, is a JSON Schema 2020-12 object schema.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  Annotations     `json:"annotations"`
	// Version is a semantic version (semver.org 2.0.0), for example "1.2.0".
	Version string `json:"version"`
}

// Annotations describe a tool's behaviour to clients and policies.
type Annotations struct {
	// ReadOnly: the tool does not modify its environment.
	ReadOnly bool `json:"readOnly"`
	// Destructive: the tool may delete or overwrite (meaningful only when
	// not ReadOnly).
	Destructive bool `json:"destructive"`
	// Idempotent: repeating a call with the same input has no further effect.
	Idempotent bool `json:"idempotent"`
	// OpenWorld: the tool reaches outside systems (the web, third-party APIs).
	OpenWorld bool `json:"openWorld"`
	// Async: the tool is asynchronous by nature (its result arrives later);
	// executions default to async mode.
	Async bool `json:"async"`
}

// ToolNameMap translates between canonical names and the wire names a
// provider sees. Every Get result carries one; ExecuteToolCalls needs the
// exact map that went out with the bundle.
type ToolNameMap struct {
	CanonicalToWire map[string]string `json:"canonicalToWire"`
	WireToCanonical map[string]string `json:"wireToCanonical"`
}

// Wire returns the wire name of a canonical name.
func (m ToolNameMap) Wire(canonical string) (string, bool) {
	w, ok := m.CanonicalToWire[canonical]
	return w, ok
}

// Canonical returns the canonical name of a wire name.
func (m ToolNameMap) Canonical(wire string) (string, bool) {
	c, ok := m.WireToCanonical[wire]
	return c, ok
}

// Format selects the shape of Get's tools.
type Format string

// The five formats.
const (
	FormatCanonical Format = "canonical"
	FormatAnthropic Format = "anthropic"
	FormatOpenAI    Format = "openai"
	FormatAISDK     Format = "ai-sdk"
	FormatMCP       Format = "mcp"
)

// Formats lists every supported format.
var Formats = []Format{FormatCanonical, FormatAnthropic, FormatOpenAI, FormatAISDK, FormatMCP}

// GetToolsOptions selects and shapes tools (GetToolsOptions in the reference).
type GetToolsOptions struct {
	// UserID binds framework-owned execute callbacks to an end user. The
	// catalog itself does not use it.
	UserID string `json:"userId,omitempty"`
	// Toolkits keeps only these toolkits (all when empty). An unknown toolkit
	// is an error, so a typo cannot silently leave an agent without tools.
	Toolkits []string `json:"toolkits,omitempty"`
	// Capability keeps only tools with this capability slug.
	Capability string `json:"capability,omitempty"`
	// Format defaults to canonical.
	Format Format `json:"format,omitempty"`
	// IncludeAsync (MCP only) includes async-by-nature tools, for clients that
	// negotiated Tasks support.
	IncludeAsync bool `json:"includeAsync,omitempty"`
	// MCPWireNames (MCP only) names tools by their wire names instead of
	// their canonical names, for MCP clients that hold tool names to the
	// model providers' ^[a-zA-Z0-9_-]{1,64}$ and reject dots.
	MCPWireNames bool `json:"mcpWireNames,omitempty"`
	// Strict (OpenAI only) applies the strict-mode transform. A tool whose
	// schema uses what strict mode forbids falls back to strict:false, and
	// the result's Warnings say why.
	Strict bool `json:"strict,omitempty"`
}

// GetToolsResult is Get's answer (GetToolsResult in the reference).
type GetToolsResult struct {
	Format Format `json:"format"`
	// Tools holds, by format: canonical []Definition, anthropic
	// []AnthropicTool, openai []OpenAITool, ai-sdk AISDKToolSet, mcp
	// []MCPTool. The typed accessors below return them.
	Tools any `json:"tools"`
	// NameMap covers exactly the selected tools. Its maps are shared with
	// other results for the same selection: do not modify them.
	NameMap ToolNameMap `json:"nameMap"`
	// Raw holds the canonical definitions behind Tools, in the same order.
	// Treat them as read-only: they share memory with the catalog.
	Raw []Definition `json:"raw"`
	// Warnings explains degraded output, such as an OpenAI strict fallback.
	Warnings []Warning `json:"warnings,omitempty"`
}

// Warning reports something Get did differently from what was asked.
type Warning struct {
	Tool    string `json:"tool"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// WarningStrictFallback is the code of a warning for a tool sent with
// strict:false because its schema uses what OpenAI strict mode forbids.
const WarningStrictFallback = "openai_strict_fallback"

// Canonical returns the tools of a canonical-format result.
func (r GetToolsResult) Canonical() []Definition { t, _ := r.Tools.([]Definition); return t }

// Anthropic returns the tools of an anthropic-format result.
func (r GetToolsResult) Anthropic() []AnthropicTool { t, _ := r.Tools.([]AnthropicTool); return t }

// OpenAI returns the tools of an openai-format result.
func (r GetToolsResult) OpenAI() []OpenAITool { t, _ := r.Tools.([]OpenAITool); return t }

// AISDK returns the tools of an ai-sdk-format result.
func (r GetToolsResult) AISDK() AISDKToolSet { t, _ := r.Tools.(AISDKToolSet); return t }

// MCP returns the tools of an mcp-format result.
func (r GetToolsResult) MCP() []MCPTool { t, _ := r.Tools.([]MCPTool); return t }

// AnthropicTool is a Messages API client tool: {name, description, input_schema}.
type AnthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// OpenAITool is a Chat Completions function tool.
type OpenAITool struct {
	Type     string             `json:"type"` // always "function"
	Function OpenAIFunctionDecl `json:"function"`
}

// OpenAIFunctionDecl is the function of an OpenAITool.
type OpenAIFunctionDecl struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	// Strict is set only when the strict transform was asked for: true when
	// it applied, false when the tool fell back.
	Strict *bool `json:"strict,omitempty"`
}

// AISDKToolSet is the AI SDK's ToolSet shape: a record keyed by wire name.
type AISDKToolSet map[string]AISDKTool

// AISDKTool is one entry of an AISDKToolSet; wrap InputSchema with the AI
// SDK's jsonSchema() helper on the JavaScript side.
type AISDKTool struct {
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
}

// MCPTool is an MCP tools/list descriptor.
type MCPTool struct {
	Name         string             `json:"name"`
	Title        string             `json:"title,omitempty"`
	Description  string             `json:"description"`
	InputSchema  json.RawMessage    `json:"inputSchema"`
	OutputSchema json.RawMessage    `json:"outputSchema,omitempty"`
	Annotations  MCPToolAnnotations `json:"annotations"`
	// Execution is set for async tools (only listed with IncludeAsync).
	Execution *MCPToolExecution `json:"execution,omitempty"`
}

// MCPToolAnnotations are MCP's behaviour hints. The catalog states every
// hint explicitly rather than leaving clients to MCP's defaults
// (destructiveHint and openWorldHint default to true).
type MCPToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    bool   `json:"readOnlyHint"`
	DestructiveHint bool   `json:"destructiveHint"`
	IdempotentHint  bool   `json:"idempotentHint"`
	OpenWorldHint   bool   `json:"openWorldHint"`
}

// MCPToolExecution is MCP's per-tool execution descriptor (Tasks).
type MCPToolExecution struct {
	// TaskSupport is "required" for async-by-nature tools.
	TaskSupport string `json:"taskSupport"`
}

// SearchToolsOptions is a search request (SearchToolsOptions in the reference).
type SearchToolsOptions struct {
	Query string `json:"query"`
	// Limit defaults to DefaultSearchLimit when zero or negative.
	Limit int `json:"limit,omitempty"`
	// Toolkits and Capability filter before ranking.
	Toolkits   []string `json:"toolkits,omitempty"`
	Capability string   `json:"capability,omitempty"`
	// UserID is accepted for parity with a hosted, project-scoped search.
	UserID string `json:"userId,omitempty"`
}

// SearchToolsResult is a ranked list of tools, best first.
type SearchToolsResult struct {
	Tools []Definition `json:"tools"`
	// Scores holds each tool's BM25F score (same order as Tools).
	Scores []float64 `json:"scores,omitempty"`
}

// DefaultSearchLimit is the number of results when Limit is not set.
const DefaultSearchLimit = 10

// ExecutionMode says whether an execution is awaited.
type ExecutionMode string

// Execution modes.
const (
	ModeSync  ExecutionMode = "sync"
	ModeAsync ExecutionMode = "async"
)

// ExecuteToolOptions is one execution request (ExecuteToolOptions in the reference).
type ExecuteToolOptions struct {
	// UserID falls back to the client-level user when empty.
	UserID string `json:"userId,omitempty"`
	// Input is a JSON object.
	Input json.RawMessage `json:"input"`
	// Mode defaults from the tool's annotations.async.
	Mode ExecutionMode `json:"mode,omitempty"`
	// IdempotencyKey correlates retries: the same key joins the same execution.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	ConnectionID   string `json:"connectionId,omitempty"`
}

// ExecutionStatus is the state of an execution. The execution types are
// protocol's, which the execution workflow records without importing the
// catalog.
type ExecutionStatus = protocol.ExecutionStatus

// Execution statuses. Queued and running are not terminal.
const (
	StatusQueued    = protocol.ExecutionQueued
	StatusRunning   = protocol.ExecutionRunning
	StatusSucceeded = protocol.ExecutionSucceeded
	StatusFailed    = protocol.ExecutionFailed
	StatusCanceled  = protocol.ExecutionCanceled
	StatusTimedOut  = protocol.ExecutionTimedOut
)

// ExecutionResult is the state (and, when terminal, the outcome) of one execution.
type ExecutionResult = protocol.ExecutionResult

// ExecutionError is why an execution did not succeed.
type ExecutionError = protocol.ExecutionError

// Error codes the catalog itself produces in tool results.
const (
	CodeUnknownTool     = protocol.ExecCodeUnknownTool
	CodeInvalidInput    = protocol.ExecCodeInvalidInput
	CodeExecutionFailed = protocol.ExecCodeExecutionFailed
	CodeTimeout         = protocol.ExecCodeTimeout
	CodeCanceled        = protocol.ExecCodeCanceled
)

// AnthropicToolCall is a Messages API tool_use block.
type AnthropicToolCall struct {
	Type  string          `json:"type"` // "tool_use"
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// AnthropicToolResultBlock is a Messages API tool_result block.
type AnthropicToolResultBlock struct {
	Type      string `json:"type"` // "tool_result"
	ToolUseID string `json:"tool_use_id"`
	Content   string `json:"content"`
	IsError   bool   `json:"is_error,omitempty"`
}

// OpenAIToolCall is a Chat Completions tool call: *OpenAIFunctionToolCall
// or *OpenAICustomToolCall. DecodeOpenAIToolCalls decodes a mixed list.
type OpenAIToolCall interface {
	CallID() string
	isOpenAIToolCall()
}

// OpenAIFunctionToolCall is a function tool call. Arguments is a JSON
// string holding the arguments (what the API sends) or a JSON object.
type OpenAIFunctionToolCall struct {
	ID       string             `json:"id"`
	Type     string             `json:"type"` // "function"
	Function OpenAIFunctionCall `json:"function"`
}

// OpenAIFunctionCall is the function part of an OpenAIFunctionToolCall.
type OpenAIFunctionCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// OpenAICustomToolCall is a custom (free-form input) tool call.
type OpenAICustomToolCall struct {
	ID     string           `json:"id"`
	Type   string           `json:"type"` // "custom"
	Custom OpenAICustomCall `json:"custom"`
}

// OpenAICustomCall is the custom part of an OpenAICustomToolCall.
type OpenAICustomCall struct {
	Name  string `json:"name"`
	Input string `json:"input"`
}

// CallID returns the call's id.
func (c *OpenAIFunctionToolCall) CallID() string { return c.ID }

// CallID returns the call's id.
func (c *OpenAICustomToolCall) CallID() string { return c.ID }

func (*OpenAIFunctionToolCall) isOpenAIToolCall() {}
func (*OpenAICustomToolCall) isOpenAIToolCall()   {}

// OpenAIToolResultMessage is a Chat Completions tool message.
type OpenAIToolResultMessage struct {
	Role       string `json:"role"` // "tool"
	ToolCallID string `json:"tool_call_id"`
	Content    string `json:"content"`
}

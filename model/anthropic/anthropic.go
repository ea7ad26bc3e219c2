// Package anthropic runs eve model steps on Anthropic's Messages API
// (streaming), through github.com/anthropics/anthropic-sdk-go.
//
// The SDK's own retries are off: a transient failure (429, 5xx, 529
// overloaded, timeouts, connection errors) comes back as a
// model.Retryable *Error carrying the server's Retry-After, and the model
// step activity's Temporal retry policy is the only retry layer.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/model/internal/apierror"
)

// Environment variables read by New when Options leaves a field empty.
const (
	EnvAPIKey  = "ANTHROPIC_API_KEY"
	EnvBaseURL = "ANTHROPIC_BASE_URL"
)

// DefaultBaseURL is Anthropic's API.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultMaxTokens caps a step's output when Options.MaxTokens is 0.
const DefaultMaxTokens = 8192

// Options configures a Model.
type Options struct {
	// APIKey is sent as x-api-key. Default: $ANTHROPIC_API_KEY.
	APIKey string
	// BaseURL of the API. Default: $ANTHROPIC_BASE_URL, then DefaultBaseURL.
	BaseURL string
	// Model is the model name, e.g. "claude-sonnet-4-5". Required.
	Model string
	// MaxTokens caps each step's output. Default: DefaultMaxTokens.
	MaxTokens int
	// HTTPClient sends the requests. Default: the SDK's client.
	HTTPClient *http.Client
}

// Model is an Anthropic model. It is safe for concurrent use.
type Model struct {
	client    sdk.Client
	model     string
	maxTokens int
}

// New checks the options and builds a Model. It makes no request.
func New(o Options) (*Model, error) {
	if o.APIKey == "" {
		o.APIKey = os.Getenv(EnvAPIKey)
	}
	if o.BaseURL == "" {
		o.BaseURL = os.Getenv(EnvBaseURL)
	}
	if o.BaseURL == "" {
		o.BaseURL = DefaultBaseURL
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	o.Model = strings.TrimSpace(o.Model)
	if o.Model == "" {
		return nil, errors.New("anthropic: no model name; use e.g. EVE_MODEL=anthropic:claude-sonnet-4-5")
	}
	if o.APIKey == "" {
		return nil, fmt.Errorf("anthropic: no API key; set %s (https://console.anthropic.com/settings/keys)", EnvAPIKey)
	}
	if u, err := url.Parse(o.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("anthropic: base URL %q is not an http(s) URL; check %s", o.BaseURL, EnvBaseURL)
	}
	opts := []option.RequestOption{
		// eve resolves the key and base URL itself; the SDK must not add
		// credentials from profiles or other environment variables.
		option.WithoutEnvironmentDefaults(),
		option.WithAPIKey(o.APIKey),
		option.WithBaseURL(o.BaseURL),
		// Temporal's retry policy is the single retry layer.
		option.WithMaxRetries(0),
		option.WithMiddleware(messagesAPI.Middleware),
	}
	if o.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(o.HTTPClient))
	}
	return &Model{client: sdk.NewClient(opts...), model: o.Model, maxTokens: o.MaxTokens}, nil
}

// ID implements model.Model: "anthropic:<model>".
func (m *Model) ID() string { return "anthropic:" + m.model }

// Step implements model.Model. It streams the response, calling stream for
// each text delta in order, and returns the whole step.
func (m *Model) Step(ctx context.Context, req model.Request, stream model.Stream) (model.Response, error) {
	params, err := m.params(req)
	if err != nil {
		return model.Response{}, err
	}
	s := m.client.Messages.NewStreaming(ctx, params)
	defer s.Close()

	var (
		text       strings.Builder
		blocks     []*toolBlock // tool_use blocks in index order
		byIndex    = map[int64]*toolBlock{}
		stopReason string
		stopped    bool
		usage      usageAcc
	)
	for s.Next() {
		ev := s.Current()
		switch ev.Type {
		case "message_start":
			usage.start(ev.Message.Usage)
		case "content_block_start":
			cb := ev.ContentBlock
			switch cb.Type {
			case "tool_use":
				b := &toolBlock{id: cb.ID, name: cb.Name, initial: cb.JSON.Input.Raw()}
				blocks = append(blocks, b)
				byIndex[ev.Index] = b
			case "text":
				if cb.Text != "" {
					text.WriteString(cb.Text)
					if stream != nil {
						stream(cb.Text)
					}
				}
			}
		case "content_block_delta":
			switch ev.Delta.Type {
			case "text_delta":
				if ev.Delta.Text == "" {
					continue
				}
				text.WriteString(ev.Delta.Text)
				if stream != nil {
					stream(ev.Delta.Text)
				}
			case "input_json_delta":
				if b := byIndex[ev.Index]; b != nil {
					b.partial.WriteString(ev.Delta.PartialJSON)
				}
			}
		case "message_delta":
			stopReason = string(ev.Delta.StopReason)
			usage.delta(ev.Usage)
		case "message_stop":
			stopped = true
		}
	}
	if err := s.Err(); err != nil {
		return model.Response{}, messagesAPI.StepError(ctx, err)
	}
	if !stopped && stopReason == "" {
		return model.Response{}, wrap(&apierror.Failure{Message: "the response stream ended before the message was complete", Transient: true})
	}
	resp := model.Response{Text: text.String(), Usage: usage.usage()}
	for _, b := range blocks {
		resp.ToolCalls = append(resp.ToolCalls, model.ToolCall{ID: b.id, Name: b.name, Input: b.input()})
	}
	resp.FinishReason = finishReason(stopReason, len(resp.ToolCalls) > 0)
	return resp, nil
}

type toolBlock struct {
	id, name string
	initial  string // content_block_start's input, usually {}
	partial  strings.Builder
}

// input is the tool call's input as the model wrote it. A string that is
// not JSON (a block cut off by max_tokens) is passed on as a JSON string, so
// it survives Temporal's JSON payloads and the runtime's input validation
// rejects it with an error the model can act on.
func (b *toolBlock) input() json.RawMessage {
	s := strings.TrimSpace(b.partial.String())
	if s == "" {
		s = strings.TrimSpace(b.initial)
	}
	if s == "" || s == "null" {
		return json.RawMessage(`{}`)
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	q, _ := json.Marshal(s)
	return q
}

// usageAcc gathers usage from message_start and message_delta, whose counts
// are cumulative.
type usageAcc struct {
	input, output, cacheRead, cacheWrite int64
}

func (u *usageAcc) start(s sdk.Usage) {
	u.input = s.InputTokens
	u.output = s.OutputTokens
	u.cacheRead = s.CacheReadInputTokens
	u.cacheWrite = s.CacheCreationInputTokens
}

func (u *usageAcc) delta(d sdk.MessageDeltaUsage) {
	u.output = d.OutputTokens
	if d.JSON.InputTokens.Valid() {
		u.input = d.InputTokens
	}
	if d.JSON.CacheReadInputTokens.Valid() {
		u.cacheRead = d.CacheReadInputTokens
	}
	if d.JSON.CacheCreationInputTokens.Valid() {
		u.cacheWrite = d.CacheCreationInputTokens
	}
}

// usage maps to eve's Usage. Anthropic's input_tokens leaves out cached
// tokens; eve's InputTokens counts every input token, and CacheRead and
// CacheWrite say how many of them were read from or written to the cache.
func (u *usageAcc) usage() model.Usage {
	return model.Usage{
		InputTokens:      int(u.input + u.cacheRead + u.cacheWrite),
		OutputTokens:     int(u.output),
		CacheReadTokens:  int(u.cacheRead),
		CacheWriteTokens: int(u.cacheWrite),
	}
}

// finishReason maps Anthropic's stop_reason to eve's.
func finishReason(stop string, toolCalls bool) string {
	switch stop {
	case "end_turn", "stop_sequence":
		if toolCalls {
			return model.FinishToolCalls
		}
		return model.FinishStop
	case "tool_use":
		return model.FinishToolCalls
	case "max_tokens", "model_context_window_exceeded":
		return model.FinishLength
	default: // pause_turn, refusal, and any new reason
		return model.FinishOther
	}
}

// Package openai runs eve model steps on the OpenAI Chat Completions API
// (streaming), through github.com/openai/openai-go/v3. The base URL is
// configurable, so any OpenAI-compatible server works: Ollama
// (http://localhost:11434/v1), vLLM, LM Studio, llama.cpp's server, and
// gateways such as LiteLLM or OpenRouter.
//
// The SDK's own retries are off: a transient failure (429, 5xx, timeouts,
// connection errors) comes back as a model.Retryable *Error carrying the
// server's Retry-After, and the model step activity's Temporal retry policy
// is the only retry layer.
package openai

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/model/internal/apierror"
)

// Environment variables read by New when Options leaves a field empty.
const (
	EnvAPIKey  = "OPENAI_API_KEY"
	EnvBaseURL = "OPENAI_BASE_URL"
)

// DefaultBaseURL is OpenAI's API.
const DefaultBaseURL = "https://api.openai.com/v1"

// Options configures a Model.
type Options struct {
	// APIKey is sent as a bearer token. Default: $OPENAI_API_KEY. Required
	// for api.openai.com; optional for other servers (Ollama needs none).
	APIKey string
	// BaseURL of the API, up to and including /v1. Default:
	// $OPENAI_BASE_URL, then DefaultBaseURL.
	BaseURL string
	// Model is the model name, e.g. "gpt-4.1-mini" or, on Ollama, "qwen3:8b".
	// Required.
	Model string
	// MaxTokens caps each step's output (sent as max_completion_tokens).
	// Default: 0, the server's own limit.
	MaxTokens int
	// HTTPClient sends the requests. Default: the SDK's client.
	HTTPClient *http.Client
}

// Model is an OpenAI (or OpenAI-compatible) chat model. It is safe for
// concurrent use.
type Model struct {
	client    sdk.Client
	model     string
	maxTokens int
	api       *apierror.API // how the server fails
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
	o.Model = strings.TrimSpace(o.Model)
	if o.Model == "" {
		return nil, errors.New("openai: no model name; use e.g. EVE_MODEL=openai:gpt-4.1-mini")
	}
	u, err := url.Parse(o.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai: base URL %q is not an http(s) URL; check %s (e.g. http://localhost:11434/v1 for Ollama)", o.BaseURL, EnvBaseURL)
	}
	official := strings.EqualFold(u.Hostname(), "api.openai.com")
	if o.APIKey == "" && official {
		return nil, fmt.Errorf("openai: no API key; set %s (https://platform.openai.com/api-keys), or set %s to an OpenAI-compatible server", EnvAPIKey, EnvBaseURL)
	}
	keyHint := "set " + EnvAPIKey + " to a valid API key (https://platform.openai.com/api-keys)"
	if !official {
		keyHint = fmt.Sprintf("set %s to a key the server at %s accepts", EnvAPIKey, o.BaseURL)
	}
	api := chatAPI(keyHint)
	opts := []option.RequestOption{
		option.WithAPIKey(o.APIKey),
		option.WithBaseURL(o.BaseURL),
		// Temporal's retry policy is the single retry layer.
		option.WithMaxRetries(0),
		option.WithMiddleware(api.Middleware),
	}
	if o.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(o.HTTPClient))
	}
	return &Model{client: sdk.NewClient(opts...), model: o.Model, maxTokens: o.MaxTokens, api: api}, nil
}

// ID implements model.Model: "openai:<model>".
func (m *Model) ID() string { return "openai:" + m.model }

// Step implements model.Model. It streams the response, calling stream for
// each text delta in order, assembles the tool calls from their argument
// deltas, and returns the whole step.
func (m *Model) Step(ctx context.Context, req model.Request, stream model.Stream) (model.Response, error) {
	params, err := m.params(req)
	if err != nil {
		return model.Response{}, err
	}
	s := m.client.Chat.Completions.NewStreaming(ctx, params)
	defer s.Close()

	var (
		text    strings.Builder
		calls   []*pendingCall
		byIndex = map[int64]*pendingCall{}
		finish  string
		usage   model.Usage
	)
	for s.Next() {
		chunk := s.Current()
		if chunk.JSON.Usage.Valid() {
			usage = mapUsage(chunk.Usage)
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue // eve asks for one choice
			}
			if d := ch.Delta.Content; d != "" {
				text.WriteString(d)
				if stream != nil {
					stream(d)
				}
			}
			for _, tc := range ch.Delta.ToolCalls {
				p := byIndex[tc.Index]
				// A new id at a known index is a new call: some servers send
				// every call at index 0.
				if p == nil || (tc.ID != "" && p.id != "" && tc.ID != p.id) {
					p = &pendingCall{}
					calls = append(calls, p)
					byIndex[tc.Index] = p
				}
				if tc.ID != "" {
					p.id = tc.ID
				}
				if tc.Function.Name != "" && p.name == "" {
					p.name = tc.Function.Name
				}
				p.args.WriteString(tc.Function.Arguments)
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	if err := s.Err(); err != nil {
		return model.Response{}, m.api.StepError(ctx, err)
	}
	if finish == "" {
		return model.Response{}, wrap(&apierror.Failure{Message: "the response stream ended before a finish_reason", Transient: true})
	}
	resp := model.Response{Text: text.String(), Usage: usage}
	for _, p := range calls {
		id := p.id
		if id == "" {
			id = newCallID()
		}
		resp.ToolCalls = append(resp.ToolCalls, model.ToolCall{ID: id, Name: p.name, Input: CallInput(p.args.String())})
	}
	resp.FinishReason = finishReason(finish, len(resp.ToolCalls) > 0)
	return resp, nil
}

type pendingCall struct {
	id, name string
	args     strings.Builder
}

// CallInput is how a tool call's arguments string becomes its input:
//
//   - valid JSON is the input as it is;
//   - an empty string is {} (some servers send "" for a call without
//     arguments);
//   - anything else (arguments the model left unfinished or malformed) is
//     kept, as a JSON string holding the text the model wrote.
//
// The JSON string survives Temporal's JSON payloads (raw bytes that are not
// JSON would fail to serialize the step's result), the runtime shows it in
// events as {"$raw": "..."}, and input validation rejects it because it is
// not an object, so the model gets a tool input error it can correct.
// Sending the conversation back, the string's text becomes the call's
// arguments again.
func CallInput(args string) json.RawMessage {
	s := strings.TrimSpace(args)
	if s == "" {
		return json.RawMessage(`{}`)
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	q, _ := json.Marshal(args)
	return q
}

// mapUsage maps to eve's Usage. OpenAI's prompt_tokens already counts the
// cached tokens, as eve's InputTokens does.
func mapUsage(u sdk.CompletionUsage) model.Usage {
	return model.Usage{
		InputTokens:      int(u.PromptTokens),
		OutputTokens:     int(u.CompletionTokens),
		CacheReadTokens:  int(u.PromptTokensDetails.CachedTokens),
		CacheWriteTokens: int(u.PromptTokensDetails.CacheWriteTokens),
	}
}

// finishReason maps OpenAI's finish_reason to eve's. A step with tool calls
// is "tool-calls" whatever the server said (Ollama and some other servers
// answer "stop").
func finishReason(r string, toolCalls bool) string {
	if toolCalls {
		return model.FinishToolCalls
	}
	switch r {
	case "stop":
		return model.FinishStop
	case "tool_calls", "function_call":
		return model.FinishToolCalls
	case "length":
		return model.FinishLength
	default: // content_filter and anything new
		return model.FinishOther
	}
}

func newCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}

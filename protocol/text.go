package protocol

import (
	"strconv"
	"strings"
)

// ResolveText maps a typed answer onto a request, by eve's channel rules:
// an option id, then an option label (both case-insensitive), then the
// 1-based option number, then free text when the request allows it or has
// no options. ok is false when the text fits none of these.
func ResolveText(req InputRequest, text string) (InputResponse, bool) {
	t := strings.TrimSpace(text)
	if t == "" {
		return InputResponse{}, false
	}
	for _, o := range req.Options {
		if strings.EqualFold(o.ID, t) {
			return InputResponse{RequestID: req.RequestID, OptionID: o.ID}, true
		}
	}
	for _, o := range req.Options {
		if strings.EqualFold(o.Label, t) {
			return InputResponse{RequestID: req.RequestID, OptionID: o.ID}, true
		}
	}
	if n, err := strconv.Atoi(t); err == nil && n >= 1 && n <= len(req.Options) {
		return InputResponse{RequestID: req.RequestID, OptionID: req.Options[n-1].ID}, true
	}
	if req.AllowFreeform || len(req.Options) == 0 {
		return InputResponse{RequestID: req.RequestID, Text: text}, true
	}
	return InputResponse{}, false
}

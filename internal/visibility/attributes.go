package visibility

// SearchAttributeTypes names each of eve's search attributes (the workflows
// upsert them: workflows/visibility.go, workflows/inbox.go) and its type,
// for registration.
var SearchAttributeTypes = map[string]string{
	"EveStatus":    "Keyword",
	"EveTools":     "KeywordList",
	"EveSessionId": "Keyword",
	// The inbox (workflows/inbox.go).
	"EveInbox":        "Keyword",
	"EveRequester":    "Keyword",
	"EveRequestKinds": "KeywordList",
	"EveParkedAt":     "Datetime",
}

// InboxAttributes are the attributes only the inbox needs: a namespace
// that has the others but not these records session status, and its
// parked turns are not listed in the inbox.
var InboxAttributes = []string{"EveInbox", "EveRequester", "EveRequestKinds", "EveParkedAt"}

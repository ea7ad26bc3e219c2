// Package catalogtest provides a realistic fixture catalog (Gmail, GitHub,
// Slack and Google Calendar toolkits) and an in-memory Executor for tests of
// the catalog and of the packages built on it.
package catalogtest

import (
	"encoding/json"

	"github.com/eve-temporal/eve/catalog"
)

func def(name, capability, description string, ann catalog.Annotations, input string, output ...string) catalog.Definition {
	tk, _, _ := catalog.SplitName(name)
	d := catalog.Definition{
		Name:        name,
		Toolkit:     tk,
		Capability:  capability,
		Description: description,
		InputSchema: json.RawMessage(input),
		Annotations: ann,
		Version:     "1.0.0",
	}
	if len(output) > 0 {
		d.OutputSchema = json.RawMessage(output[0])
	}
	return d
}

var (
	readOnly    = catalog.Annotations{ReadOnly: true, Idempotent: true, OpenWorld: true}
	write       = catalog.Annotations{OpenWorld: true}
	idempotent  = catalog.Annotations{Idempotent: true, OpenWorld: true}
	destructive = catalog.Annotations{Destructive: true, OpenWorld: true}
	async       = catalog.Annotations{OpenWorld: true, Async: true}
)

const noArgs = `{"type":"object","properties":{}}`

// Toolkits returns the fixture as four toolkits.
func Toolkits() []catalog.Toolkit {
	return []catalog.Toolkit{
		{Slug: "gmail", Name: "Gmail", Description: "Read, search, send and organise Gmail messages.", Tools: gmail()},
		{Slug: "github", Name: "GitHub", Description: "Issues, pull requests, code search and workflows on GitHub.", Tools: github()},
		{Slug: "slack", Name: "Slack", Description: "Post, read and search Slack messages and channels.", Tools: slack()},
		{Slug: "calendar", Name: "Google Calendar", Description: "Create, list and update Google Calendar events.", Tools: calendar()},
	}
}

// Definitions returns every fixture definition.
func Definitions() []catalog.Definition {
	var out []catalog.Definition
	for _, tk := range Toolkits() {
		out = append(out, tk.Tools...)
	}
	return out
}

// Catalog builds the fixture catalog; it panics if the fixture is invalid.
func Catalog() *catalog.Catalog {
	b := catalog.NewBuilder()
	for _, tk := range Toolkits() {
		b.AddToolkit(tk)
	}
	c, err := b.Build()
	if err != nil {
		panic(err)
	}
	return c
}

func gmail() []catalog.Definition {
	return []catalog.Definition{
		def("gmail.send_email", "email.send",
			"Send an email from the user's Gmail account right away. Use create_draft instead when the user wants to review the message first. Sending cannot be undone.",
			write,
			`{"type":"object","properties":{
				"to":{"type":"array","items":{"type":"string","format":"email"},"minItems":1,"description":"Recipient addresses."},
				"cc":{"type":"array","items":{"type":"string","format":"email"}},
				"bcc":{"type":"array","items":{"type":"string","format":"email"}},
				"subject":{"type":"string","description":"Subject line."},
				"body":{"type":"string","description":"Message body."},
				"isHtml":{"type":"boolean","default":false,"description":"Whether body is HTML."}
			},"required":["to","subject","body"],"additionalProperties":false}`,
			`{"type":"object","properties":{"id":{"type":"string"},"threadId":{"type":"string"}},"required":["id","threadId"]}`),
		def("gmail.create_draft", "email.draft",
			"Create a draft email in Gmail without sending it, so the user can review and send it later.",
			write,
			`{"type":"object","properties":{
				"to":{"type":"array","items":{"type":"string","format":"email"}},
				"subject":{"type":"string"},
				"body":{"type":"string"}
			},"required":["to","subject","body"]}`,
			`{"type":"object","properties":{"draftId":{"type":"string"}},"required":["draftId"]}`),
		def("gmail.search_emails", "email.read",
			"Search the user's mailbox with Gmail search syntax (from:, subject:, has:attachment, after:) and return matching message summaries.",
			readOnly,
			`{"type":"object","properties":{
				"query":{"type":"string","description":"Gmail search query."},
				"pageSize":{"type":"integer","minimum":1,"maximum":100,"default":20},
				"pageToken":{"type":"string"}
			},"required":["query"]}`),
		def("gmail.get_email", "email.read",
			"Fetch one email message by id, with headers, body and attachment metadata.",
			readOnly,
			`{"type":"object","properties":{"messageId":{"type":"string"}},"required":["messageId"]}`),
		def("gmail.reply_to_email", "email.send",
			"Reply to an existing email thread. Set replyAll to answer every recipient.",
			write,
			`{"type":"object","properties":{
				"messageId":{"type":"string"},
				"body":{"type":"string"},
				"replyAll":{"type":"boolean"}
			},"required":["messageId","body"]}`),
		def("gmail.list_labels", "email.read",
			"List the labels (folders) in the user's Gmail account.",
			readOnly, noArgs),
		def("gmail.add_label", "email.organize",
			"Apply one or more labels to an email message.",
			idempotent,
			`{"type":"object","properties":{
				"messageId":{"type":"string"},
				"labelIds":{"type":"array","items":{"type":"string"},"minItems":1}
			},"required":["messageId","labelIds"]}`),
		def("gmail.delete_email", "email.organize",
			"Move an email to the trash, or delete it permanently when permanent is true. Permanent deletion cannot be undone.",
			destructive,
			`{"type":"object","properties":{
				"messageId":{"type":"string"},
				"permanent":{"type":"boolean"}
			},"required":["messageId"]}`),
		def("gmail.list_threads", "email.read",
			"List email conversation threads, newest first, optionally filtered by a search query.",
			readOnly,
			`{"type":"object","properties":{
				"query":{"type":"string"},
				"maxResults":{"type":"integer","minimum":1,"maximum":500}
			}}`),
	}
}

const repo = `"owner":{"type":"string","description":"Repository owner (user or organization)."},"repo":{"type":"string","description":"Repository name."}`

func github() []catalog.Definition {
	return []catalog.Definition{
		def("github.create_issue", "code.issues",
			"Open a new issue in a GitHub repository with a title, body, labels and assignees.",
			write,
			`{"type":"object","properties":{`+repo+`,
				"title":{"type":"string"},
				"body":{"type":"string"},
				"labels":{"type":"array","items":{"type":"string"}},
				"assignees":{"type":"array","items":{"type":"string"}}
			},"required":["owner","repo","title"]}`,
			`{"type":"object","properties":{"number":{"type":"integer"},"url":{"type":"string","format":"uri"}},"required":["number","url"]}`),
		def("github.list_issues", "code.issues",
			"List issues in a repository, filtered by state and labels.",
			readOnly,
			`{"type":"object","properties":{`+repo+`,
				"state":{"type":"string","enum":["open","closed","all"]},
				"labels":{"type":"array","items":{"type":"string"}},
				"perPage":{"type":"integer","minimum":1,"maximum":100}
			},"required":["owner","repo"]}`),
		def("github.get_issue", "code.issues",
			"Get one issue with its body, labels, assignees and state.",
			readOnly,
			`{"type":"object","properties":{`+repo+`,"issueNumber":{"type":"integer","minimum":1}},"required":["owner","repo","issueNumber"]}`),
		def("github.comment_on_issue", "code.issues",
			"Add a comment to an issue or pull request.",
			write,
			`{"type":"object","properties":{`+repo+`,"issueNumber":{"type":"integer"},"body":{"type":"string"}},"required":["owner","repo","issueNumber","body"]}`),
		def("github.close_issue", "code.issues",
			"Close an issue as completed or not planned.",
			idempotent,
			`{"type":"object","properties":{`+repo+`,"issueNumber":{"type":"integer"},"reason":{"type":"string","enum":["completed","not_planned"]}},"required":["owner","repo","issueNumber"]}`),
		def("github.create_pull_request", "code.pull_requests",
			"Open a pull request to merge a head branch into a base branch.",
			write,
			`{"type":"object","properties":{`+repo+`,
				"title":{"type":"string"},
				"head":{"type":"string","description":"Branch with the changes."},
				"base":{"type":"string","description":"Branch to merge into."},
				"body":{"type":"string"},
				"draft":{"type":"boolean"}
			},"required":["owner","repo","title","head","base"]}`),
		def("github.merge_pull_request", "code.pull_requests",
			"Merge an open pull request with the merge, squash or rebase method.",
			write,
			`{"type":"object","properties":{`+repo+`,
				"pullNumber":{"type":"integer"},
				"mergeMethod":{"type":"string","enum":["merge","squash","rebase"]}
			},"required":["owner","repo","pullNumber"]}`),
		def("github.list_pull_requests", "code.pull_requests",
			"List pull requests in a repository by state.",
			readOnly,
			`{"type":"object","properties":{`+repo+`,"state":{"type":"string","enum":["open","closed","all"]}},"required":["owner","repo"]}`),
		def("github.search_code", "code.search",
			"Search source code across GitHub repositories with GitHub code search qualifiers (repo:, language:, path:).",
			readOnly,
			`{"type":"object","properties":{"query":{"type":"string"},"perPage":{"type":"integer"}},"required":["query"]}`),
		def("github.get_file_contents", "code.repos",
			"Read a file's contents from a repository at a branch, tag or commit.",
			readOnly,
			`{"type":"object","properties":{`+repo+`,"path":{"type":"string"},"ref":{"type":"string"}},"required":["owner","repo","path"]}`),
		def("github.delete_repository", "code.repos",
			"Delete a repository permanently. This cannot be undone.",
			destructive,
			`{"type":"object","properties":{`+repo+`},"required":["owner","repo"]}`),
		def("github.run_workflow", "code.ci",
			"Trigger a GitHub Actions workflow run on a branch; the run finishes later.",
			async,
			`{"type":"object","properties":{`+repo+`,
				"workflowId":{"type":"string"},
				"ref":{"type":"string"},
				"inputs":{"type":"object","additionalProperties":{"type":"string"}}
			},"required":["owner","repo","workflowId","ref"]}`),
	}
}

func slack() []catalog.Definition {
	return []catalog.Definition{
		def("slack.send_message", "messaging.send",
			"Post a message to a Slack channel or direct message, optionally as a reply in a thread.",
			write,
			`{"type":"object","properties":{
				"channel":{"type":"string","description":"Channel id or name."},
				"text":{"type":"string","maxLength":40000},
				"threadTs":{"type":"string","description":"Timestamp of the parent message to reply in its thread."}
			},"required":["channel","text"]}`),
		def("slack.list_channels", "messaging.read",
			"List public and private Slack channels the user can see.",
			readOnly,
			`{"type":"object","properties":{"limit":{"type":"integer"},"cursor":{"type":"string"}}}`),
		def("slack.search_messages", "messaging.read",
			"Search Slack messages across channels with Slack search modifiers (in:, from:).",
			readOnly,
			`{"type":"object","properties":{"query":{"type":"string"},"count":{"type":"integer"}},"required":["query"]}`),
		def("slack.get_channel_history", "messaging.read",
			"Read recent messages from one Slack channel.",
			readOnly,
			`{"type":"object","properties":{"channel":{"type":"string"},"limit":{"type":"integer"},"oldest":{"type":"string"}},"required":["channel"]}`),
		def("slack.create_channel", "messaging.channels",
			"Create a new public or private Slack channel.",
			write,
			`{"type":"object","properties":{"name":{"type":"string","pattern":"^[a-z0-9_-]{1,80}$"},"isPrivate":{"type":"boolean"}},"required":["name"]}`),
		def("slack.add_reaction", "messaging.send",
			"Add an emoji reaction to a Slack message.",
			idempotent,
			`{"type":"object","properties":{"channel":{"type":"string"},"timestamp":{"type":"string"},"name":{"type":"string","description":"Emoji name without colons."}},"required":["channel","timestamp","name"]}`),
		def("slack.upload_file", "messaging.send",
			"Upload a file or text snippet to one or more Slack channels.",
			write,
			`{"type":"object","properties":{"channels":{"type":"array","items":{"type":"string"}},"content":{"type":"string"},"filename":{"type":"string"},"title":{"type":"string"}},"required":["channels","content"]}`),
		def("slack.set_status", "messaging.profile",
			"Set the user's Slack status text and emoji, with an optional expiration.",
			idempotent,
			`{"type":"object","properties":{"statusText":{"type":"string"},"statusEmoji":{"type":"string"},"expiration":{"type":"integer","description":"Unix time when the status clears."}},"required":["statusText"]}`),
	}
}

const when = `{"type":"object","properties":{"dateTime":{"type":"string","format":"date-time"},"timeZone":{"type":"string"}},"required":["dateTime"]}`

func calendar() []catalog.Definition {
	return []catalog.Definition{
		def("calendar.create_event", "calendar.write",
			"Schedule a meeting or other event: create a calendar event with a title, start and end time, attendees and location, and send the invitations.",
			write,
			`{"type":"object","properties":{
				"calendarId":{"type":"string","default":"primary"},
				"summary":{"type":"string","description":"Event title."},
				"start":`+when+`,
				"end":`+when+`,
				"attendees":{"type":"array","items":{"type":"object","properties":{"email":{"type":"string","format":"email"},"optional":{"type":"boolean"}},"required":["email"]}},
				"location":{"type":"string"},
				"description":{"type":"string"}
			},"required":["summary","start","end"]}`,
			`{"type":"object","properties":{"eventId":{"type":"string"},"htmlLink":{"type":"string"}},"required":["eventId"]}`),
		def("calendar.list_events", "calendar.read",
			"List events on a calendar between two times, in start order.",
			readOnly,
			`{"type":"object","properties":{"calendarId":{"type":"string"},"timeMin":{"type":"string","format":"date-time"},"timeMax":{"type":"string","format":"date-time"},"maxResults":{"type":"integer"}}}`),
		def("calendar.update_event", "calendar.write",
			"Change an existing event's title, time or location.",
			idempotent,
			`{"type":"object","properties":{"eventId":{"type":"string"},"summary":{"type":"string"},"start":`+when+`,"end":`+when+`,"location":{"type":"string"}},"required":["eventId"]}`),
		def("calendar.delete_event", "calendar.write",
			"Delete a calendar event and notify its attendees. This cannot be undone.",
			destructive,
			`{"type":"object","properties":{"eventId":{"type":"string"},"notifyAttendees":{"type":"boolean"}},"required":["eventId"]}`),
		def("calendar.find_free_slots", "calendar.read",
			"Find times when all attendees are free for a meeting of the given duration.",
			readOnly,
			`{"type":"object","properties":{"attendees":{"type":"array","items":{"type":"string","format":"email"}},"durationMinutes":{"type":"integer","minimum":5},"timeMin":{"type":"string","format":"date-time"},"timeMax":{"type":"string","format":"date-time"}},"required":["attendees","durationMinutes"]}`),
		def("calendar.respond_to_invitation", "calendar.write",
			"Accept, decline or tentatively accept a meeting invitation.",
			idempotent,
			`{"type":"object","properties":{"eventId":{"type":"string"},"response":{"type":"string","enum":["accepted","declined","tentative"]}},"required":["eventId","response"]}`),
		def("calendar.list_calendars", "calendar.read",
			"List the calendars the user can see.",
			readOnly, noArgs),
	}
}

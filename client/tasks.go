package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/eve-temporal/eve/protocol"
)

// SessionTasks is a session's task listing: the running turn's tasks
// (TurnID), or between turns the idle resumable tasks the session keeps.
type SessionTasks = protocol.SessionTasks

// TaskInfo is one task of a listing.
type TaskInfo = protocol.TaskInfo

// TaskCancelResult is CancelTask's answer.
type TaskCancelResult = protocol.TaskCancelResult

// Tasks lists a session's tasks (GET /eve/v1/session/{id}/tasks), with
// each working task's last reported progress. It needs the session's
// stream access.
func (c *Client) Tasks(ctx context.Context, sessionID string) (SessionTasks, error) {
	var out SessionTasks
	err := c.getJSON(ctx, sessionRoute(sessionID, "/tasks"), nil, &out)
	return out, err
}

// CancelTask stops one working task of the session's running turn
// (POST /eve/v1/session/{id}/tasks/{taskId}/cancel): its task.settled says
// cancelled (cancel.reason task_cancel) and the model reads that it was
// stopped. An unknown task is a 404 task_not_found *Error, an idle or
// settled one 409 task_not_working. It needs the session's cancel access.
func (c *Client) CancelTask(ctx context.Context, sessionID, taskID string) (TaskCancelResult, error) {
	var out TaskCancelResult
	_, err := c.do(ctx, http.MethodPost, sessionRoute(sessionID, "/tasks/"+url.PathEscape(taskID)+"/cancel"), map[string]any{}, &out)
	return out, err
}

package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/eve-temporal/eve/internal/httpjson"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Error codes of the task routes.
const (
	CodeTaskNotFound   = "task_not_found"
	CodeTaskNotWorking = "task_not_working"
)

// sessionTasks: GET /eve/v1/session/{id}/tasks lists the session's tasks
// (sessions.Service.Tasks: the running turn's, or the idle resumable ones
// the session keeps between turns). It shows what the stream shows, so it
// needs the session's stream access.
func (s *Server) sessionTasks(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RequestTimeout)
	defer cancel()
	sum, err := s.authorize(ctx, id, ActionStream, SessionAccess{})
	if err != nil {
		s.fail(w, s.temporalError("list the session's tasks", id, err))
		return
	}
	out, err := s.opts.Sessions.Tasks(ctx, id, sum)
	if err != nil {
		s.fail(w, s.temporalError("list the session's tasks", id, err))
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	httpjson.Write(w, http.StatusOK, out)
}

// cancelTask: POST /eve/v1/session/{id}/tasks/{taskId}/cancel stops one
// working task of the session's running turn (its eve.task.cancel
// Update). It needs the session's cancel access, as cancelling the turn
// does. 404 task_not_found: no running turn has the task; 409
// task_not_working: it is idle or settled. Neither records anything.
func (s *Server) cancelTask(w http.ResponseWriter, r *http.Request) {
	id, taskID := r.PathValue("id"), r.PathValue("taskId")
	if _, err := s.readObject(w, r, true); err != nil {
		s.fail(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RequestTimeout)
	defer cancel()
	caller := Caller(ctx)
	sum, err := s.authorize(ctx, id, ActionCancel, SessionAccess{Caller: caller})
	if err != nil {
		s.fail(w, s.temporalError("cancel the task", id, err))
		return
	}
	res, err := s.opts.Sessions.CancelTask(ctx, id, sum, signals.TaskCancelRequest{TaskID: taskID, Caller: caller})
	switch {
	case errors.Is(err, sessions.ErrUnknownTask):
		s.fail(w, errorf(http.StatusNotFound, CodeTaskNotFound, "session %s has no working task %q: a task can be cancelled while the turn that runs it works (GET /eve/v1/session/%s/tasks lists them)", id, taskID, id))
		return
	case errors.Is(err, sessions.ErrTaskNotWorking):
		s.fail(w, errorf(http.StatusConflict, CodeTaskNotWorking, "task %q of session %s has no work to stop: it is idle or has settled", taskID, id))
		return
	case err != nil:
		s.fail(w, s.temporalError("cancel the task", id, err))
		return
	}
	s.hub.wake(id)
	w.Header().Set("x-eve-session-id", id)
	httpjson.Write(w, http.StatusOK, protocol.TaskCancelResult{OK: true, SessionID: id, TaskID: res.TaskID, TurnID: res.TurnID, Status: protocol.TaskCancelled})
}

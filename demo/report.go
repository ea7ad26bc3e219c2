package demo

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/eve-temporal/eve/tools"
)

// DefaultJobsDir is where run_report spools its jobs unless EVE_JOBS_DIR
// says otherwise.
const DefaultJobsDir = ".eve/jobs"

// ReportDeadline bounds how long a run_report call waits for its job.
const ReportDeadline = 10 * time.Minute

// JobsDir returns $EVE_JOBS_DIR, or DefaultJobsDir.
func JobsDir() string {
	if d := os.Getenv("EVE_JOBS_DIR"); d != "" {
		return d
	}
	return DefaultJobsDir
}

// ReportInput is run_report's input.
type ReportInput struct {
	Name string `json:"name"`
}

// Report is run_report's output: what the job completes the call with.
type Report struct {
	Status string `json:"status"` // succeeded or failed
	Detail string `json:"detail"`
}

// JobAction is the part of the action a job needs to finish it.
type JobAction struct {
	ID         string           `json:"id"`
	Completion tools.Completion `json:"completion"`
	Deadline   time.Time        `json:"deadline"`
}

// ReportJob is one job file, <jobs dir>/<action id>.json. A runner
// completes it through Action.Completion.URL (or TaskToken, base64, with a
// Temporal client: see `eve action complete --task-token`).
type ReportJob struct {
	Action    JobAction       `json:"action"`
	Input     json.RawMessage `json:"input"`
	TaskToken string          `json:"taskToken,omitempty"`
}

// Job file names: a pending job is <id>.json; a runner claims it by renaming
// it to <id>.json.claimed.
const (
	JobExt     = ".json"
	ClaimedExt = ".json.claimed"
)

var (
	reportInputSchema  = json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","minLength":1,"description":"the report to run, e.g. sales"}},"required":["name"],"additionalProperties":false}`)
	reportOutputSchema = json.RawMessage(`{"type":"object","properties":{"status":{"enum":["succeeded","failed"]},"detail":{"type":"string"}},"required":["status","detail"]}`)
)

// RunReport is a delegated tool: each call spools a job file into jobsDir
// (JobsDir() when empty) for an external runner (cmd/jobrunner), which
// completes the call through its completion URL within ReportDeadline.
func RunReport(jobsDir string) *tools.Tool {
	return tools.DefineDelegated("run_report",
		"Run a named report as a durable external job and return its status and a summary.",
		reportInputSchema, reportOutputSchema,
		tools.Delegated{
			Deadline: ReportDeadline,
			Delegate: func(ctx *tools.Context, input json.RawMessage, a tools.Action) (tools.Pending, error) {
				dir := jobsDir
				if dir == "" {
					dir = JobsDir()
				}
				job := ReportJob{
					Action: JobAction{ID: a.ID, Completion: a.Completion, Deadline: a.Deadline},
					Input:  input,
				}
				if len(a.TaskToken) > 0 {
					job.TaskToken = base64.StdEncoding.EncodeToString(a.TaskToken)
				}
				if err := SpoolJob(dir, job); err != nil {
					return tools.Pending{}, err
				}
				return a.Pending(), nil
			},
		})
}

// SpoolJob writes job to dir as <action id>.json, atomically (a temporary
// file renamed into place), so a runner never reads half a job. It is
// idempotent by action id: a job already spooled, or claimed by a runner,
// is left alone.
func SpoolJob(dir string, job ReportJob) error {
	id := job.Action.ID
	if id == "" || filepath.Base(id) != id || id[0] == '.' {
		return tools.NonRetryable(fmt.Errorf("action id %q cannot name a job file", id))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create jobs dir: %w", err)
	}
	path := filepath.Join(dir, id+JobExt)
	for _, p := range []string{path, filepath.Join(dir, id+ClaimedExt)} {
		if _, err := os.Stat(p); err == nil {
			return nil // already spooled (a retry): one job per action
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("check job %s: %w", p, err)
		}
	}
	body, err := json.MarshalIndent(job, "", "  ")
	if err != nil {
		return tools.NonRetryable(fmt.Errorf("encode job: %w", err))
	}
	tmp, err := os.CreateTemp(dir, "."+id+".*.tmp")
	if err != nil {
		return fmt.Errorf("create job file: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	if _, err := tmp.Write(append(body, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write job file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync job file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close job file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("spool job: %w", err)
	}
	return nil
}

// Command jobrunner is an example job runner for the demo's run_report
// delegated tool. It polls a jobs directory (the file spool run_report
// writes), claims each job by renaming it, heartbeats through the job's
// completion URL while it "works", and completes the call with a report.
//
// It tolerates restarts: a claim whose file has not been touched for
// --claim-ttl (1 minute) is taken to belong to a runner that died and is
// reclaimed. Processing is at-least-once; the report is a function of the
// job, so a repeated completion is a duplicate (200), not a conflict.
//
//	go run ./cmd/jobrunner --jobs-dir .eve/jobs
//	go run ./cmd/jobrunner --once   # process what is there and exit
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/eve-temporal/eve/actions"
	"github.com/eve-temporal/eve/demo"
)

func main() {
	var (
		r        runner
		poll     time.Duration
		once     bool
		logLevel string
	)
	flag.StringVar(&r.dir, "jobs-dir", demo.JobsDir(), "the jobs directory run_report spools into (env EVE_JOBS_DIR)")
	flag.DurationVar(&poll, "poll", time.Second, "how often to look for new jobs")
	flag.DurationVar(&r.workTime, "work-time", 2*time.Second, "how long each job pretends to work")
	flag.DurationVar(&r.heartbeatEvery, "heartbeat", time.Second, "how often to heartbeat while working")
	flag.DurationVar(&r.claimTTL, "claim-ttl", time.Minute, "a claim untouched this long is reclaimed (its runner died)")
	flag.BoolVar(&once, "once", false, "process the jobs there are now, then exit")
	flag.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	flag.Parse()

	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "jobrunner: --log-level %q: want debug, info, warn or error\n", logLevel)
		os.Exit(2)
	}
	r.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	if poll <= 0 || r.workTime < 0 || r.heartbeatEvery <= 0 || r.claimTTL <= 0 {
		fmt.Fprintln(os.Stderr, "jobrunner: --poll, --heartbeat and --claim-ttl must be positive, --work-time not negative")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	if once {
		var n int
		n, err = r.RunOnce(ctx)
		r.log.Info("processed the jobs there were", "jobsDir", r.dir, "jobs", n)
	} else {
		err = r.Run(ctx, poll)
	}
	if err != nil && ctx.Err() == nil {
		r.log.Error("jobrunner stopped", "err", err)
		os.Exit(1)
	}
}

// runner processes the job files of one directory.
type runner struct {
	dir            string
	workTime       time.Duration
	heartbeatEvery time.Duration
	claimTTL       time.Duration
	// client posts to completion URLs (actions.Default when nil).
	client *actions.Client
	log    *slog.Logger
}

func (r *runner) actions() *actions.Client {
	if r.client != nil {
		return r.client
	}
	return actions.Default
}

func (r *runner) logger() *slog.Logger {
	if r.log != nil {
		return r.log
	}
	return slog.Default()
}

func (r *runner) ttl() time.Duration {
	if r.claimTTL > 0 {
		return r.claimTTL
	}
	return time.Minute
}

// Run polls the directory until ctx ends.
func (r *runner) Run(ctx context.Context, poll time.Duration) error {
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return fmt.Errorf("create jobs dir: %w", err)
	}
	r.logger().Info("jobrunner started", "jobsDir", r.dir, "poll", poll, "workTime", r.workTime)
	for {
		if _, err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
			r.logger().Warn("scan jobs", "err", err)
		}
		select {
		case <-ctx.Done():
			r.logger().Info("jobrunner stopped")
			return nil
		case <-time.After(poll):
		}
	}
}

// RunOnce processes every job there is now, stale claims included, and
// returns how many it processed.
func (r *runner) RunOnce(ctx context.Context) (int, error) {
	if err := r.reclaimStale(); err != nil {
		return 0, err
	}
	pending, err := filepath.Glob(filepath.Join(r.dir, "*"+demo.JobExt))
	if err != nil {
		return 0, err
	}
	sort.Strings(pending)
	n := 0
	for _, path := range pending {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		claimed, ok := r.claim(path)
		if !ok {
			continue // another runner took it
		}
		r.Process(ctx, claimed)
		n++
	}
	return n, nil
}

// claim takes a pending job by renaming it; only one runner's rename wins.
// The file is touched first, so the claim starts fresh (a rename keeps
// the spool time, which would look stale to other runners).
func (r *runner) claim(path string) (string, bool) {
	now := time.Now()
	if err := os.Chtimes(path, now, now); err != nil {
		return "", false
	}
	claimed := strings.TrimSuffix(path, demo.JobExt) + demo.ClaimedExt
	if err := os.Rename(path, claimed); err != nil {
		return "", false
	}
	return claimed, true
}

// reclaimStale puts claims nobody has touched for the claim TTL back in
// the queue: their runner died (or was killed) mid-job.
func (r *runner) reclaimStale() error {
	claims, err := filepath.Glob(filepath.Join(r.dir, "*"+demo.ClaimedExt))
	if err != nil {
		return err
	}
	for _, c := range claims {
		fi, err := os.Stat(c)
		if err != nil || time.Since(fi.ModTime()) < r.ttl() {
			continue
		}
		pending := strings.TrimSuffix(c, demo.ClaimedExt) + demo.JobExt
		if err := os.Rename(c, pending); err == nil {
			r.logger().Warn("reclaimed a stale job", "job", filepath.Base(pending), "claimedAt", fi.ModTime())
		}
	}
	return nil
}

// Process works one claimed job to its end: completed, cancelled, or
// ended by the server. The file is removed when nothing more can be done,
// released (back to pending) when the runner is stopping, and kept
// claimed when the completion could not be delivered (it is reclaimed and
// retried after the claim TTL).
func (r *runner) Process(ctx context.Context, claimed string) {
	log := r.logger().With("job", filepath.Base(claimed))
	raw, err := os.ReadFile(claimed)
	if err != nil {
		log.Error("read job", "err", err)
		return
	}
	var job demo.ReportJob
	if err := json.Unmarshal(raw, &job); err != nil || job.Action.Completion.URL == "" {
		log.Error("job file is not a run_report job; removing it", "err", err)
		os.Remove(claimed)
		return
	}
	var in demo.ReportInput
	_ = json.Unmarshal(job.Input, &in)
	log = log.With("action", job.Action.ID, "report", in.Name)
	log.Info("job claimed", "deadline", job.Action.Deadline)

	switch stop, err := r.work(ctx, log, claimed, job); {
	case ctx.Err() != nil:
		// Stopping: hand the job back so the next start picks it up at once.
		pending := strings.TrimSuffix(claimed, demo.ClaimedExt) + demo.JobExt
		if rerr := os.Rename(claimed, pending); rerr != nil {
			log.Warn("release job", "err", rerr)
		} else {
			log.Info("job released: the runner is stopping")
		}
		return
	case stop:
		os.Remove(claimed)
		return
	case err != nil:
		log.Warn("job failed while working", "err", err)
	}

	report := makeReport(job.Action.ID, in)
	err = r.actions().Complete(ctx, job.Action.Completion, report)
	switch {
	case err == nil:
		log.Info("job completed", "status", report.Status, "detail", report.Detail)
		os.Remove(claimed)
	case errors.Is(err, actions.ErrInvalidOutput):
		// A bug in this runner: say so rather than leave the call waiting.
		log.Error("report breaks run_report's output schema; failing the call", "err", err)
		if ferr := r.actions().Fail(ctx, job.Action.Completion, "REPORT_INVALID", "the report runner produced an invalid report"); ferr != nil {
			log.Error("fail the call", "err", ferr)
		}
		os.Remove(claimed)
	case errors.Is(err, actions.ErrGone), errors.Is(err, actions.ErrConflict), errors.Is(err, actions.ErrInvalidCapability):
		log.Warn("the action is over; dropping the job", "err", err)
		os.Remove(claimed)
	case ctx.Err() != nil:
		log.Info("stopping before the completion was delivered; the job stays claimed and is retried after the claim TTL")
	default:
		// eve is unreachable: keep the job (our durable result) for a retry.
		log.Error("could not deliver the completion; the job will be retried after the claim TTL", "err", err)
	}
}

// work pretends to run the report for the work time, heartbeating (and
// keeping the claim fresh) meanwhile. stop is true when the job should
// end without a completion: the turn cancelled it, or it is over.
func (r *runner) work(ctx context.Context, log *slog.Logger, claimed string, job demo.ReportJob) (stop bool, err error) {
	start := time.Now()
	done := time.After(r.workTime)
	every := r.heartbeatEvery
	if every <= 0 {
		every = time.Second
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		progress := 100
		if r.workTime > 0 {
			progress = min(100, int(100*time.Since(start)/r.workTime))
		}
		cancelRequested, err := r.actions().Heartbeat(ctx, job.Action.Completion, map[string]int{"progress": progress})
		switch {
		case cancelRequested:
			log.Info("the turn cancelled the job; stopping")
			return true, nil
		case errors.Is(err, actions.ErrGone), errors.Is(err, actions.ErrInvalidCapability):
			log.Warn("the action is over; stopping", "err", err)
			return true, nil
		case err != nil && ctx.Err() == nil:
			log.Warn("heartbeat", "err", err) // keep working; the completion retries
		}
		now := time.Now()
		os.Chtimes(claimed, now, now) // keep the claim fresh
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-done:
			return false, nil
		case <-tick.C:
		}
	}
}

// makeReport "generates" the report. It depends only on the job, so a
// reclaimed job completes with the same outcome (a duplicate, not a
// conflict).
func makeReport(actionID string, in demo.ReportInput) demo.Report {
	name := strings.TrimSpace(in.Name)
	if name == "" {
		return demo.Report{Status: "failed", Detail: "the job names no report"}
	}
	h := fnv.New32a()
	h.Write([]byte(strings.ToLower(name)))
	rows := h.Sum32()%900 + 100
	return demo.Report{Status: "succeeded", Detail: fmt.Sprintf("%s report generated: %d rows (job %s)", name, rows, actionID)}
}

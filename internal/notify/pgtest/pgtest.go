// Package pgtest starts a throwaway PostgreSQL cluster for tests and
// benchmarks: a temp directory, a free port, run as the postgres user
// (runuser) when the process runs as root. Tests skip when PostgreSQL is
// not installed (the Makefile installs it with apt-get).
package pgtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
)

// ErrUnavailable means this machine cannot run a throwaway cluster.
var ErrUnavailable = errors.New("PostgreSQL cannot run here")

// bin finds a PostgreSQL program.
func bin(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	ms, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(ms) > 0 {
		return ms[len(ms)-1]
	}
	return ""
}

// Start runs a cluster until the test ends and returns its URL.
func Start(t testing.TB) string {
	t.Helper()
	url, stop, err := Cluster()
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return url
}

// Cluster runs a cluster until stop is called and returns its URL. The
// error wraps ErrUnavailable when PostgreSQL is not installed, or the
// process runs as root without a postgres user to run it as.
func Cluster() (url string, stop func(), err error) {
	initdb, pgctl := bin("initdb"), bin("pg_ctl")
	if initdb == "" || pgctl == "" {
		return "", nil, fmt.Errorf("%w: initdb and pg_ctl are not installed (`make postgres` installs them)", ErrUnavailable)
	}
	var as []string
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			return "", nil, fmt.Errorf("%w: running as root without a postgres user", ErrUnavailable)
		}
		as = []string{"runuser", "-u", "postgres", "--"}
	}
	dir, err := os.MkdirTemp("", "eve-pg-")
	if err != nil {
		return "", nil, err
	}
	fail := func(err error) (string, func(), error) {
		os.RemoveAll(dir)
		return "", nil, err
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		return fail(err)
	}
	data := filepath.Join(dir, "data")
	run := func(args ...string) error {
		args = append(append([]string(nil), as...), args...)
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %w: %s", args, err, out)
		}
		return nil
	}
	if err := run(initdb, "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"); err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	opts := "-p " + port + " -k " + dir + " -c listen_addresses=127.0.0.1 -c fsync=off"
	if err := run(pgctl, "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "start"); err != nil {
		return fail(err)
	}
	stop = func() {
		_ = run(pgctl, "-D", data, "-m", "immediate", "-w", "stop")
		os.RemoveAll(dir)
	}
	return "postgres://postgres@127.0.0.1:" + port + "/postgres?sslmode=disable", stop, nil
}

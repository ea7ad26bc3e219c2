package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
)

// startPostgres runs a throwaway PostgreSQL cluster (as internal/notify/pgtest
// does for tests: a temp directory, a free port, as the postgres user when
// run as root) and returns its URL and a stop function.
func startPostgres() (url string, stop func(), err error) {
	initdb, pgctl := pgBin("initdb"), pgBin("pg_ctl")
	if initdb == "" || pgctl == "" {
		return "", nil, fmt.Errorf("PostgreSQL is not installed (initdb, pg_ctl): `make postgres` installs it, or pass -pg URL")
	}
	var as []string
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			return "", nil, fmt.Errorf("running as root without a postgres user to run PostgreSQL as")
		}
		as = []string{"runuser", "-u", "postgres", "--"}
	}
	dir, err := os.MkdirTemp("", "streambench-pg-")
	if err != nil {
		return "", nil, err
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	run := func(args ...string) error {
		args = append(append([]string(nil), as...), args...)
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %w: %s", args, err, out)
		}
		return nil
	}
	data := filepath.Join(dir, "data")
	if err := run(initdb, "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	opts := "-p " + port + " -k " + dir + " -c listen_addresses=127.0.0.1 -c fsync=off"
	if err := run(pgctl, "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "start"); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	stop = func() {
		_ = run(pgctl, "-D", data, "-m", "immediate", "-w", "stop")
		os.RemoveAll(dir)
	}
	return "postgres://postgres@127.0.0.1:" + port + "/postgres?sslmode=disable", stop, nil
}

func pgBin(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	ms, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(ms) > 0 {
		return ms[len(ms)-1]
	}
	return ""
}

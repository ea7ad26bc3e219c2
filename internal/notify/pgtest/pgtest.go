// Package pgtest starts a throwaway PostgreSQL cluster for tests: a temp
// directory, a free port, run as the postgres user (runuser) when the test
// runs as root. Tests skip when PostgreSQL is not installed (the Makefile
// installs it with apt-get).
package pgtest

import (
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
)

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
	initdb, pgctl := bin("initdb"), bin("pg_ctl")
	if initdb == "" || pgctl == "" {
		t.Skip("PostgreSQL is not installed (initdb, pg_ctl): apt-get install postgresql")
	}
	var as []string
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			t.Skip("running as root without a postgres user")
		}
		as = []string{"runuser", "-u", "postgres", "--"}
	}
	dir, err := os.MkdirTemp("", "eve-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	run := func(args ...string) error {
		args = append(append([]string(nil), as...), args...)
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			t.Logf("%v: %s", args, out)
		}
		return err
	}
	if err := run(initdb, "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	opts := "-p " + strconv.Itoa(port) + " -k " + dir + " -c listen_addresses=127.0.0.1 -c fsync=off"
	if err := run(pgctl, "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "start"); err != nil {
		t.Fatalf("pg_ctl start: %v", err)
	}
	t.Cleanup(func() { _ = run(pgctl, "-D", data, "-m", "immediate", "-w", "stop") })
	return "postgres://postgres@127.0.0.1:" + strconv.Itoa(port) + "/postgres?sslmode=disable"
}

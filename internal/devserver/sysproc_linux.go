//go:build linux

package devserver

import (
	"os"
	"syscall"
)

// sysProcAttr puts the server in its own process group (a terminal's Ctrl-C
// reaches only the parent, which stops the server in order) and has the kernel
// signal it when the parent dies, so a crashed test binary leaves no server.
// Servers with a DB file get SIGTERM (a graceful stop keeps the file tidy);
// in-memory ones have nothing to keep and get SIGKILL.
func sysProcAttr(persistent bool) *syscall.SysProcAttr {
	sig := syscall.SIGKILL
	if persistent {
		sig = syscall.SIGTERM
	}
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: sig}
}

func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }

func kill(p *os.Process) error {
	// The whole process group: the CLI runs the server in-process today, but a
	// stray child must not outlive it either.
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	return p.Kill()
}

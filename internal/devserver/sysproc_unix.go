//go:build unix && !linux

package devserver

import (
	"os"
	"syscall"
)

// sysProcAttr puts the server in its own process group, so a terminal's Ctrl-C
// reaches only the parent, which stops the server in order. (There is no
// parent-death signal outside Linux: Stop the server, or it outlives a crash.)
func sysProcAttr(bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }

func kill(p *os.Process) error {
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	return p.Kill()
}

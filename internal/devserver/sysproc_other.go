//go:build !unix

package devserver

import (
	"os"
	"syscall"
)

func sysProcAttr(bool) *syscall.SysProcAttr { return nil }

// terminate cannot signal gracefully outside unix; the server is killed.
func terminate(p *os.Process) error { return p.Kill() }

func kill(p *os.Process) error { return p.Kill() }

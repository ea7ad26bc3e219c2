package benchkit

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// CPUTime returns the user+system CPU time a process has used so far, from
// /proc (Linux only; ok is false elsewhere). pid 0 means this process.
func CPUTime(pid int) (d time.Duration, ok bool) {
	p := "self"
	if pid != 0 {
		p = strconv.Itoa(pid)
	}
	b, err := os.ReadFile("/proc/" + p + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	// After the command: state(0) ... utime is field 14 of stat, index 11 here.
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const ticks = 100 // USER_HZ on every Linux ABI Go supports
	return time.Duration(ut+st) * time.Second / ticks, true
}

// CPUMeter measures CPU used by the dev server and by this process.
type CPUMeter struct {
	pid              int
	server, self     time.Duration
	okServer, okSelf bool
}

func StartCPU(serverPID int) *CPUMeter {
	m := &CPUMeter{pid: serverPID}
	m.server, m.okServer = CPUTime(serverPID)
	m.self, m.okSelf = CPUTime(0)
	return m
}

// Delta returns the CPU time the dev server and this process used since StartCPU.
func (m *CPUMeter) Delta() (server, self time.Duration, ok bool) {
	if !m.okServer || !m.okSelf {
		return 0, 0, false
	}
	srv, ok1 := CPUTime(m.pid)
	me, ok2 := CPUTime(0)
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	return srv - m.server, me - m.self, true
}

// RSS is this process's resident set size in bytes (0 when /proc cannot
// tell).
func RSS() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

// Package proc runs a Narad cluster of real processes on this machine for
// the benches: `narad nats` and `narad serve` nodes, each with its own data
// directory and log under one directory, on loopback ports below 32768.
// bench/bulk (seed 003's figures) and bench/chaos (issue 30's nemesis run)
// start, signal, restart and stop their nodes through it.
//
// Where to start: New in cluster.go picks the ports of NATS and of each
// Node; StartNATS and StartNode start them, WaitReady waits for a node's
// /readyz, Stop sends SIGTERM and waits for the exit, Close kills every
// process still running. proc.go is one process (Proc: its exit, its log,
// its peak RSS, Signal); wait.go holds Poll, the one bounded wait, Tail, a
// log's last lines for an error message, and FreePort; foreach.go holds
// ForEach, the bounded fan-out the benches drive their topics through. netns.go puts each
// node in a network namespace of its own (UseNetns), so that a run can cut
// two nodes' Raft while both stay alive (Drop, Undrop).
//
// Each child runs in a process group of its own, so a Ctrl-C on the
// terminal reaches only the bench, which then stops the children itself; a
// SIGKILL of the bench leaves them running (find them by the directory in
// their arguments).
package proc

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is one child process: the NATS server or a node.
type Proc struct {
	Name    string
	Cmd     *exec.Cmd
	LogPath string
	Started time.Time
	// done is closed once the process has exited; exitErr and exited are
	// set before it closes.
	done    chan struct{}
	exitErr error
	exited  time.Time

	mu    sync.Mutex
	peakK int64 // VmHWM in KiB, the highest read
}

// Done is closed once the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited is when the process exited; valid once Done is closed.
func (p *Proc) Exited() time.Time { return p.exited }

// ExitErr is what waiting for the process returned (nil for exit status
// 0); valid once Done is closed.
func (p *Proc) ExitErr() error { return p.exitErr }

// PeakRSS returns the highest VmHWM read from the process, in KiB.
func (p *Proc) PeakRSS() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peakK
}

// SampleRSS reads VmHWM once. The kernel keeps it as the peak itself, so the
// last read before the exit is the process's peak, give or take what it
// grew in its last poll interval.
func (p *Proc) SampleRSS() {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Cmd.Process.Pid))
	if err != nil {
		return
	}
	for line := range strings.Lines(string(raw)) {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err == nil {
			p.mu.Lock()
			p.peakK = max(p.peakK, kb)
			p.mu.Unlock()
		}
	}
}

// Running reports whether the process has not exited yet.
func (p *Proc) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Signal sends sig to the process (not its group): SIGTERM for a graceful
// stop, SIGKILL for a crash, SIGSTOP and SIGCONT for a pause.
func (p *Proc) Signal(sig syscall.Signal) error {
	if err := p.Cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%v to %s: %w", sig, p.Name, err)
	}
	return nil
}

// KillGroup ends a process and anything it started, at once.
func (p *Proc) KillGroup() {
	if p.Running() {
		syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	}
}

// start runs one process with its output appended to logPath, in a process
// group of its own, and samples its VmHWM every rssPoll (never when 0).
func start(bin, name, logPath string, rssPoll time.Duration, env []string, args ...string) (*Proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log of %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &Proc{Name: name, Cmd: cmd, LogPath: logPath, done: make(chan struct{})}
	p.Started = time.Now()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		err := cmd.Wait()
		p.exited = time.Now()
		p.exitErr = err
		f.Close()
		close(p.done)
	}()
	if rssPoll <= 0 {
		return p, nil
	}
	// The sampler ends with the process.
	go func() {
		t := time.NewTicker(rssPoll)
		defer t.Stop()
		for {
			p.SampleRSS()
			select {
			case <-p.done:
				return
			case <-t.C:
			}
		}
	}()
	return p, nil
}

// Usage is what a process has spent since it started: its CPU time and,
// while it runs, its read and write system calls. The benches read it
// before and after a phase, because a phase's CPU is steadier than its
// wall time on a shared 2-core machine.
type Usage struct {
	CPU time.Duration // user plus system time
	// Syscalls is syscr plus syscw of /proc/<pid>/io; -1 once the process
	// has exited (the kernel keeps only the CPU time for its parent).
	Syscalls int64
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's times:
// 100 on every Linux architecture Go builds for.
const clockTicks = 100

// Usage reads what the process has spent so far: from /proc while it runs,
// from its rusage once it has exited.
func (p *Proc) Usage() (Usage, error) {
	if !p.Running() {
		st := p.Cmd.ProcessState
		if st == nil {
			return Usage{}, fmt.Errorf("usage of %s: %w", p.Name, os.ErrProcessDone)
		}
		return Usage{CPU: st.UserTime() + st.SystemTime(), Syscalls: -1}, nil
	}
	pid := p.Cmd.Process.Pid
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Usage{}, fmt.Errorf("usage of %s: %w", p.Name, err)
	}
	// The command name (field 2) may hold spaces; the fields after its
	// closing parenthesis start at field 3, so utime and stime (fields 14
	// and 15) are the 12th and 13th after it.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return Usage{}, fmt.Errorf("usage of %s: /proc stat has %d fields after the name", p.Name, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return Usage{}, fmt.Errorf("usage of %s: utime %q stime %q", p.Name, f[11], f[12])
	}
	u := Usage{CPU: time.Duration(utime+stime) * time.Second / clockTicks}
	io, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return Usage{}, fmt.Errorf("usage of %s: %w", p.Name, err)
	}
	for line := range strings.Lines(string(io)) {
		for _, key := range []string{"syscr:", "syscw:"} {
			if v, ok := strings.CutPrefix(line, key); ok {
				n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				if err != nil {
					return Usage{}, fmt.Errorf("usage of %s: %s %q", p.Name, key, v)
				}
				u.Syscalls += n
			}
		}
	}
	return u, nil
}

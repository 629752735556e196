package proc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPeakRSSIsReadFromProc(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("VmHWM is in Linux's /proc")
	}
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	p := &Proc{Cmd: &exec.Cmd{Process: self}}
	p.SampleRSS()
	if p.PeakRSS() <= 0 {
		t.Errorf("peak RSS of this test: got %d KiB, want more than 0", p.PeakRSS())
	}
}

func TestUsageCountsCPUAndSystemCallsWhileRunningAndCPUAfterTheExit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("utime, stime and syscr are in Linux's /proc")
	}
	// The shell spins, reads a file a byte at a time (its read builtin
	// does), then waits to be read and killed.
	script := `i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; while read -r l; do :; done </etc/passwd; echo spent; sleep 30`
	p, err := start("/bin/sh", "spin", filepath.Join(t.TempDir(), "spin.log"), 0, nil, "-c", script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.KillGroup)
	err = Poll(context.Background(), 20*time.Second, 20*time.Millisecond, p, func() bool {
		raw, _ := os.ReadFile(p.LogPath)
		return strings.Contains(string(raw), "spent")
	})
	if err != nil {
		t.Fatal(err)
	}
	running, err := p.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if running.CPU <= 0 {
		t.Errorf("CPU of a spinning shell: got %v, want more than 0", running.CPU)
	}
	if running.Syscalls < 100 {
		t.Errorf("system calls of a shell that read a file by the byte: got %d, want at least 100", running.Syscalls)
	}
	p.KillGroup()
	<-p.Done()
	exited, err := p.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if exited.CPU < running.CPU || exited.Syscalls != -1 {
		t.Errorf("usage after the exit: got %+v, want CPU at least %v and syscalls -1", exited, running.CPU)
	}
}

func TestEnvironDropsTheNamedVariablesOnlyAndAddsItsOwn(t *testing.T) {
	t.Setenv("PROC_TEST_DROP", "1")
	t.Setenv("PROC_TEST_DROP_NOT", "2")
	env := Environ([]string{"PROC_TEST_DROP"}, "PROC_TEST_ADD=3")
	if slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "PROC_TEST_DROP=") }) {
		t.Errorf("PROC_TEST_DROP: got it in the environment, want it dropped")
	}
	for _, want := range []string{"PROC_TEST_DROP_NOT=2", "PROC_TEST_ADD=3"} {
		if !slices.Contains(env, want) {
			t.Errorf("got no %s in the environment, want it", want)
		}
	}
}

func TestAReplacedNodeIsAFreshJoinerOnTheSlotsHTTPPort(t *testing.T) {
	c, err := New("narad", t.TempDir(), 4, 4)
	if err != nil {
		t.Fatal(err)
	}
	old, peers := *c.Nodes[3], c.Peers()
	n, err := c.Replace(1)
	if err != nil {
		t.Fatal(err)
	}
	// A voter's replica id is its position in --peers: n3 and n4 restart
	// as replicas 3 and 4 after n2 left.
	if got := c.Peers(); got != peers {
		t.Errorf("--peers after n2 was replaced: got %s, want %s as before", got, peers)
	}
	if n.ID != "n5" {
		t.Errorf("slot 1: got %s, want n5", n.ID)
	}
	n, err = c.Replace(3)
	if err != nil {
		t.Fatal(err)
	}
	if n.ID != "n6" || n.Replica != 6 || !n.Joiner || n.HTTP != old.HTTP || n.Raft == old.Raft || c.Nodes[3] != n {
		t.Errorf("got %+v, want n6, replica 6, a joiner on %s with a Raft port other than %s, in slot 3", *n, old.HTTP, old.Raft)
	}
	if n, err = c.Replace(3); err != nil || n.ID != "n7" {
		t.Errorf("slot 3 again: got %v, %v, want n7", n, err)
	}
	if n, err = c.Replace(0); err != nil || n.ID != "n8" {
		t.Errorf("slot 0: got %v, %v, want n8", n, err)
	}
}

// A node that exited by itself before its stop (a decommissioned node
// exits right after it leaves the members) counts as stopped: the nemesis
// once failed a 30-minute run on "sigterm n14: os: process already
// finished" when the exit came between its Running check and the signal.
func TestStoppingANodeThatAlreadyExitedIsNoError(t *testing.T) {
	p, err := start("/bin/true", "n1", filepath.Join(t.TempDir(), "n1.log"), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	c := &Cluster{}
	if _, err := c.Stop(context.Background(), &Node{ID: "n1", Proc: p}, time.Second); err != nil {
		t.Fatalf("stop of a node that exited: got %v, want nil", err)
	}
}

package proc

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
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

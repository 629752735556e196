package main

import (
	"io"
	"log/slog"
	"runtime"
	"testing"
)

func TestSetProcs(t *testing.T) {
	was := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(was) })
	// The runtime's default, whatever a node started earlier in this
	// process set.
	runtime.SetDefaultGOMAXPROCS()
	base := runtime.GOMAXPROCS(0)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	t.Setenv("GOMAXPROCS", "")
	// Twice, as a process that starts two nodes does: 4 per core each time.
	for range 2 {
		if err := setProcs(0, log); err != nil {
			t.Fatal(err)
		}
		if got, want := runtime.GOMAXPROCS(0), procsPerCore*base; got != want {
			t.Fatalf("--gomaxprocs 0: got %d Ps, want %d (%d per core of %d)", got, want, procsPerCore, base)
		}
	}
	runtime.GOMAXPROCS(base)
	if err := setProcs(3, log); err != nil || runtime.GOMAXPROCS(0) != 3 {
		t.Fatalf("--gomaxprocs 3: got %d Ps, err %v, want 3", runtime.GOMAXPROCS(0), err)
	}
	runtime.GOMAXPROCS(base)
	t.Setenv("GOMAXPROCS", "1")
	if err := setProcs(0, log); err != nil || runtime.GOMAXPROCS(0) != base {
		t.Fatalf("--gomaxprocs 0 with GOMAXPROCS set: got %d Ps, err %v, want the runtime's %d left alone", runtime.GOMAXPROCS(0), err, base)
	}
	for _, n := range []int{-1, maxProcs + 1} {
		if err := setProcs(n, log); err == nil {
			t.Fatalf("--gomaxprocs %d: got no error, want one", n)
		}
	}
}

package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
)

// procsPerCore is how many Go Ps a node runs per core the runtime sees by
// default. A node spends much of its time in blocking syscalls (fsyncs of
// the ingress WAL, the partition logs, consumer positions): a P held by a
// goroutine in a syscall serves nobody until the runtime's monitor hands it
// off, which it may do only milliseconds later, so with one P per core
// every HTTP request waited behind the fsyncs of others. On the 2-core
// machine of issue 15, 4 per core made consume+ack keep up with produce
// (cack/produce 0.4-0.5 at 1 per core, 0.85-0.9 at 4 per core) and cut
// end-to-end p50 from seconds to hundreds of milliseconds; 8 and 16 per
// core were no better.
const procsPerCore = 4

// maxProcs bounds --gomaxprocs.
const maxProcs = 1024

// setProcs sets GOMAXPROCS: n when it is above 0; otherwise procsPerCore
// times the runtime's default (which follows the CPU quota of a
// container), unless the GOMAXPROCS environment variable already chose.
func setProcs(n int, log *slog.Logger) error {
	if n < 0 || n > maxProcs {
		return fmt.Errorf("--gomaxprocs %d: want 0 (%d per core) to %d", n, procsPerCore, maxProcs)
	}
	if n == 0 {
		if os.Getenv("GOMAXPROCS") != "" {
			return nil
		}
		// From the default, not from the current setting: a process that
		// starts nodes more than once (the tests, in process) would
		// otherwise multiply it each time, up to thread exhaustion.
		runtime.SetDefaultGOMAXPROCS()
		n = procsPerCore * runtime.GOMAXPROCS(0)
	}
	runtime.GOMAXPROCS(n)
	log.Debug("go procs", "gomaxprocs", n, "cores", runtime.NumCPU())
	return nil
}

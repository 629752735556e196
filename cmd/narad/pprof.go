package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	rpprof "runtime/pprof"
	"time"
)

// Profiling the process (issue 15: profile before changing the data path):
// --pprof ADDR serves net/http/pprof on a listener of its own, never on
// the client API's, and turns on the block and mutex profiles. It is off by
// default: a profile endpoint shows the process's internals to anyone who
// reaches it, so it binds where the operator says, loopback in the
// examples.

// pprofBlockRateNanos samples one blocking event per this many nanoseconds
// blocked, and pprofMutexFraction one contended mutex event in this many:
// enough to see where a node waits, at a cost that stays small under load.
const (
	pprofBlockRateNanos = 10_000
	pprofMutexFraction  = 100
)

// servePprof serves the profiles on addr until ctx ends and returns the
// address it listens on; "" serves nothing. The listener is bound before
// it returns, so a bad address is an error of the command, not a line in
// the log.
func servePprof(ctx context.Context, addr string, log *slog.Logger) (string, error) {
	if addr == "" {
		return "", nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("--pprof %s: %w", addr, err)
	}
	runtime.SetBlockProfileRate(pprofBlockRateNanos)
	runtime.SetMutexProfileFraction(pprofMutexFraction)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// A CPU profile or a trace runs for its ?seconds= (30 s by default).
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof server", "err", err)
		}
	}()
	log.Warn("profiling endpoint on: anyone who reaches it reads the process's internals", "addr", ln.Addr().String(),
		"cpu", "go tool pprof http://"+ln.Addr().String()+"/debug/pprof/profile?seconds=30")
	return ln.Addr().String(), nil
}

// profileCPU starts a CPU profile into path and returns what ends it; with
// path "" it does nothing. A profile that cannot start is logged, not
// fatal: it must not keep a node from stopping.
func profileCPU(path string, log *slog.Logger) (end func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		log.Error("stop profile", "err", err)
		return func() {}
	}
	if err := rpprof.StartCPUProfile(f); err != nil {
		log.Error("stop profile", "path", path, "err", err)
		f.Close()
		return func() {}
	}
	return func() {
		rpprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			log.Error("stop profile", "path", path, "err", err)
		}
	}
}

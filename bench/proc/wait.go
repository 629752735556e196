package proc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Port range the harness picks from: below 32768, so that no outgoing
// connection's ephemeral port can take one (the house rule for test ports).
const (
	portLow  = 20000
	portHigh = 32000
)

// ErrPortsExhausted is a run that found no free port to start a process on.
var ErrPortsExhausted = errors.New("no free port")

// FreePort returns a port below 32768 that was free a moment ago and is not
// in taken (which it joins): it is listened on and closed again, and the
// process that gets it listens on it a few hundred milliseconds later.
// Another program may take it in between; the process then fails to start
// and the run stops with its log's tail, which is a rerun, not a wrong
// figure.
func FreePort(taken map[int]bool) (int, error) {
	for range 200 {
		p := portLow + rand.IntN(portHigh-portLow)
		if taken[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l.Close()
		taken[p] = true
		return p, nil
	}
	return 0, ErrPortsExhausted
}

// ErrTimeout is a wait that passed its bound; bench/bulk's table prints it
// as "timeout after X".
var ErrTimeout = errors.New("timeout")

// ErrExited is a process that exited while the harness waited for it.
var ErrExited = errors.New("process exited")

// Poll calls ok every interval until it is true, timeout passes (ErrTimeout),
// ctx ends, or p (when not nil) exits (ErrExited).
func Poll(ctx context.Context, timeout, interval time.Duration, p *Proc, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if ok() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", timeout, ErrTimeout)
		}
		var exited <-chan struct{}
		if p != nil {
			exited = p.done
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return fmt.Errorf("%s: %w (%v)", p.Name, ErrExited, p.exitErr)
		case <-time.After(interval):
		}
	}
}

// TailLines bounds what Tail returns of a process's log.
const TailLines = 30

// Tail returns the last TailLines lines of a log file under a header naming
// it, for an error message; "" when the file cannot be read.
func Tail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		lines = append(lines, s.Text())
		if len(lines) > TailLines {
			lines = lines[1:]
		}
	}
	return "--- tail of " + path + "\n" + strings.Join(lines, "\n")
}

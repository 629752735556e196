package testnet

import (
	"bytes"
	"log/slog"
	"os"
	"sync"
	"testing"
)

// LogLinesMax bounds the lines Logger keeps per test: enough for the
// warnings of a few minutes of a cluster under faults, small enough that a
// failure's dump stays readable in a CI log.
const LogLinesMax = 300

// tails holds each running test's kept lines, so that every node of one
// test writes to one tail in the order the lines were logged.
var tails sync.Map // testing.TB -> *tail

// Logger is the logger for the nodes a test starts. With -v it writes
// every line at Info and above to stderr as it comes. Otherwise it keeps
// the last LogLinesMax lines at Warn and above, and prints them when the
// test failed: a failure seen only on a loaded CI machine then says what
// the nodes saw (a decommission blocked, a removal refused) instead of
// only that a wait timed out.
func Logger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	v, loaded := tails.LoadOrStore(t, &tail{})
	tl := v.(*tail)
	if !loaded {
		t.Cleanup(func() {
			tails.Delete(t)
			if t.Failed() {
				t.Logf("the nodes' last %d warnings and errors:\n%s", LogLinesMax, tl.String())
			}
		})
	}
	return slog.New(slog.NewTextHandler(tl, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// tail is a bounded ring of log lines; a slog handler writes one whole
// line per Write.
type tail struct {
	mu    sync.Mutex
	lines [][]byte
	next  int
}

func (tl *tail) Write(p []byte) (int, error) {
	line := bytes.Clone(p)
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if len(tl.lines) < LogLinesMax {
		tl.lines = append(tl.lines, line)
	} else {
		tl.lines[tl.next] = line
		tl.next = (tl.next + 1) % LogLinesMax
	}
	return len(p), nil
}

// String is the kept lines, oldest first.
func (tl *tail) String() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var b bytes.Buffer
	for i := range tl.lines {
		b.Write(tl.lines[(tl.next+i)%len(tl.lines)])
	}
	return b.String()
}

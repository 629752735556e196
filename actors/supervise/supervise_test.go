package supervise

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// A panic under LogPanic is logged with its stack and reaches the caller
// unchanged: nothing is swallowed.
func TestLogPanicLogsAndPanicsAgain(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	got := func() (r any) {
		defer func() { r = recover() }()
		func() {
			defer LogPanic(log, "partition t/1")
			panic("boom")
		}()
		return nil
	}()
	if got != "boom" {
		t.Fatalf("recovered above LogPanic: got %v, want the panic itself", got)
	}
	for _, want := range []string{"actor panicked", "partition t/1", "boom", "stack="} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log: got %q, want it to hold %q", buf.String(), want)
		}
	}
}

// Without a panic it logs nothing.
func TestLogPanicIsQuietWithoutAPanic(t *testing.T) {
	var buf bytes.Buffer
	func() { defer LogPanic(slog.New(slog.NewTextHandler(&buf, nil)), "x") }()
	if buf.Len() != 0 {
		t.Fatalf("log: got %q, want nothing", buf.String())
	}
}

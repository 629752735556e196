package metastore

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	dblogger "github.com/lni/dragonboat/v4/logger"
)

func TestSlogAdapter(t *testing.T) {
	var buf bytes.Buffer
	previous := dragonboatSlog.Swap(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer dragonboatSlog.Store(previous)
	SetDragonboatLevel(slog.LevelDebug)
	defer SetDragonboatLevel(DefaultDragonboatLevel)

	raft := &slogAdapter{pkg: "raft"}
	raft.SetLevel(dblogger.DEBUG)
	raft.Warningf("became %s", "candidate")
	transport := &slogAdapter{pkg: "transport"}
	transport.SetLevel(dblogger.WARNING)
	transport.Infof("filtered by SetLevel")
	transport.Warningf("peer %d unreachable", 2)
	transport.Errorf("send failed")

	out := buf.String()
	for _, want := range []string{
		`level=INFO msg="became candidate" pkg=raft`,
		`level=WARN msg="peer 2 unreachable" pkg=transport`,
		`level=ERROR msg="send failed" pkg=transport`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log output: got\n%s\nwant a line with %s", out, want)
		}
	}
	if strings.Contains(out, "filtered by SetLevel") {
		t.Errorf("log output: got the Info line below SetLevel(WARNING), want it dropped")
	}

	defer func() {
		if r := recover(); r != "boom 7" {
			t.Errorf("Panicf: got panic %v, want \"boom 7\"", r)
		}
		if !strings.Contains(buf.String(), `msg="boom 7"`) {
			t.Errorf("Panicf: got no error line, want one before the panic")
		}
	}()
	transport.Panicf("boom %d", 7)
}

// By default only Dragonboat's warnings and errors are written, even to a
// logger at debug; SetDragonboatLevel lets its info lines through.
func TestDragonboatLinesBelowWarnAreDroppedByDefault(t *testing.T) {
	var buf bytes.Buffer
	previous := dragonboatSlog.Swap(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer dragonboatSlog.Store(previous)

	l := &slogAdapter{pkg: "dragonboat"}
	l.SetLevel(dblogger.DEBUG)
	l.Infof("shard %d started", 1)
	l.Warningf("disk %s slow", "sda")
	if out := buf.String(); strings.Contains(out, "shard 1 started") || !strings.Contains(out, `level=WARN msg="disk sda slow"`) {
		t.Fatalf("at the default level: got\n%s\nwant the warning only", out)
	}

	SetDragonboatLevel(slog.LevelInfo)
	defer SetDragonboatLevel(DefaultDragonboatLevel)
	l.Infof("shard %d started", 2)
	if out := buf.String(); !strings.Contains(out, `level=INFO msg="shard 2 started"`) {
		t.Fatalf("at info: got\n%s\nwant the info line", out)
	}
}

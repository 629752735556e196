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

package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --pprof serves the profiles on a listener of its own, and nothing when
// empty; a bad address is the command's error.
func TestPprofIsOffByDefaultAndServesItsOwnListener(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if addr, err := servePprof(ctx, "", log); addr != "" || err != nil {
		t.Fatalf("--pprof empty: got %q, %v; want nothing served", addr, err)
	}
	if _, err := servePprof(ctx, "not an address", log); err == nil {
		t.Fatal("--pprof with a bad address: got no error, want one")
	}
	addr, err := servePprof(ctx, "127.0.0.1:0", log)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "mutex") {
		t.Fatalf("the pprof index: got %d (mutex profile listed: %v), want 200 listing it", resp.StatusCode, strings.Contains(string(b), "mutex"))
	}
}

// --stop-profile writes a CPU profile that ends with the process; a path
// that cannot be created is logged and the node still stops.
func TestStopProfileWritesAProfileAndNeverBlocksTheStop(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	profileCPU("", log)()
	profileCPU(filepath.Join(t.TempDir(), "no", "such", "dir", "p.pprof"), log)()
	path := filepath.Join(t.TempDir(), "stop.pprof")
	end := profileCPU(path, log)
	end()
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		t.Fatalf("profile written: got %d bytes (%v), want a profile", len(b), err)
	}
	if _, err := gzip.NewReader(bytes.NewReader(b)); err != nil {
		t.Fatalf("profile: got %v, want the gzipped protobuf of a profile", err)
	}
}

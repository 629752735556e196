package storage

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// rules V9, S6: a path is free under the guard only while the topic
// directory's marker names the incarnation (or is absent, for the sweep's
// reclaim alone) and no log of the partition is open; each refusal wraps
// ErrGuardRefused, and a marker that does not parse is no refusal but the
// error it is.
func TestRuleV9PathFreeRefusesAnotherIncarnationOrAnOpenLog(t *testing.T) {
	data := t.TempDir()
	if _, err := PrepareTopicDir(data, "t", 7); err != nil {
		t.Fatal(err)
	}
	g := NewGuards()
	for _, tc := range []struct {
		name    string
		inc     uint64
		setup   func()
		refused bool
	}{
		{"the marker names the incarnation", 7, func() {}, false},
		{"the marker names another", 8, func() {}, true},
		{"a log of the partition is open", 7, func() { g.MarkOpen("t", 7, 0) }, true},
		{"a log of another incarnation at the path is open", 7, func() { g.MarkOpen("t", 6, 0) }, true},
		{"another partition's log is open", 7, func() { g.MarkOpen("t", 7, 1) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.setup()
			defer func() {
				for inc := uint64(6); inc <= 7; inc++ {
					for p := range 2 {
						g.MarkClosed("t", inc, p)
					}
				}
			}()
			err := g.PathFree(data, "t", tc.inc, 0, false)
			if refused := errors.Is(err, ErrGuardRefused); refused != tc.refused || (!tc.refused && err != nil) {
				t.Fatalf("PathFree: got %v, want refused %v", err, tc.refused)
			}
		})
	}

	marker := filepath.Join(TopicPath(data, "t"), incarnationFile)
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	if err := g.PathFree(data, "t", 7, 0, false); !errors.Is(err, ErrGuardRefused) {
		t.Fatalf("no marker, absent not allowed: got %v, want %v", err, ErrGuardRefused)
	}
	if err := g.PathFree(data, "t", 7, 0, true); err != nil {
		t.Fatalf("no marker, absent allowed: got %v, want nil", err)
	}
	if err := os.WriteFile(marker, []byte("seven\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := g.PathFree(data, "t", 7, 0, true); !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrGuardRefused) {
		t.Fatalf("a marker that does not parse: got %v, want %v and no refusal", err, ErrCorrupt)
	}
	var none *Guards
	if err := none.PathFree(data, "u", 1, 0, true); err != nil {
		t.Fatalf("nil Guards, no topic directory, absent allowed: got %v, want nil", err)
	}
}

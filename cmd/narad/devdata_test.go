package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestShapeConflict(t *testing.T) {
	one := devShape{Nodes: 1, HTTPBase: "127.0.0.1:7942"}
	for _, tc := range []struct {
		name      string
		was, want devShape
		refused   bool
	}{
		{"same shape", one, one, false},
		{"no record, no node dirs", devShape{}, one, false},
		{"no record, as many node dirs", devShape{Nodes: 1}, one, false},
		{"more nodes", one, devShape{Nodes: 3, HTTPBase: one.HTTPBase}, true},
		{"fewer nodes", devShape{Nodes: 3, HTTPBase: one.HTTPBase}, one, true},
		{"another http base", one, devShape{Nodes: 1, HTTPBase: "127.0.0.1:8000"}, true},
		{"no record, fewer node dirs", devShape{Nodes: 1}, devShape{Nodes: 3, HTTPBase: one.HTTPBase}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := shapeConflict("data/dev", tc.was, tc.want)
			if got := err != nil; got != tc.refused {
				t.Fatalf("refused: got %v (%v), want %v", got, err, tc.refused)
			}
			if err != nil && !errors.Is(err, errDataShape) {
				t.Fatalf("got %v, want %v", err, errDataShape)
			}
		})
	}
}

// narad dev on a data directory made for one node refuses three, before
// any node starts, and says what to do: --fresh or another --data.
func TestDevRefusesADataDirectoryOfAnotherShapeSayingWhatToDo(t *testing.T) {
	dir := t.TempDir()
	one := devShape{Nodes: 1, HTTPBase: "127.0.0.1:7942"}
	if err := claimDevData(dir, one); err != nil {
		t.Fatalf("first start: got %v, want nil", err)
	}
	if _, err := os.Stat(filepath.Join(dir, devShapeFile)); err != nil {
		t.Fatalf("first start: got %v, want the shape recorded", err)
	}
	if err := claimDevData(dir, one); err != nil {
		t.Fatalf("restart with the same shape: got %v, want nil", err)
	}
	err := runDev(context.Background(), []string{"--data", dir, "--nodes", "3", "--http-base", "127.0.0.1:7942", "--nats-port", "0"}, io.Discard, io.Discard)
	if !errors.Is(err, errDataShape) {
		t.Fatalf("--nodes 3 on a one-node directory: got %v, want %v", err, errDataShape)
	}
	for _, want := range []string{"--fresh", "--data", "1 node(s)", "asked for 3"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("refusal: got %q, want it to say %q", err, want)
		}
	}
}

// A directory an older narad made has no record: its node directories
// tell how many nodes it was made for.
func TestDevDataWithoutARecordIsJudgedByItsNodeDirectories(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "n1"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := claimDevData(dir, devShape{Nodes: 3, HTTPBase: "127.0.0.1:7942"})
	if !errors.Is(err, errDataShape) {
		t.Fatalf("--nodes 3 on a directory with n1 only: got %v, want %v", err, errDataShape)
	}
	if err := claimDevData(dir, devShape{Nodes: 1, HTTPBase: "127.0.0.1:7942"}); err != nil {
		t.Fatalf("--nodes 1 on it: got %v, want nil", err)
	}
}

package main

// narad dev's data directory remembers the cluster shape it was made for:
// each node's metastore directory is bound to its Raft address and to the
// initial members, so a restart with another --nodes or --http-base on the
// same directory cannot start, and Dragonboat says so in its own terms.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// errDataShape is a dev data directory made for another cluster shape.
var errDataShape = errors.New("data directory made for another cluster shape")

// devShapeFile is the file in a dev data directory that records its shape.
const devShapeFile = "dev-shape.json"

// devShape is what a dev data directory is bound to: the node count and
// the HTTP base the Raft addresses derive from.
type devShape struct {
	Nodes    int    `json:"nodes"`
	HTTPBase string `json:"http_base"`
}

// shapeConflict says why a directory recorded as was cannot be started as
// want, or nil. An unknown part of was (a directory of an older narad,
// with no record) matches anything.
func shapeConflict(dir string, was, want devShape) error {
	if (was.Nodes == 0 || was.Nodes == want.Nodes) && (was.HTTPBase == "" || was.HTTPBase == want.HTTPBase) {
		return nil
	}
	base := was.HTTPBase
	if base == "" {
		base = want.HTTPBase
	}
	return fmt.Errorf("%s: %w: made for %d node(s) from %s, asked for %d from %s; "+
		"pass --fresh to empty it (its data is lost), or --data with another directory",
		dir, errDataShape, was.Nodes, base, want.Nodes, want.HTTPBase)
}

// claimDevData refuses dir when it was made for another shape than want,
// and records want in it otherwise. A directory without a record (made by
// an older narad) tells its node count by the node directories in it.
func claimDevData(dir string, want devShape) error {
	path := filepath.Join(dir, devShapeFile)
	var was devShape
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(data, &was); err != nil {
			return fmt.Errorf("%s: %w (remove it, or pass --fresh)", path, err)
		}
	case errors.Is(err, os.ErrNotExist):
		was.Nodes = nodeDirsIn(dir)
	default:
		return fmt.Errorf("dev data: %w", err)
	}
	if err := shapeConflict(dir, was, want); err != nil {
		return err
	}
	if was == want {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("dev data: %w", err)
	}
	out, _ := json.Marshal(want)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(out, '\n'), 0o644); err != nil {
		return fmt.Errorf("dev data: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("dev data: %w", err)
	}
	return nil
}

// nodeDirsIn counts the node directories n1, n2, ... in dir, in order, up
// to maxDevNodes: dev never makes more.
func nodeDirsIn(dir string) int {
	n := 0
	for n < maxDevNodes {
		if fi, err := os.Stat(filepath.Join(dir, "n"+strconv.Itoa(n+1))); err != nil || !fi.IsDir() {
			return n
		}
		n++
	}
	return n
}

package clock

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// wallClockReads are the functions of package time that read or wait on
// the machine's clock: a call, or a use as a value (now: time.Now), is a
// direct read past the injected Clock. A comment naming one is not, so the
// scan reads the Go syntax, not the text.
//
// Not reads of ours, and left alone: context.WithTimeout (a duration the
// runtime measures; a fake clock cannot make real I/O take longer) and
// context.WithDeadline (its deadline was read somewhere, and that read is
// what the scan catches); time.Time's methods and time.Duration (they do
// arithmetic on times already read).
var wallClockReads = map[string]bool{
	"Now": true, "Since": true, "Until": true,
	"After": true, "AfterFunc": true, "NewTimer": true, "NewTicker": true, "Tick": true,
	"Sleep": true,
}

// wallClockReadsIn counts the direct reads of the machine's clock in one
// Go file.
func wallClockReadsIn(fset *token.FileSet, name string, src []byte) (int, error) {
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return 0, err
	}
	local := "" // the name package time goes by in this file
	for _, imp := range f.Imports {
		if imp.Path.Value != `"time"` {
			continue
		}
		local = "time"
		if imp.Name != nil {
			local = imp.Name.Name
		}
	}
	if local == "" || local == "_" {
		return 0, nil
	}
	n := 0
	ast.Inspect(f, func(node ast.Node) bool {
		sel, ok := node.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == local && wallClockReads[sel.Sel.Name] {
			n++
		}
		return true
	})
	return n, nil
}

// wallClockLeft is every production file of the node that still reads the
// wall clock directly, with how many reads it makes: issue 47 moves them
// onto an injected Clock (the node clock or the steady one; clock.go says
// which is which). The list only shrinks. A new read anywhere else fails
// TestNoNewWallClockReadsOutsideTheClock, and so does a file that makes
// fewer reads than listed, so that the number is lowered with the change
// that removed them.
var wallClockLeft = map[string]int{
	"actors/mailboxes.go":       1,
	"actors/mover/batch.go":     1,
	"actors/mover/flipbatch.go": 1,
	"actors/mover/runner.go":    2,
	"actors/mover/worker.go":    16,
	"actors/node.go":            7,
	"actors/supervision.go":     1,
}

// The node's production code reads the wall clock only where it did when
// the list was made, and no more often: every new timer goes through the
// injected Clock.
func TestNoNewWallClockReadsOutsideTheClock(t *testing.T) {
	root := filepath.Join("..", "..")
	got := map[string]int{}
	fset := token.NewFileSet()
	for _, top := range []string{"actors", "cluster", "storage", "messages"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				switch rel {
				case "actors/clock", "cluster/testnet", "cluster/transport/testpki", "cluster/metastore/metastoretest":
					return filepath.SkipDir // the clock itself, and code for tests only
				}
				if n := d.Name(); strings.HasPrefix(n, ".") || n == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			n, err := wallClockReadsIn(fset, rel, src)
			if err != nil {
				return err
			}
			if n > 0 {
				got[rel] = n
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range wallClockDrift(got, wallClockLeft) {
		t.Error(b)
	}
}

// wallClockDrift says how the calls found differ from the list.
func wallClockDrift(got, listed map[string]int) []string {
	var bad []string
	for f, n := range got {
		switch want, ok := listed[f]; {
		case !ok:
			bad = append(bad, fmt.Sprintf("%s reads the wall clock %d times: take the node's Clock (actors/clock)", f, n))
		case n > want:
			bad = append(bad, fmt.Sprintf("%s reads the wall clock %d times, %d listed: a new read takes the node's Clock", f, n, want))
		case n < want:
			bad = append(bad, fmt.Sprintf("%s reads the wall clock %d times, %d listed: lower its number in wallClockLeft", f, n, want))
		}
	}
	for f, want := range listed {
		if _, ok := got[f]; !ok {
			bad = append(bad, fmt.Sprintf("%s no longer reads the wall clock (%d listed): take it off wallClockLeft", f, want))
		}
	}
	sort.Strings(bad)
	return bad
}

// The check fails on each kind of drift.
func TestWallClockDriftFindsEachKind(t *testing.T) {
	listed := map[string]int{"a.go": 2}
	for _, tc := range []struct {
		got  map[string]int
		want string
	}{
		{map[string]int{"a.go": 2}, ""},
		{map[string]int{"a.go": 2, "b.go": 1}, "b.go reads the wall clock 1 times: take"},
		{map[string]int{"a.go": 3}, "3 times, 2 listed: a new read"},
		{map[string]int{"a.go": 1}, "lower its number"},
		{map[string]int{}, "take it off"},
	} {
		bad := wallClockDrift(tc.got, listed)
		switch {
		case tc.want == "" && len(bad) > 0:
			t.Errorf("%v: got %q, want nothing", tc.got, bad)
		case tc.want != "" && (len(bad) != 1 || !strings.Contains(bad[0], tc.want)):
			t.Errorf("%v: got %q, want one line with %q", tc.got, bad, tc.want)
		}
	}
}

// The scan counts each kind of read, under any import name, and nothing
// in comments or in arithmetic on times already read.
func TestWallClockReadsInCountsEachKind(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      int
	}{
		{"call", `package p; import "time"; var t = time.Now()`, 1},
		{"value", `package p; import "time"; var now = time.Now`, 1},
		{"every kind", `package p; import "time"
			func f() { time.Since(time.Time{}); time.Until(time.Time{}); <-time.After(1); time.AfterFunc(1, nil)
				time.NewTimer(1); time.NewTicker(1); time.Tick(1); time.Sleep(1) }`, 8},
		{"renamed", `package p; import tm "time"; var t = tm.Now()`, 1},
		{"comment", `package p; import "time"; // time.Now() is not called here
			var d time.Duration`, 0},
		{"arithmetic", `package p; import "time"; func f(a, b time.Time) time.Duration { return a.Sub(b) + time.Second }`, 0},
		{"context", `package p; import ("context"; "time"); func f() { context.WithTimeout(context.Background(), time.Second) }`, 0},
		{"not package time", `package p; type clk struct{}; func (clk) Now() int { return 0 }; var time clk; var n = time.Now()`, 0},
	} {
		got, err := wallClockReadsIn(token.NewFileSet(), tc.name+".go", []byte(tc.src))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != tc.want {
			t.Errorf("%s: %d reads, want %d", tc.name, got, tc.want)
		}
	}
}

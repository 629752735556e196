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

// The node's production code reads the machine's clock only through this
// package: every timer, ticker, deadline and timestamp goes through an
// injected Clock (the node clock or the steady one; clock.go says which is
// which). Code for tests only is not the node's.
func TestNoWallClockReadsOutsideTheClock(t *testing.T) {
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
	var bad []string
	for f, n := range got {
		bad = append(bad, fmt.Sprintf("%s reads the wall clock %d times: take an injected Clock (actors/clock)", f, n))
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
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

package actors

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	pathpkg "path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The tables of ARCHITECTURE.md that list files, messages and goroutines
// are held against the code here, as deploy/ holds its dashboards against
// the metrics: a table written by hand rots unless a test reads it. Each
// failure names what to add to the document or to take out of it.

const architecturePath = "../ARCHITECTURE.md"

// architectureSection is the text of the section whose heading starts
// with prefix ("## 6."), up to the next heading of its level.
func architectureSection(t *testing.T, prefix string) string {
	t.Helper()
	b, err := os.ReadFile(architecturePath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "\n"+prefix)
	if i < 0 {
		t.Fatalf("ARCHITECTURE.md has no section %q", prefix)
	}
	rest := doc[i+1:]
	if j := strings.Index(rest[1:], "\n## "); j >= 0 {
		rest = rest[:j+1]
	}
	return rest
}

var backticked = regexp.MustCompile("`([^`]+)`")

var word = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// names is every backticked token of text, also its last path element
// and each word in it, so that `*messages.Commit` names Commit,
// `p.kick` kick and `planner/targets.go` targets.go.
func names(text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range backticked.FindAllStringSubmatch(text, -1) {
		out[m[1]] = true
		out[filepath.Base(m[1])] = true
		for _, w := range word.FindAllString(m[1], -1) {
			out[w] = true
		}
	}
	return out
}

// wholeTypes is every backticked token of text that is a bare type name
// (`synced`, `*Commit`): what a row says an actor receives.
func wholeTypes(text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range backticked.FindAllStringSubmatch(text, -1) {
		if w := strings.TrimPrefix(m[1], "*"); word.FindString(w) == w {
			out[w] = true
		}
	}
	return out
}

// actorDirs are the packages whose actors and goroutines sections 6 and 7
// list: the root package and the actors split out of it, each a package of
// its own (actors/sweeper, actors/fanout, actors/freeze, actors/controller,
// actors/mover, actors/partition, actors/dispatch), and actors/route, the
// router whose request groups start goroutines of their own.
var actorDirs = []string{".", "sweeper", "fanout", "freeze", "controller", "mover", "partition", "dispatch", "route", "consume", "produce", "startup", "topics", "clusterview", "decommission", "departure", "diskhealth", "debugfaults"}

// actorKey names a receiver type as the tests' maps do: bare in the root
// package, qualified by its package elsewhere (sweeper.Actor).
func actorKey(dir, receiver string) string {
	if dir == "." || receiver == "" {
		return receiver
	}
	return filepath.Base(dir) + "." + receiver
}

// productionFiles parses the non-test Go files of dir.
func productionFiles(t *testing.T, dir string) []*ast.File {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []*ast.File
	fset := token.NewFileSet()
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

// receiverName is a method's receiver type, without pointer or type
// parameters; "" for a function.
func receiverName(fd *ast.FuncDecl) string {
	if fd.Recv == nil {
		return ""
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// typeName is a type switch case's type as the table writes it: its
// name, without package or pointer.
func typeName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return typeName(x.X)
	case *ast.SelectorExpr:
		return x.Sel.Name
	case *ast.Ident:
		return x.Name
	}
	return ""
}

// Section 6's table: for each actor, every message its Receive takes is
// named in its row, and a row names no message type that its Receive does
// not take.
func TestArchitectureMessageTableMatchesEveryReceive(t *testing.T) {
	rows := map[string]string{ // receiver type (actorKey) → the row's actor
		"partition.Supervisor": "partitions", "sweeper.Actor": "sweeper", "partition.Actor": "p:<inc>:<n>",
		"fanout.Actor": "fanout<id>", "dispatch.Actor": "dispatcher", "mover.Runner": "mover",
		"mover.worker": "move-p:<inc>:<n>", "controller.Actor": "controller", "freeze.PacerActor": "pacer", "freeze.Actor": "freeze<id>",
	}
	lifecycle := map[string]bool{"Started": true, "Stopping": true, "Stopped": true, "Restarting": true, "ReceiveTimeout": true}
	table := map[string]string{}
	for _, line := range strings.Split(architectureSection(t, "## 6."), "\n") {
		if m := regexp.MustCompile("^\\| `([^`]+)` \\| (.*) \\|$").FindStringSubmatch(line); m != nil {
			table[m[1]] = m[2]
		}
	}
	declared := map[string]bool{}
	handled := map[string][]string{}
	for _, dir := range actorDirs {
		for _, f := range productionFiles(t, dir) {
			for _, d := range f.Decls {
				if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
					for _, s := range g.Specs {
						declared[s.(*ast.TypeSpec).Name.Name] = true
					}
				}
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Name.Name != "Receive" || fd.Body == nil {
					continue
				}
				key := actorKey(dir, receiverName(fd))
				row, known := rows[key]
				if !known {
					t.Errorf("%s.Receive: an actor the test does not map to a row of section 6; add it to rows", key)
					continue
				}
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					sw, ok := n.(*ast.TypeSwitchStmt)
					if !ok {
						return true
					}
					for _, c := range sw.Body.List {
						for _, e := range c.(*ast.CaseClause).List {
							if name := typeName(e); name != "" && !lifecycle[name] {
								handled[row] = append(handled[row], name)
							}
						}
					}
					return true
				})
			}
		}
	}
	for _, f := range productionFiles(t, "../messages") {
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, s := range g.Specs {
					declared[s.(*ast.TypeSpec).Name.Name] = true
				}
			}
		}
	}
	for _, row := range rows {
		cell, ok := table[row]
		if !ok {
			t.Errorf("section 6: no row for `%s`", row)
			continue
		}
		named := names(cell)
		for _, m := range handled[row] {
			if !named[m] {
				t.Errorf("section 6, `%s`: its Receive takes %s, which the row does not name", row, m)
			}
		}
		for w := range wholeTypes(cell) {
			if declared[w] && !slices.Contains(handled[row], w) {
				t.Errorf("section 6, `%s`: the row names %s, which its Receive does not take", row, w)
			}
		}
	}
}

// Section 7's goroutine table: every function of this package, and of the
// actor packages split out of it (actorDirs), that starts a goroutine (a go
// statement, a WaitGroup's Go, an AfterFunc) is named in it.
func TestArchitectureGoroutineTableNamesEveryStarter(t *testing.T) {
	section := architectureSection(t, "## 7.")
	start := strings.Index(section, "**Goroutines that exist**")
	end := strings.Index(section, "**Stop order**")
	if start < 0 || end < start {
		t.Fatalf("section 7 has no goroutine table between **Goroutines that exist** and **Stop order**")
	}
	named := names(section[start:end])
	var missing []string
	for _, dir := range actorDirs {
		for _, f := range productionFiles(t, dir) {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				starts := false
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					switch x := n.(type) {
					case *ast.GoStmt:
						starts = true
						missing = append(missing, unnamedRunner(named, x.Call.Fun, x.Call)...)
					case *ast.CallExpr:
						if s, ok := x.Fun.(*ast.SelectorExpr); ok && (s.Sel.Name == "Go" || s.Sel.Name == "AfterFunc") {
							starts = true
							if s.Sel.Name == "Go" && len(x.Args) == 1 {
								missing = append(missing, unnamedRunner(named, x.Args[0], nil)...)
							}
						}
					}
					return true
				})
				if starts && !named[fd.Name.Name] {
					who := fd.Name.Name
					if r := actorKey(dir, receiverName(fd)); r != "" {
						who = r + "." + who
					} else if dir != "." {
						who = filepath.Base(dir) + "." + who
					}
					missing = append(missing, who)
				}
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("section 7's goroutine table names no goroutine started by %s", strings.Join(missing, ", "))
	}
}

// unnamedRunner is the function a goroutine runs, when the table does not
// name it: `go n.heartbeat(ctx)`, or a literal whose body is that one call
// (`loops.Go(func() { n.probeWrites(ctx) })`). A goroutine whose literal
// does more is the starter's, named by the starter. So each loop a starter
// runs by name is a row of its own, not hidden behind its starter's name.
func unnamedRunner(named map[string]bool, fun ast.Expr, call *ast.CallExpr) []string {
	if lit, ok := fun.(*ast.FuncLit); ok {
		if len(lit.Body.List) != 1 {
			return nil
		}
		es, ok := lit.Body.List[0].(*ast.ExprStmt)
		if !ok {
			return nil
		}
		if call, ok = es.X.(*ast.CallExpr); !ok {
			return nil
		}
		fun = call.Fun
	}
	var name string
	switch f := fun.(type) {
	case *ast.Ident:
		name = f.Name
	case *ast.SelectorExpr:
		name = f.Sel.Name
	default:
		return nil
	}
	if named[name] {
		return nil
	}
	return []string{name + " (run as a goroutine)"}
}

// fileMapPaths is every file section 1 names, as a path from the module's
// root. An entry starts at a bold directory (**`actors/mover/`**) and
// names its files from there; a name with a directory in it
// (`bulk/main.go`) makes that directory the line's, for the bare names
// after it (`bulk/scenario.go`, then `cluster.go`). So a file counts only
// where its own package's entry names it: a `config.go` named under one
// package no longer passes for another's.
func fileMapPaths(section string) map[string]bool {
	out := map[string]bool{}
	entry := ""
	for _, line := range strings.Split(section, "\n") {
		if m := entryHead.FindStringSubmatch(line); m != nil {
			if strings.HasSuffix(m[1], ".go") {
				out[m[1]] = true
				entry = pathpkg.Dir(m[1]) + "/"
			} else {
				entry = m[1]
			}
		}
		dir := entry
		for _, m := range backticked.FindAllStringSubmatch(line, -1) {
			name := m[1]
			if strings.HasSuffix(name, "/") && !strings.ContainsAny(name, " *(") {
				// A directory named in passing (`deploy/image/`): the bare
				// names after it are its files.
				d := pathpkg.Clean(entry + name)
				if top, _, _ := strings.Cut(name, "/"); moduleTops[top] {
					d = pathpkg.Clean(name)
				}
				dir = d + "/"
				continue
			}
			if !strings.HasSuffix(name, ".go") || strings.ContainsAny(name, " *(") {
				continue
			}
			if strings.Contains(name, "/") {
				p := pathpkg.Clean(entry + name)
				if top, _, _ := strings.Cut(name, "/"); moduleTops[top] {
					p = pathpkg.Clean(name) // a path from the root
				}
				out[p] = true
				dir = pathpkg.Dir(p) + "/"
				continue
			}
			out[pathpkg.Clean(dir+name)] = true
		}
	}
	return out
}

// moduleTops are the module's top directories: a name that starts with
// one is a path from the root, wherever it stands.
var moduleTops = map[string]bool{"actors": true, "cluster": true, "storage": true, "messages": true, "cmd": true, "bench": true, "deploy": true}

// entryHead is the bold directory (or file) that starts an entry of
// section 1; "**`cluster/`, the rest**" starts cluster/'s.
var entryHead = regexp.MustCompile("^\\*\\*`([a-z][a-z0-9/._-]*)`")

// Section 1 names every production Go file of the module in its package's
// entry, and every package has a doc comment.
func TestArchitectureFileMapNamesEveryFile(t *testing.T) {
	named := fileMapPaths(architectureSection(t, "## 1."))
	root := ".."
	documented := map[string]bool{}
	defer func() {
		for dir, doc := range documented {
			if !doc {
				t.Errorf("package %s has no doc comment", dir)
			}
		}
	}()
	err := walkGoFiles(root, func(path string) error {
		dir := filepath.Dir(path)
		if _, seen := documented[dir]; !seen {
			documented[dir] = false
		}
		if strings.HasSuffix(path, "_test.go") {
			return nil // a package of tests alone still needs a doc.go
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		documented[dir] = documented[dir] || f.Doc != nil
		if rel, _ := filepath.Rel(root, path); !named[filepath.ToSlash(rel)] {
			t.Errorf("section 1 does not name %s in its package's entry", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// walkGoFiles calls fn with the path of every .go file of the module under
// root, past hidden directories, testdata and node_modules.
func walkGoFiles(root string, fn func(path string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		return fn(path)
	})
}

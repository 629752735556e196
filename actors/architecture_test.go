package actors

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
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
var actorDirs = []string{".", "sweeper", "fanout", "freeze", "controller", "mover", "partition", "dispatch", "route", "consume", "produce", "startup", "topics", "clusterview", "decommission", "departure", "diskhealth", "debugfaults", "mailbox", "supervise"}

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
	for _, line := range strings.Split(architectureSection(t, messageSection), "\n") {
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
					t.Errorf("%s.Receive: an actor the test does not map to a row of %s; add it to rows", key, messageSection)
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
			t.Errorf("%s: no row for `%s`", messageSection, row)
			continue
		}
		named := names(cell)
		for _, m := range handled[row] {
			if !named[m] {
				t.Errorf("%s, `%s`: its Receive takes %s, which the row does not name", messageSection, row, m)
			}
		}
		for w := range wholeTypes(cell) {
			if declared[w] && !slices.Contains(handled[row], w) {
				t.Errorf("%s, `%s`: the row names %s, which its Receive does not take", messageSection, row, w)
			}
		}
	}
}

// The section headings the tests read.
const (
	packageSection   = "## 1."
	messageSection   = "## 7."
	goroutineSection = "## 8."
)

// tableRows is the cells of every row of the first table in text, the
// header and its rule left out.
func tableRows(text string) [][]string {
	var rows [][]string
	inTable := false
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		if !inTable { // the header
			inTable = true
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if strings.HasPrefix(cells[0], "---") {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	return rows
}

// goroutineTable is the goroutine table of section 8: the text between
// **Goroutines that exist** and **Clocks**.
func goroutineTable(t *testing.T) [][]string {
	t.Helper()
	section := architectureSection(t, goroutineSection)
	start := strings.Index(section, "**Goroutines that exist")
	end := strings.Index(section, "**Clocks")
	if start < 0 || end < start {
		t.Fatalf("%s has no goroutine table between **Goroutines that exist** and **Clocks**", goroutineSection)
	}
	rows := tableRows(section[start:end])
	for _, r := range rows {
		if len(r) != 4 {
			t.Fatalf("%s: a goroutine row has %d cells, want 4 (goroutine, started by, ends, waited by): %q", goroutineSection, len(r), r)
		}
	}
	return rows
}

// Section 8's goroutine table, from the code to the table: every function
// of the root package and of the actor packages (actorDirs) that starts a
// goroutine (a go statement, a WaitGroup's Go, an AfterFunc) is named in
// the "started by" column, and every function a goroutine runs by name in
// the table's first two columns.
func TestArchitectureGoroutineTableNamesEveryStarter(t *testing.T) {
	rows := goroutineTable(t)
	var starters, runners strings.Builder
	for _, r := range rows {
		runners.WriteString(r[0] + " " + r[1] + " ")
		starters.WriteString(r[1] + " ")
	}
	namedStarter, namedRunner := names(starters.String()), names(runners.String())
	var missing []string
	for _, dir := range actorDirs {
		for _, s := range goroutineStarters(t, dir) {
			if !namedStarter[s.fn] {
				missing = append(missing, s.who)
			}
			for _, r := range s.runs {
				if !namedRunner[r] {
					missing = append(missing, r+" (run as a goroutine)")
				}
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%s's goroutine table names no goroutine started by %s", goroutineSection, strings.Join(missing, ", "))
	}
}

// Section 8's goroutine table, from the table to the code: every name in
// the "started by" column is a function of the module that starts a
// goroutine, so a row outlives neither its starter nor the goroutine.
func TestArchitectureGoroutineTableNamesOnlyStarters(t *testing.T) {
	started := map[string]bool{}
	err := walkGoFiles("..", func(path string) error {
		if strings.HasSuffix(path, "_test.go") {
			return nil
		}
		for _, s := range goroutineStartersIn(t, path, "") {
			started[s.fn] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var stale []string
	for _, r := range goroutineTable(t) {
		for _, m := range backticked.FindAllStringSubmatch(r[1], -1) {
			fn := m[1][strings.LastIndex(m[1], ".")+1:]
			if !started[fn] {
				stale = append(stale, fn)
			}
		}
	}
	if len(stale) > 0 {
		t.Errorf("%s's goroutine table says these start a goroutine, and no function of that name does: %s", goroutineSection, strings.Join(stale, ", "))
	}
}

// starter is a function that starts goroutines: fn its name, who the name
// a failure gives it, runs the functions its goroutines run by name.
type starter struct {
	fn, who string
	runs    []string
}

// goroutineStarters is every function of dir's production files that
// starts a goroutine.
func goroutineStarters(t *testing.T, dir string) []starter {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []starter
	for _, p := range paths {
		if !strings.HasSuffix(p, "_test.go") {
			out = append(out, goroutineStartersIn(t, p, dir)...)
		}
	}
	return out
}

// goroutineStartersIn is every function of the file at path that starts a
// goroutine (a go statement, a WaitGroup's Go, an AfterFunc), with the
// functions its goroutines run by name (unnamedRunner).
func goroutineStartersIn(t *testing.T, path, dir string) []starter {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []starter
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		s := starter{fn: fd.Name.Name}
		starts := false
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.GoStmt:
				starts = true
				s.runs = append(s.runs, runnerName(x.Call.Fun, x.Call)...)
			case *ast.CallExpr:
				if sel, ok := x.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Go" || sel.Sel.Name == "AfterFunc") {
					starts = true
					if sel.Sel.Name == "Go" && len(x.Args) == 1 {
						s.runs = append(s.runs, runnerName(x.Args[0], nil)...)
					}
				}
			}
			return true
		})
		if !starts {
			continue
		}
		s.who = fd.Name.Name
		if r := actorKey(dir, receiverName(fd)); r != "" {
			s.who = r + "." + s.who
		} else if dir != "." && dir != "" {
			s.who = filepath.Base(dir) + "." + s.who
		}
		out = append(out, s)
	}
	return out
}

// runnerName is the function a goroutine runs, by name: `go n.heartbeat(ctx)`,
// or a literal whose body is that one call
// (`loops.Go(func() { n.probeWrites(ctx) })`). A goroutine whose literal
// does more is the starter's, named by the starter. So each loop a starter
// runs by name is a row of its own, not hidden behind its starter's name.
func runnerName(fun ast.Expr, call *ast.CallExpr) []string {
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
	switch f := fun.(type) {
	case *ast.Ident:
		return []string{f.Name}
	case *ast.SelectorExpr:
		return []string{f.Sel.Name}
	}
	return nil
}

// packageRows is section 1's table: each package directory (from the
// module's root, without its slash) and the file its row says to start at.
func packageRows(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range tableRows(architectureSection(t, packageSection)) {
		if len(r) != 3 {
			t.Fatalf("%s: a package row has %d cells, want 3 (package, what it is for, start at): %q", packageSection, len(r), r)
		}
		dir := strings.Trim(r[0], "`")
		start := strings.Trim(r[2], "`")
		if !strings.HasSuffix(dir, "/") || strings.ContainsAny(start, "/ ") {
			t.Fatalf("%s: a row names %q and %q, want a `dir/` and a file in it", packageSection, r[0], r[2])
		}
		out[strings.TrimSuffix(dir, "/")] = start
	}
	return out
}

// Section 1 has a row for every package of the module and no other, each
// row's start file is in its package, and every package has a doc comment.
func TestArchitecturePackageTableMatchesTheTree(t *testing.T) {
	rows := packageRows(t)
	root := ".."
	documented := map[string]bool{}
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
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, doc := range documented {
		rel, _ := filepath.Rel(root, dir)
		rel = filepath.ToSlash(rel)
		if !doc {
			t.Errorf("package %s has no doc comment", rel)
		}
		if _, ok := rows[rel]; !ok {
			t.Errorf("%s has no row for package %s/", packageSection, rel)
		}
	}
	for rel, start := range rows {
		dir := filepath.Join(root, filepath.FromSlash(rel))
		if _, ok := documented[dir]; !ok {
			t.Errorf("%s has a row for %s/, which holds no Go file", packageSection, rel)
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, start)); err != nil {
			t.Errorf("%s: %s/ says to start at %s, which it does not hold", packageSection, rel, start)
		}
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

// layerRule is what the production code of the packages under one
// directory may import of the module: nothing but the prefixes allowed.
type layerRule struct {
	dir     string
	allowed []string
}

// Section 1's layers: imports point one way, and the one package every
// layer may take is actors/clock.
var layers = []layerRule{
	{"messages", nil},
	{"storage", []string{"storage", "actors/clock"}},
	{"cluster/membership", []string{"messages", "actors/clock"}},
	{"cluster/planner", []string{"messages"}},
	{"cluster/metastore", []string{"cluster/metastore", "messages", "actors/clock"}},
	{"cluster/transport", []string{"cluster/transport", "messages", "actors/clock"}},
	{"actors/api", []string{"actors/api", "actors/errs", "actors/clock", "messages"}},
}

// Section 1: the layers' imports point one way.
func TestArchitectureLayers(t *testing.T) {
	const module = "github.com/naradmq/narad/"
	var bad []string
	for _, l := range layers {
		err := walkGoFiles(filepath.Join("..", l.dir), func(path string) error {
			if strings.HasSuffix(path, "_test.go") || strings.Contains(filepath.ToSlash(path), "/metastoretest/") || strings.Contains(filepath.ToSlash(path), "/testpki/") {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				p := strings.Trim(imp.Path.Value, `"`)
				rel, ok := strings.CutPrefix(p, module)
				if !ok {
					continue
				}
				if !slices.ContainsFunc(l.allowed, func(a string) bool { return rel == a || strings.HasPrefix(rel, a+"/") }) {
					bad = append(bad, path+" imports "+rel)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(bad) > 0 {
		t.Errorf("imports against section 1's layers:\n%s", strings.Join(bad, "\n"))
	}
}

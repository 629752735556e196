package actors

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The code and its tests cite the rules of a move by id (F9, K7, B5…).
// RULES.md, beside this file, defines each id in one line and names the
// tests that prove it. TestRulesListMatchesTheTree holds that list to the
// tree both ways, so that a reader who meets an id can look it up and
// trust the tests it names. When it fails because tests changed, rewrite
// the lists of tests from the tree:
//
//	go test ./actors -run TestRulesListMatchesTheTree -update-rules

const rulesPath = "RULES.md"

var updateRules = flag.Bool("update-rules", false, "rewrite the lists of tests in RULES.md from the tree")

// ruleLine is one rule of RULES.md: "- **F9** words. Tests: `a.TestX`, …".
var ruleLine = regexp.MustCompile("^- \\*\\*([A-Z][0-9]{1,2})\\*\\* (.*?)(?: Tests: (.*))?$")

// ruleCite is a citation in code or comments: "rule F9", "rules F3, F4
// and F9", "rule V6's order", "rules X6/X9".
var ruleCite = regexp.MustCompile(`\b[Rr]ules? ([A-Z][0-9]{1,2}\b(?:'s)?(?:(?:, | and | or |/| & )[A-Z][0-9]{1,2}\b(?:'s)?)*)`)

// ruleInName finds the ids in a test's name: TestRuleF9…, TestRulesX6X9….
var ruleInName = regexp.MustCompile(`Rules?((?:[A-Z][0-9]{1,2})+)`)

var ruleID = regexp.MustCompile(`[A-Z][0-9]{1,2}`)

// listedRule is a rule as RULES.md lists it.
type listedRule struct {
	id, words string
	tests     []string
	line      int
}

// readRules parses RULES.md: its lines, and its rules in order.
func readRules(t *testing.T) (lines []string, rules []listedRule) {
	t.Helper()
	b, err := os.ReadFile(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	lines = strings.Split(string(b), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "- **") {
			continue
		}
		m := ruleLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("RULES.md:%d: not a rule line (- **ID** words. Tests: `pkg.TestName`, …): %q", i+1, l)
		}
		r := listedRule{id: m[1], words: m[2], line: i}
		for _, name := range backticked.FindAllStringSubmatch(m[3], -1) {
			r.tests = append(r.tests, name[1])
		}
		rules = append(rules, r)
	}
	return lines, rules
}

// treeRules is what the tree says about rules: where each id is cited,
// and which tests name each id (in their name, their doc comment or their
// body, as table-driven tests do), each test as "dir.TestName" with dir
// relative to the module's root.
type treeRules struct {
	cited  map[string]string          // id → first place it is cited
	proved map[string]map[string]bool // id → tests
	tests  map[string]bool            // every test, benchmark and fuzz target
}

func scanRules(t *testing.T, root string) treeRules {
	t.Helper()
	tr := treeRules{cited: map[string]string{}, proved: map[string]map[string]bool{}, tests: map[string]bool{}}
	err := walkGoFiles(root, func(path string) error {
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, loc := range ruleCite.FindAllSubmatchIndex(src, -1) {
			for _, id := range ruleID.FindAllString(string(src[loc[2]:loc[3]]), -1) {
				if _, ok := tr.cited[id]; !ok {
					tr.cited[id] = fmt.Sprintf("%s:%d", rel, 1+strings.Count(string(src[:loc[0]]), "\n"))
				}
			}
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !isTestName(fn.Name.Name) {
				continue
			}
			name := filepath.ToSlash(filepath.Dir(rel)) + "." + fn.Name.Name
			tr.tests[name] = true
			start := fn.Pos()
			if fn.Doc != nil {
				start = fn.Doc.Pos()
			}
			text := string(src[fset.Position(start).Offset:fset.Position(fn.End()).Offset])
			var ids []string
			for _, m := range ruleCite.FindAllStringSubmatch(text, -1) {
				ids = append(ids, ruleID.FindAllString(m[1], -1)...)
			}
			for _, m := range ruleInName.FindAllStringSubmatch(fn.Name.Name, -1) {
				ids = append(ids, ruleID.FindAllString(m[1], -1)...)
			}
			for _, id := range ids {
				if tr.proved[id] == nil {
					tr.proved[id] = map[string]bool{}
				}
				tr.proved[id][name] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func isTestName(n string) bool {
	for _, p := range []string{"Test", "Benchmark", "Fuzz"} {
		if strings.HasPrefix(n, p) && n != "TestMain" {
			return true
		}
	}
	return false
}

// checkRules returns what is wrong between the list and the tree, one
// line each.
func checkRules(rules []listedRule, tr treeRules) []string {
	var bad []string
	listed := map[string]bool{}
	for _, r := range rules {
		if listed[r.id] {
			bad = append(bad, fmt.Sprintf("RULES.md:%d: %s is listed twice", r.line+1, r.id))
		}
		listed[r.id] = true
		if strings.TrimSpace(r.words) == "" {
			bad = append(bad, fmt.Sprintf("RULES.md:%d: %s says nothing", r.line+1, r.id))
		}
		if len(tr.proved[r.id]) == 0 {
			bad = append(bad, fmt.Sprintf("RULES.md:%d: no test names %s: a rule is proved by a test that names its id", r.line+1, r.id))
		}
		for _, name := range r.tests {
			switch {
			case !tr.tests[name]:
				bad = append(bad, fmt.Sprintf("RULES.md:%d: %s lists %s, and there is no such test", r.line+1, r.id, name))
			case !tr.proved[r.id][name]:
				bad = append(bad, fmt.Sprintf("RULES.md:%d: %s lists %s, which does not name %s", r.line+1, r.id, name, r.id))
			}
		}
		for name := range tr.proved[r.id] {
			if !slices.Contains(r.tests, name) {
				bad = append(bad, fmt.Sprintf("RULES.md:%d: %s names %s and is not listed under it", r.line+1, name, r.id))
			}
		}
	}
	for id, where := range tr.cited {
		if !listed[id] {
			bad = append(bad, fmt.Sprintf("%s cites rule %s, which RULES.md does not define", where, id))
		}
	}
	for id := range tr.proved {
		if _, cited := tr.cited[id]; !cited && !listed[id] {
			bad = append(bad, fmt.Sprintf("a test's name cites rule %s, which RULES.md does not define", id))
		}
	}
	sort.Strings(bad)
	return bad
}

// The list of rules holds every id the tree cites, each with words and
// at least one test, and exactly the tests that name it.
func TestRulesListMatchesTheTree(t *testing.T) {
	lines, rules := readRules(t)
	tr := scanRules(t, "..")
	if len(rules) < 100 {
		t.Fatalf("RULES.md lists %d rules, want the seeds' 103", len(rules))
	}
	if *updateRules {
		for _, r := range rules {
			var names []string
			for name := range tr.proved[r.id] {
				names = append(names, "`"+name+"`")
			}
			sort.Strings(names)
			lines[r.line] = fmt.Sprintf("- **%s** %s Tests: %s", r.id, strings.TrimSpace(r.words), strings.Join(names, ", "))
		}
		if err := os.WriteFile(rulesPath, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		_, rules = readRules(t)
	}
	for _, b := range checkRules(rules, tr) {
		t.Error(b)
	}
}

// The check itself fails on each kind of drift: a sample tree and list
// with one thing wrong at a time.
func TestRulesCheckFindsEachDrift(t *testing.T) {
	good := func() ([]listedRule, treeRules) {
		return []listedRule{{id: "F9", words: "the fence.", tests: []string{"a.TestFence"}}},
			treeRules{
				cited:  map[string]string{"F9": "a/x.go:1"},
				proved: map[string]map[string]bool{"F9": {"a.TestFence": true}},
				tests:  map[string]bool{"a.TestFence": true, "a.TestOther": true},
			}
	}
	if bad := checkRules(good()); len(bad) != 0 {
		t.Fatalf("a list that matches: got %q, want nothing wrong", bad)
	}
	for _, c := range []struct {
		name   string
		break_ func(r []listedRule, tr *treeRules) []listedRule
		want   string
	}{
		{"a cited id not listed", func(r []listedRule, tr *treeRules) []listedRule { tr.cited["K7"] = "a/y.go:3"; return r }, "K7, which RULES.md does not define"},
		{"a listed id without a test", func(r []listedRule, tr *treeRules) []listedRule { delete(tr.proved, "F9"); return r }, "no test names F9"},
		{"a listed test that does not exist", func(r []listedRule, tr *treeRules) []listedRule {
			r[0].tests = append(r[0].tests, "a.TestGone")
			return r
		}, "there is no such test"},
		{"a listed test that does not name the rule", func(r []listedRule, tr *treeRules) []listedRule {
			r[0].tests = append(r[0].tests, "a.TestOther")
			return r
		}, "which does not name F9"},
		{"a test that names the rule, not listed", func(r []listedRule, tr *treeRules) []listedRule {
			tr.proved["F9"]["a.TestOther"] = true
			return r
		}, "a.TestOther names F9 and is not listed"},
		{"an id listed twice", func(r []listedRule, tr *treeRules) []listedRule { return append(r, r[0]) }, "F9 is listed twice"},
		{"a rule without words", func(r []listedRule, tr *treeRules) []listedRule { r[0].words = " "; return r }, "F9 says nothing"},
	} {
		r, tr := good()
		r = c.break_(r, &tr)
		bad := checkRules(r, tr)
		if !slices.ContainsFunc(bad, func(b string) bool { return strings.Contains(b, c.want) }) {
			t.Errorf("%s: got %q, want a line with %q", c.name, bad, c.want)
		}
	}
}

package deploy

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	"github.com/VictoriaMetrics/metricsql"
	"sigs.k8s.io/yaml"
)

// dashboard is vmui's predefined dashboard format (-vmui.customDashboardsPath).
type dashboard struct {
	Title string `json:"title"`
	Rows  []struct {
		Title  string `json:"title"`
		Panels []struct {
			Title       string   `json:"title"`
			Description string   `json:"description,omitempty"`
			Unit        string   `json:"unit,omitempty"`
			Width       int      `json:"width,omitempty"`
			ShowLegend  *bool    `json:"showLegend,omitempty"`
			Expr        []string `json:"expr"`
			Alias       []string `json:"alias,omitempty"`
		} `json:"panels"`
	} `json:"rows"`
}

// rules is vmalert's (Prometheus') rule file format, the fields we use.
type rules struct {
	Groups []struct {
		Name     string `json:"name"`
		Interval string `json:"interval,omitempty"`
		Rules    []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"rules"`
	} `json:"groups"`
}

// readFile is a file of the repository the test reads; a file missing is
// the test's failure.
func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func strictJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		t.Fatal(err)
	}
}

// exported are the series the node's code names (literals in its sources),
// plus the Go runtime and process series the metrics library writes, which
// /metrics serves under their standard names.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	var runtimeSeries bytes.Buffer
	metrics.WriteProcessMetrics(&runtimeSeries)
	for line := range strings.Lines(runtimeSeries.String()) {
		if name, _, _ := strings.Cut(line, " "); !strings.HasPrefix(name, "#") {
			name, _, _ = strings.Cut(name, "{")
			names[name] = true
		}
	}
	if !names["go_goroutines"] || !names["process_resident_memory_bytes"] {
		t.Fatalf("the metrics library wrote no go_goroutines or process_resident_memory_bytes: %v", names)
	}
	re := regexp.MustCompile(`narad_[a-z0-9_]+`)
	for _, root := range []string{"../actors", "../cluster", "../storage"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			for _, m := range re.FindAllString(string(b), -1) {
				names[m] = true
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// checkExpr parses expr as MetricsQL and checks every series it names is
// one the code exports (a histogram's _bucket, _sum, _count included).
func checkExpr(t *testing.T, where, expr string, names map[string]bool) {
	t.Helper()
	e, err := metricsql.Parse(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, expr, err)
		return
	}
	found := 0
	metricsql.VisitAll(e, func(x metricsql.Expr) {
		me, ok := x.(*metricsql.MetricExpr)
		if !ok {
			return
		}
		for _, lfs := range me.LabelFilterss {
			for _, lf := range lfs {
				if lf.Label != "__name__" {
					continue
				}
				found++
				base := lf.Value
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(base, suffix); ok && names[b] {
						base = b
					}
				}
				if !names[base] {
					t.Errorf("%s: %q names %s, which no Narad node exports", where, expr, lf.Value)
				}
			}
		}
	})
	if found == 0 {
		t.Errorf("%s: %q names no series", where, expr)
	}
}

func TestEveryDashboardPanelParsesAndNamesExportedSeries(t *testing.T) {
	names := exported(t)
	files, err := filepath.Glob("vmui/*.json")
	if err != nil || len(files) < 4 {
		t.Fatalf("dashboards: got %v (%v), want the four of deploy/README.md", files, err)
	}
	for _, f := range files {
		b := readFile(t, f)
		var d dashboard
		strictJSON(t, b, &d)
		if d.Title == "" || len(d.Rows) == 0 {
			t.Errorf("%s: no title or no rows", f)
		}
		for _, r := range d.Rows {
			for _, p := range r.Panels {
				where := f + ": " + p.Title
				if p.Title == "" || len(p.Expr) == 0 {
					t.Errorf("%s: a panel without a title or an expression", where)
				}
				if len(p.Alias) > 0 && len(p.Alias) != len(p.Expr) {
					t.Errorf("%s: %d aliases for %d expressions", where, len(p.Alias), len(p.Expr))
				}
				if p.Width < 0 || p.Width > 12 {
					t.Errorf("%s: width %d outside 1..12", where, p.Width)
				}
				for _, e := range p.Expr {
					checkExpr(t, where, e, names)
				}
			}
		}
	}
}

// readRules is vmalert/narad-alerts.yml, decoded strictly.
func readRules(t *testing.T) rules {
	t.Helper()
	b := readFile(t, "vmalert/narad-alerts.yml")
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	var r rules
	strictJSON(t, j, &r)
	return r
}

func TestEveryAlertParsesAndNamesExportedSeries(t *testing.T) {
	names := exported(t)
	r := readRules(t)
	seen := map[string]bool{}
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			if rule.Alert == "" || rule.Annotations["summary"] == "" || rule.Labels["severity"] == "" {
				t.Errorf("rule %+v: want an alert name, a severity and a summary", rule)
			}
			seen[rule.Alert] = true
			checkExpr(t, rule.Alert, rule.Expr, names)
		}
	}
	// The list: a node dead, moves blocked, a decommission blocked,
	// freeze p99 high, WAL backlog growing, disk filling, anything quarantined.
	for _, want := range []string{"NaradNodeDead", "NaradMovesBlocked", "NaradDecommissionBlocked", "NaradFreezeP99High",
		"NaradWALBacklogGrowing", "NaradDiskFull", "NaradDiskFilling", "NaradQuarantined"} {
		if !seen[want] {
			t.Errorf("alert %s missing", want)
		}
	}
}

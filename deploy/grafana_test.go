package deploy

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite deploy/grafana/narad.json from the vmui dashboards")

// grafanaOf is the vmui dashboards as one Grafana dashboard: a row per
// dashboard row (titled with its dashboard), a time series panel per
// panel, one target per expression, the 12 vmui columns as Grafana's 24.
// The Prometheus data source is a variable, so an import asks for it.
func grafanaOf(dashboards []dashboard) map[string]any {
	var panels []any
	id, y := 1, 0
	for _, d := range dashboards {
		for _, r := range d.Rows {
			panels = append(panels, map[string]any{"id": id, "type": "row", "title": d.Title + ": " + r.Title,
				"collapsed": false, "gridPos": map[string]int{"x": 0, "y": y, "w": 24, "h": 1}})
			id++
			y++
			x := 0
			for _, p := range r.Panels {
				w := p.Width * 2
				if w == 0 {
					w = 24
				}
				if x+w > 24 {
					x, y = 0, y+8
				}
				var targets []any
				for i, e := range p.Expr {
					t := map[string]any{"refId": string(rune('A' + i)), "expr": e, "datasource": map[string]string{"type": "prometheus", "uid": "${datasource}"}}
					if i < len(p.Alias) {
						t["legendFormat"] = p.Alias[i]
					}
					targets = append(targets, t)
				}
				panel := map[string]any{"id": id, "type": "timeseries", "title": p.Title, "description": p.Description,
					"datasource": map[string]string{"type": "prometheus", "uid": "${datasource}"},
					"gridPos":    map[string]int{"x": x, "y": y, "w": w, "h": 8}, "targets": targets}
				if p.Unit != "" {
					panel["fieldConfig"] = map[string]any{"defaults": map[string]any{"unit": p.Unit}, "overrides": []any{}}
				}
				panels = append(panels, panel)
				id++
				x += w
			}
			y += 8
		}
	}
	return map[string]any{
		"title": "Narad", "uid": "narad", "schemaVersion": 39, "editable": true, "refresh": "10s",
		"time":       map[string]string{"from": "now-1h", "to": "now"},
		"templating": map[string]any{"list": []any{map[string]any{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"}}},
		"panels":     panels,
	}
}

func TestTheGrafanaDashboardHasTheVmuiPanels(t *testing.T) {
	files, err := filepath.Glob("vmui/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("vmui dashboards: %v %v", files, err)
	}
	var ds []dashboard
	for _, f := range files {
		b := readFile(t, f)
		var d dashboard
		strictJSON(t, b, &d)
		ds = append(ds, d)
	}
	want, err := json.MarshalIndent(grafanaOf(ds), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	const path = "grafana/narad.json"
	if *update {
		if err := os.MkdirAll("grafana", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./deploy -run Grafana -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not the vmui dashboards' panels: run go test ./deploy -run Grafana -update", path)
	}
}

//go:build obs

// The dashboards and alerts against the real VictoriaMetrics: it builds
// victoria-metrics and vmalert from the module proxy (about a minute the
// first time), runs `narad dev --nodes 3` under a little load beside them,
// and checks that vmui lists every dashboard, that every panel's
// expression and every alert's (its left side, before the threshold)
// answers with data through the query API, and that vmalert loads the
// rules in its dry-run mode. Run with `task obs:test`.
package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metricsql"
	"sigs.k8s.io/yaml"
)

const vmVersion = "v1.151.0"

// eventOnly are series that exist only once their event happened (a
// decommission under way, a move blocked, a move's freeze observed): a
// cluster under load without moves has none, so their panels and alerts
// answer nothing; the test logs each.
var eventOnly = []string{"narad_decommission_blocked", "narad_moves_blocked", "narad_move_freeze_seconds"}

func freePort(t *testing.T) string { return deployPorts.Addr(t) }

func build(t *testing.T, dir, pkg string) string {
	t.Helper()
	cmd := exec.Command("go", "install", pkg)
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go install %s: %v", pkg, err)
	}
	return filepath.Join(dir, filepath.Base(strings.Split(pkg, "@")[0]))
}

func start(t *testing.T, log string, name string, args ...string) {
	t.Helper()
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
		}
		f.Close()
	})
}

func waitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r, err := http.Get(url)
		if err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered 200 (last: %v)", url, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestDashboardsAndAlertsAnswerThroughVictoriaMetrics(t *testing.T) {
	bin := t.TempDir()
	vm := build(t, bin, "github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics@"+vmVersion)
	vmalert := build(t, bin, "github.com/VictoriaMetrics/VictoriaMetrics/app/vmalert@"+vmVersion)
	narad := build(t, bin, "github.com/naradmq/narad/cmd/narad")

	// Three nodes on ports of their own (below the ephemeral range).
	base := 7962
	data := t.TempDir()
	start(t, filepath.Join(data, "narad.log"), narad, "dev", "--nodes", "3", "--fresh", "--nats-port", "0", "--data", filepath.Join(data, "dev"),
		"--http-base", fmt.Sprintf("127.0.0.1:%d", base))
	var targets []string
	for i := range 3 {
		targets = append(targets, fmt.Sprintf("%q", fmt.Sprintf("127.0.0.1:%d", base+i)))
		waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", base+i))
	}
	scrape := filepath.Join(data, "scrape.yml")
	os.WriteFile(scrape, []byte("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: narad\n    static_configs:\n      - targets: ["+strings.Join(targets, ", ")+"]\n"), 0o644)
	vmAddr := freePort(t)
	start(t, filepath.Join(data, "vm.log"), vm, "-httpListenAddr="+vmAddr, "-storageDataPath="+filepath.Join(data, "vm"),
		"-promscrape.config="+scrape, "-vmui.customDashboardsPath=vmui", "-search.latencyOffset=0s")
	waitHTTP(t, "http://"+vmAddr+"/health")

	// Load: a parent with a child, produces on every node, consumes and acks.
	node := func(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", base+i%3) }
	post := func(u, body string) {
		r, err := http.Post(u, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	post(node(0)+"/v1/topics", `{"name":"orders","partitions":6}`)
	post(node(0)+"/v1/topics", `{"name":"audit","parent":"orders"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	for i := 0; ctx.Err() == nil; i++ {
		post(fmt.Sprintf("%s/v1/topics/orders/produce?key=k%d", node(i), i), fmt.Sprintf(`{"i":%d}`, i))
		if i%2 == 0 {
			r, err := http.Get(node(i+1) + "/v1/topics/audit/consume?wait=0")
			if err == nil {
				var m struct {
					ReceiptHandle string `json:"receipt_handle"`
				}
				json.NewDecoder(r.Body).Decode(&m)
				r.Body.Close()
				if m.ReceiptHandle != "" && i%4 == 0 {
					post(node(i+1)+"/v1/topics/audit/ack?receipt_handle="+url.QueryEscape(m.ReceiptHandle), "")
				}
			}
		}
		if i == 200 {
			// The HTTP error panel wants an error answered.
			post(node(0)+"/v1/topics/missing/produce", "x")
		}
		time.Sleep(5 * time.Millisecond)
	}

	// vmui lists every dashboard.
	r, err := http.Get("http://" + vmAddr + "/vmui/custom-dashboards")
	if err != nil {
		t.Fatal(err)
	}
	var listed struct {
		DashboardsSettings []dashboard `json:"dashboardsSettings"`
	}
	json.NewDecoder(r.Body).Decode(&listed)
	r.Body.Close()
	files, _ := filepath.Glob("vmui/*.json")
	if len(listed.DashboardsSettings) != len(files) {
		t.Fatalf("vmui lists %d dashboards, want %d (%v)", len(listed.DashboardsSettings), len(files), files)
	}

	query := func(expr string) (int, error) {
		r, err := http.Get("http://" + vmAddr + "/api/v1/query?query=" + url.QueryEscape(expr) + "&step=5s")
		if err != nil {
			return 0, err
		}
		defer r.Body.Close()
		var out struct {
			Status string `json:"status"`
			Data   struct {
				Result []json.RawMessage `json:"result"`
			} `json:"data"`
			Error string `json:"error"`
		}
		json.NewDecoder(r.Body).Decode(&out)
		if out.Status != "success" {
			return 0, fmt.Errorf("%s: %s", out.Status, out.Error)
		}
		return len(out.Data.Result), nil
	}
	expectData := func(where, expr string) {
		t.Helper()
		n, err := query(expr)
		if err != nil {
			t.Errorf("%s: %q: %v", where, expr, err)
			return
		}
		if n > 0 {
			return
		}
		for _, e := range eventOnly {
			if strings.Contains(expr, e) {
				t.Logf("%s: %q: no data (an event-only series)", where, expr)
				return
			}
		}
		t.Errorf("%s: %q answered no data under load", where, expr)
	}
	for _, d := range listed.DashboardsSettings {
		for _, row := range d.Rows {
			for _, p := range row.Panels {
				for _, e := range p.Expr {
					expectData(d.Title+": "+p.Title, e)
				}
			}
		}
	}

	// Every alert's expression, up to its threshold, answers too.
	b, _ := os.ReadFile("vmalert/narad-alerts.yml")
	j, _ := yaml.YAMLToJSON(b)
	var rs rules
	json.Unmarshal(j, &rs)
	for _, g := range rs.Groups {
		for _, rule := range g.Rules {
			e, err := metricsql.Parse(rule.Expr)
			if err != nil {
				t.Fatal(err)
			}
			if be, ok := e.(*metricsql.BinaryOpExpr); ok && be.Op == "and" {
				e = be.Left
			}
			if be, ok := e.(*metricsql.BinaryOpExpr); ok && metricsql.IsBinaryOpCmp(be.Op) {
				e = be.Left
			}
			expectData(rule.Alert, string(e.AppendString(nil)))
		}
	}

	// vmalert loads the rules.
	out, err := exec.Command(vmalert, "-dryRun", "-rule=vmalert/narad-alerts.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("vmalert -dryRun: %v\n%s", err, out)
	}

	// A headless screenshot of each dashboard where Chromium is installed.
	if chromium, err := exec.LookPath("chromium"); err == nil {
		for i := range listed.DashboardsSettings {
			shot := filepath.Join(os.TempDir(), fmt.Sprintf("narad-dashboard-%d.png", i))
			cmd := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1600,1200",
				"--virtual-time-budget=8000", "--screenshot="+shot, fmt.Sprintf("http://%s/vmui/#/dashboards?dashboardNum=%d", vmAddr, i))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("screenshot of dashboard %d: %v\n%s", i, err, out)
				continue
			}
			t.Logf("dashboard %q: %s", listed.DashboardsSettings[i].Title, shot)
		}
	} else {
		t.Log("chromium not installed: no screenshots")
	}
}

package api

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"
)

// The code's own series, as literals in its sources; narad_nats_ alone is
// the transport's prefix, completed at run time.
var metricName = regexp.MustCompile(`narad_[a-z0-9_]+`)

func TestEveryMetricTheCodeExportsHasHelp(t *testing.T) {
	seen := map[string]bool{}
	for _, root := range []string{"../../actors", "../../cluster", "../../storage"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
				strings.HasSuffix(path, "metrichelp.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range metricName.FindAllString(string(b), -1) {
				if m != "narad_nats_" {
					seen[m] = true
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) < 40 {
		t.Fatalf("found %d metric names in the sources, want the node's 60 or so: is the scan looking in the right place?", len(seen))
	}
	for name := range seen {
		if metricHelp[name] == "" {
			t.Errorf("%s is exported but has no HELP text in metricHelp", name)
		}
	}
}

func TestMetricsCarryHelpTypeAndTheRuntimeSeries(t *testing.T) {
	metrics.GetOrCreateCounter(`narad_ack_total{node="help-test"}`).Inc()
	rec := httptest.NewRecorder()
	Handler(readyNode(), Options{NodeID: "n1"}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: got %d, want 200", rec.Code)
	}
	body := rec.Body.String()
	for _, want := range []string{
		"# HELP narad_ack_total Leases acked.\n",
		"# TYPE narad_ack_total counter\n",
		// The Go runtime and process series under their standard names,
		// with the node's label.
		"\ngo_goroutines{node=\"n1\"} ",
		"\nprocess_resident_memory_bytes{node=\"n1\"} ",
		"\n# TYPE go_goroutines gauge\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// Everything else is named narad_.
	standard := regexp.MustCompile(`^(# (HELP|TYPE) )?(go|process)_[a-z0-9_]+( |\n|\{node="n1"[,}])`)
	for line := range strings.Lines(body) {
		if standard.MatchString(line) {
			continue
		}
		if !strings.HasPrefix(line, "narad_") && !strings.HasPrefix(line, "# HELP narad_") && !strings.HasPrefix(line, "# TYPE narad_") {
			t.Fatalf("a line outside the narad_ names: %q", line)
		}
	}
}

func TestRequestsAreCountedByRouteAndStatus(t *testing.T) {
	set := metrics.NewSet()
	h := Handler(readyNode(), Options{NodeID: "count-test", Metrics: set})
	for _, target := range []string{"/healthz", "/healthz", "/v1/topics/orders-7/children", "/nowhere"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", target, nil))
	}
	for series, want := range map[string]uint64{
		`narad_http_requests_total{node="count-test",route="GET /healthz",status="200"}`:                    2,
		`narad_http_requests_total{node="count-test",route="GET /v1/topics/{topic}/children",status="200"}`: 1,
		`narad_http_requests_total{node="count-test",route="unmatched",status="404"}`:                       1,
	} {
		if got := set.GetOrCreateCounter(series).Get(); got != want {
			t.Errorf("%s: got %d, want %d", series, got, want)
		}
	}
}

func TestANodeExportsItsOwnSetAndTheProcessSeriesButNoOtherNodes(t *testing.T) {
	mine, theirs := metrics.NewSet(), metrics.NewSet()
	mine.GetOrCreateCounter(`narad_ack_total{node="own-set"}`).Inc()
	theirs.GetOrCreateCounter(`narad_ack_total{node="other-set"}`).Inc()
	rec := httptest.NewRecorder()
	Handler(readyNode(), Options{Metrics: mine}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	if !strings.Contains(body, `narad_ack_total{node="own-set"} 1`) {
		t.Error("the node's own series is missing")
	}
	if strings.Contains(body, `node="other-set"`) {
		t.Error("another node's series is exported")
	}
	if !strings.Contains(body, "\ngo_goroutines ") {
		t.Error("the process-wide runtime series are missing")
	}
}

func TestWithNodeLabel(t *testing.T) {
	for _, tc := range []struct{ node, in, want string }{
		{"n1", "go_goroutines 12\n", `go_goroutines{node="n1"} 12` + "\n"},
		{"n1", `go_info{version="go1.26.8"} 1` + "\n", `go_info{node="n1",version="go1.26.8"} 1` + "\n"},
		{"n1", "go_gc_duration_seconds{} 0\n", `go_gc_duration_seconds{node="n1"} 0` + "\n"},
		{`a"b`, "go_goroutines 1\n", `go_goroutines{node="a\"b"} 1` + "\n"},
		{"", "go_goroutines 12\n", "go_goroutines 12\n"},
	} {
		if got := string(withNodeLabel([]byte(tc.in), tc.node)); got != tc.want {
			t.Errorf("withNodeLabel(%q, %q): got %q, want %q", tc.in, tc.node, got, tc.want)
		}
	}
}

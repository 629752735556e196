package actors

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

func TestBuildInfoNamesTheVersion(t *testing.T) {
	for _, tc := range []struct{ version, want string }{
		{"v1.2.3", `narad_build_info{node="bi-1",version="v1.2.3",goversion="` + runtime.Version() + `"} 1`},
		{"", `narad_build_info{node="bi-2",version="unknown",goversion="` + runtime.Version() + `"} 1`},
	} {
		node := "bi-1"
		if tc.version == "" {
			node = "bi-2"
		}
		m := newNodeMetrics(node)
		m.buildInfo(tc.version)
		var buf bytes.Buffer
		m.set.WritePrometheus(&buf)
		if !strings.Contains(buf.String(), tc.want+"\n") {
			t.Errorf("version %q: got no line %s in\n%s", tc.version, tc.want, grepLines(buf.String(), "narad_build_info"))
		}
	}
}

// grepLines is the lines of text that contain s.
func grepLines(text, s string) string {
	var out strings.Builder
	for line := range strings.Lines(text) {
		if strings.Contains(line, s) {
			out.WriteString(line)
		}
	}
	return out.String()
}

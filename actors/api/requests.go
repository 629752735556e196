package api

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/VictoriaMetrics/metrics"
)

// countRequests counts every request by its route (the mux pattern it
// matched, so a path's topic name never becomes a label: the series are
// bounded by the routes times the statuses) and the status answered, in
// narad_http_requests_total{node,route,status}, in the node's set. A path
// no route matches counts as route "unmatched".
func countRequests(node string, set *metrics.Set, mux *http.ServeMux, next http.Handler) http.Handler {
	if node == "" || set == nil {
		return next
	}
	// The counters by (route, status), so a request formats no series name
	// (a produce is the hot path); bounded by routes times statuses.
	var counters sync.Map
	count := func(route string, status int) {
		k := requestKey{route, status}
		c, ok := counters.Load(k)
		if !ok {
			c, _ = counters.LoadOrStore(k, set.GetOrCreateCounter(fmt.Sprintf(`narad_http_requests_total{node=%q,route=%q,status="%s"}`,
				node, route, strconv.Itoa(status))))
		}
		c.(*metrics.Counter).Inc()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, route := mux.Handler(r)
		if route == "" {
			route = "unmatched"
		}
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			status := sw.status
			if status == 0 {
				status = http.StatusOK
			}
			count(route, status)
		}()
		next.ServeHTTP(sw, r)
	})
}

type requestKey struct {
	route  string
	status int
}

// statusWriter remembers the status a handler answered. Unwrap lets
// http.ResponseController reach the connection beneath (deadlines,
// flushes) as before.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

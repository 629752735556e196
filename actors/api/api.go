// Package api is the client HTTP API of api/CONTRACT.md: routing, query and
// body parsing, and the contract's statuses, texts and headers. It knows
// nothing of actors or the metastore; it calls a Node, which answers in
// domain terms (records, leases, topics, outcomes) and with the sentinel
// errors of errors.go, and it turns those into HTTP.
//
// Where to start: routes (the route table Handler serves, which
// openapi.json describes), then node.go (what a node must answer), then
// data.go, topics.go and cluster.go (one handler per route) and errors.go
// (the sentinels). *actors.Node is the Node of a running
// broker; the NATS admin verbs (actors/admin.go) call the same methods and
// map their results to answers of their own.
package api

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/VictoriaMetrics/metrics"

	"github.com/naradmq/narad/actors/api/console"
	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/messages"
)

// Options are what the handlers need besides the node.
type Options struct {
	// Log gets a handler's panic, with its stack.
	Log *slog.Logger
	// Panics counts handler panics; nil counts nothing.
	Panics *metrics.Counter
	// Security turns on HTTP Basic and the permission checks of §2.1; off,
	// every request acts as root (§2.2).
	Security bool
	// Clock is the clock of the failed-attempt limit: the node clock
	// (actors/clock). Steady stamps when a produce was received, for the
	// latency the node measures on the same clock. Nil is the wall clock,
	// for each.
	Clock, Steady clock.Clock
	// MaxAuthFailureUsers bounds the usernames whose failed attempts are
	// remembered (at least 1); MaxAuthFailureSources the sources, a client
	// address with one username each (at least 1).
	MaxAuthFailureUsers, MaxAuthFailureSources int
	// NodeID labels the node's HTTP request counters; "" counts nothing.
	NodeID string
	// Metrics is the node's own metrics set: /metrics writes it, then the
	// process-wide default set (runtime, process, Dragonboat, transport).
	// Nil writes the default set alone.
	Metrics *metrics.Set
	// Faults, when not nil, serves /debug/faults (an admin's route):
	// narad serve --debug-faults. Nil leaves those paths unknown (404).
	Faults Faults
	// MaxBatchRecords and MaxBatchBytes bound the batch routes (batch.go):
	// the records or handles of one batch, and a batch request's body. 0
	// is DefaultMaxBatchRecords, DefaultMaxBatchBytes.
	MaxBatchRecords, MaxBatchBytes int
}

// handlers serve the routes of one node.
type handlers struct {
	node                           Node
	steady                         clock.Clock // Options.Steady or the wall
	maxBatchRecords, maxBatchBytes int
}

// Handler is the client API of api/CONTRACT.md over node. Go's ServeMux
// gives the contract's 404 and 405 (with Allow) for unknown paths and
// methods.
func Handler(node Node, opts Options) http.Handler {
	// HELP and TYPE lines on /metrics: process-wide, and the same for
	// every node of a process.
	metrics.ExposeMetadata(true)
	h := &handlers{node: node, steady: clock.Or(opts.Steady), maxBatchRecords: cmp.Or(opts.MaxBatchRecords, DefaultMaxBatchRecords),
		maxBatchBytes: cmp.Or(opts.MaxBatchBytes, DefaultMaxBatchBytes)}
	mux := h.mux(opts)
	var routes http.Handler = mux
	if opts.Security {
		// Auth runs before the mux, so an unknown path answers 401 (§1).
		routes = authenticate(node, newAttempts(clock.Or(opts.Clock).Now, max(opts.MaxAuthFailureSources, 1), max(opts.MaxAuthFailureUsers, 1)), mux)
	}
	return countRequests(opts.NodeID, opts.Metrics, mux, recoverPanics(opts, untilReady(node, routes)))
}

// A route is one pattern of the mux ("METHOD /path", as http.ServeMux
// reads it) and what serves it.
type route struct {
	pattern string
	serve   http.HandlerFunc
}

// routes is every route Handler serves but the fault switches (faults.go,
// outside the API). The mux registers this list and nothing else, and
// openapi_test.go holds it to openapi.json both ways, so a route cannot
// be served undescribed or described unserved.
func (h *handlers) routes(opts Options) []route {
	// The permission of §2.1 wraps each route; the create's name is in
	// its body, so createTopic checks it.
	return []route{
		{"GET /healthz", h.healthz},
		{"GET /readyz", h.readyz},
		{"GET /metrics", func(w http.ResponseWriter, r *http.Request) { writeMetrics(opts.Metrics, opts.NodeID, w, r) }},
		{"GET /v1/openapi.json", serveOpenAPI},
		{"POST /v1/topics", h.createTopic},
		{"GET /v1/topics", h.listTopics},
		{"GET /v1/topics/{topic}", h.getTopic},
		{"PATCH /v1/topics/{topic}", h.ownerOrAdmin(h.alterTopic)},
		{"DELETE /v1/topics/{topic}", h.ownerOrAdmin(h.deleteTopic)},
		{"POST /v1/topics/{topic}/children", h.ownerOrAdmin(h.attachChild)},
		{"GET /v1/topics/{topic}/children", h.children},
		{"DELETE /v1/topics/{topic}/children/{child}", h.ownerOrAdmin(h.detachChild)},
		{"POST /v1/topics/{topic}/produce", need(ActionProduce, h.produce)},
		{"GET /v1/topics/{topic}/consume", need(ActionConsume, h.consume)},
		{"POST /v1/topics/{topic}/ack", need(ActionConsume, h.ack)},
		{"POST /v1/topics/{topic}/produce/batch", need(ActionProduce, h.produceBatch)},
		{"GET /v1/topics/{topic}/consume/batch", need(ActionConsume, h.consumeBatch)},
		{"POST /v1/topics/{topic}/ack/batch", need(ActionConsume, h.ackBatch)},
		{"POST /v1/users", needAdmin(h.createUser)},
		{"GET /v1/users", needAdmin(h.listUsers)},
		{"GET /v1/users/{username}", needAdmin(h.getUser)},
		{"DELETE /v1/users/{username}", needAdmin(h.deleteUser)},
		{"PUT /v1/users/{username}/grants", needAdmin(h.setGrants)},
		{"PUT /v1/users/{username}/password", h.setPassword},
		{"GET /v1/cluster/members", h.members},
		{"GET /v1/cluster/version", h.clusterVersion},
		{"POST /v1/cluster/version", needAdmin(h.finalizeClusterVersion)},
		{"GET /v1/cluster/moves", h.moves},
		{"GET /v1/cluster/leaders", h.leaders},
		{"GET /v1/cluster/quarantine", h.setAside},
		{"POST /v1/cluster/quarantine/release", needAdmin(h.releaseSetAside)},
		{"GET /v1/whoami", h.whoami},
		{"POST /v1/cluster/moves/{topic}/{partition}/abort", needAdmin(h.abortMove)},
		{"POST /v1/cluster/members/{id}/decommission", needAdmin(h.decommission)},
		{"DELETE /v1/cluster/members/{id}/decommission", needAdmin(h.cancelDecommission)},
		{"POST /v1/cluster/members/{id}/forget", needAdmin(h.forget)},
	}
}

// mux routes the table of routes, and the fault switches when opts has
// them.
func (h *handlers) mux(opts Options) *http.ServeMux {
	mux := http.NewServeMux()
	for _, rt := range h.routes(opts) {
		mux.HandleFunc(rt.pattern, rt.serve)
	}
	// The console (actors/api/console): static files whose script calls the
	// routes of the table with the user's credentials.
	mux.Handle("GET "+console.Prefix, console.Handler())
	mux.Handle("GET /ui", http.RedirectHandler(console.Prefix, http.StatusFound))
	if opts.Faults != nil {
		faultRoutes(mux, opts.Faults)
	}
	return mux
}

// untilReady answers the client API 503 until node is ready: HTTP serves
// from process start (so /healthz answers during recovery), but the
// metastore replica may still be catching up and the actors not running.
// A node that left the cluster answers why, so a client that still has
// its address learns to drop it rather than retry.
func untilReady(node Health, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if why := node.LeftReason(); why != "" && strings.HasPrefix(r.URL.Path, "/v1/") {
			writeError(w, http.StatusServiceUnavailable, why)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/v1/") && !node.Ready() && !node.Stopping() {
			writeError(w, http.StatusServiceUnavailable, "node is starting; retry later")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// recoverPanics answers a handler panic as the contract says (500, a fixed
// body without a newline). The panic is not hidden: it is logged at error
// with its stack and counted.
func recoverPanics(opts Options, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			if opts.Log != nil {
				opts.Log.Error("http handler panicked", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			}
			if opts.Panics != nil {
				opts.Panics.Inc()
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"error":"internal server panic"}`)
		}()
		next.ServeHTTP(w, r)
	})
}

func (h *handlers) healthz(w http.ResponseWriter, _ *http.Request) {
	if h.node.Stopping() {
		writeJSON(w, http.StatusServiceUnavailable, messages.HealthBody{Status: "shutting down"})
		return
	}
	writeJSON(w, http.StatusOK, messages.HealthBody{Status: "ok"})
}

func (h *handlers) readyz(w http.ResponseWriter, _ *http.Request) {
	if why := h.node.LeftReason(); why != "" {
		writeError(w, http.StatusServiceUnavailable, why)
		return
	}
	if h.node.Leaving() && !h.node.Stopping() {
		writeError(w, http.StatusServiceUnavailable, "not ready: handing partitions off before stopping")
		return
	}
	if !h.node.Ready() || h.node.Stopping() {
		writeError(w, http.StatusServiceUnavailable, "not ready")
		return
	}
	if why := h.node.WriteFailure(); why != "" {
		writeError(w, http.StatusServiceUnavailable, "not ready: "+why)
		return
	}
	writeJSON(w, http.StatusOK, messages.HealthBody{Status: "ready"})
}

// writeMetrics serves the node's own set, then the default set: the Go
// runtime and process series, and dragonboat's raft transport series.
// The runtime and process series keep their standard names (go_goroutines,
// process_resident_memory_bytes: what every Go dashboard and alert reads)
// and get the node label the node's own series carry; every other series
// is named narad_ as the contract says, so dragonboat's get the prefix
// rather than being dropped. A HELP line gets its text from metricHelp
// (ExposeMetadata writes HELP and TYPE lines without one).
func writeMetrics(set *metrics.Set, node string, w http.ResponseWriter, _ *http.Request) {
	var buf bytes.Buffer
	if set != nil {
		set.WritePrometheus(&buf)
	}
	metrics.WritePrometheus(&buf, true)
	var out bytes.Buffer
	for line := range bytes.Lines(buf.Bytes()) {
		rest := line
		help := bytes.HasPrefix(line, []byte("# HELP "))
		meta := help || bytes.HasPrefix(line, []byte("# TYPE "))
		if meta {
			out.Write(line[:7])
			rest = line[7:]
		}
		switch {
		case rest[0] == '#' || bytes.HasPrefix(rest, []byte("narad_")):
		case bytes.HasPrefix(rest, []byte("go_")) || bytes.HasPrefix(rest, []byte("process_")):
			if !meta {
				rest = withNodeLabel(rest, node)
			}
		default:
			out.WriteString("narad_")
		}
		if name := string(bytes.TrimSpace(rest)); help && metricHelp[name] != "" {
			out.WriteString(name + " " + metricHelp[name] + "\n")
			continue
		}
		out.Write(rest)
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	w.Header().Set("Content-Length", strconv.Itoa(out.Len()))
	w.Write(out.Bytes())
}

// withNodeLabel adds node="..." to a sample line's labels; a line is
// returned as it is when node is "" (a handler of no node's).
func withNodeLabel(sample []byte, node string) []byte {
	if node == "" {
		return sample
	}
	label := fmt.Sprintf("node=%q", node)
	end := bytes.IndexAny(sample, "{ ")
	if end < 0 {
		return sample
	}
	out := make([]byte, 0, len(sample)+len(label)+3)
	out = append(out, sample[:end]...)
	if sample[end] == '{' {
		out = append(out, '{')
		out = append(out, label...)
		if sample[end+1] != '}' {
			out = append(out, ',')
		}
		return append(out, sample[end+1:]...)
	}
	out = append(out, '{')
	out = append(out, label...)
	out = append(out, '}')
	return append(out, sample[end:]...)
}

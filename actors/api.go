package actors

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// maxRequestBytes is the API's cap on every request body (1 MiB).
const maxRequestBytes = 1 << 20

var topicNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,255}$`)

func validTopicName(s string) bool { return topicNameRE.MatchString(s) && s != "." && s != ".." }

// routes builds the client API of api/CONTRACT.md. Go's ServeMux gives the
// contract's 404 and 405 (with Allow) for unknown paths and methods.
func (n *Node) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", n.healthz)
	mux.HandleFunc("GET /readyz", n.readyz)
	mux.HandleFunc("GET /metrics", writeMetrics)
	mux.HandleFunc("POST /v1/topics", n.createTopic)
	mux.HandleFunc("GET /v1/topics", n.listTopics)
	mux.HandleFunc("GET /v1/topics/{topic}", n.getTopic)
	mux.HandleFunc("PATCH /v1/topics/{topic}", n.alterTopic)
	mux.HandleFunc("DELETE /v1/topics/{topic}", n.deleteTopic)
	mux.HandleFunc("POST /v1/topics/{topic}/produce", n.produce)
	mux.HandleFunc("GET /v1/topics/{topic}/consume", n.consume)
	mux.HandleFunc("POST /v1/topics/{topic}/ack", n.ack)
	mux.HandleFunc("GET /v1/cluster/members", n.members)
	mux.HandleFunc("GET /v1/cluster/moves", n.moves)
	mux.HandleFunc("POST /v1/cluster/moves/{topic}/{partition}/abort", n.abortMoveHTTP)
	mux.HandleFunc("POST /v1/cluster/members/{id}/decommission", n.decommission)
	mux.HandleFunc("DELETE /v1/cluster/members/{id}/decommission", n.cancelDecommission)
	return n.recoverPanics(n.untilReady(mux))
}

// untilReady answers the client API 503 until the node is ready: HTTP
// serves from process start (so /healthz answers during recovery), but the
// metastore replica may still be catching up and the actors not running.
func (n *Node) untilReady(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/") && !n.ready.Load() && !n.stopping.Load() {
			writeError(w, http.StatusServiceUnavailable, "node is starting; retry later")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// recoverPanics answers a handler panic as the contract says (500, a fixed
// body without a newline). The panic is not hidden: it is logged at error
// with its stack and counted.
func (n *Node) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				n.log.Error("http handler panicked", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				n.metrics.httpPanics.Inc()
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusInternalServerError)
				io.WriteString(w, `{"error":"internal server panic"}`)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	// No HTML escaping: a payload is embedded verbatim, and "<" must not
	// come back as "\u003c".
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	b := []byte(`{"error":"encode failed"}` + "\n")
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
	} else {
		b = buf.Bytes() // Encode ends the value with the newline the contract wants
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, messages.ErrorBody{Error: msg})
}

func (n *Node) healthz(w http.ResponseWriter, _ *http.Request) {
	if n.stopping.Load() {
		writeJSON(w, http.StatusServiceUnavailable, messages.HealthBody{Status: "shutting down"})
		return
	}
	writeJSON(w, http.StatusOK, messages.HealthBody{Status: "ok"})
}

func (n *Node) readyz(w http.ResponseWriter, _ *http.Request) {
	if !n.ready.Load() || n.stopping.Load() {
		writeError(w, http.StatusServiceUnavailable, "not ready")
		return
	}
	writeJSON(w, http.StatusOK, messages.HealthBody{Status: "ready"})
}

// readBody reads a request body of at most maxRequestBytes; tooLarge
// reports a larger one.
func readBody(r *http.Request) (body []byte, tooLarge bool, err error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBytes+1))
	if err != nil {
		return nil, false, err
	}
	if len(b) > maxRequestBytes {
		return nil, true, nil
	}
	return b, false, nil
}

// decodeStrict decodes exactly one JSON value, refusing unknown fields.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid json: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("invalid json: more than one JSON value")
	}
	return nil
}

// topicOr404 looks up the path's topic on the local replica and answers
// 404 when it does not exist.
func (n *Node) topicOr404(w http.ResponseWriter, r *http.Request) (messages.Topic, bool) {
	t, ok := n.store.Topic(r.PathValue("topic"))
	if !ok {
		writeError(w, http.StatusNotFound, "topic not found")
	}
	return t, ok
}

// request sends a message to an actor and waits for its answer.
func (n *Node) request(pid *actor.PID, msg any) (any, error) {
	res, err := n.system.Root.RequestFuture(pid, msg, n.cfg.RequestTimeout).Result()
	if err != nil {
		return nil, fmt.Errorf("%T to %s: %w: %w", msg, pid.Id, err, ErrUnavailable)
	}
	return res, nil
}

// singleQuery returns a query parameter that may appear at most once.
func singleQuery(r *http.Request, name string) (string, bool, error) {
	vs, ok := r.URL.Query()[name]
	if !ok {
		return "", false, nil
	}
	if len(vs) > 1 {
		return "", true, fmt.Errorf("invalid argument: %s given more than once", name)
	}
	return vs[0], true, nil
}

// parseWait parses a Go duration; a bare number other than 0 is refused.
func parseWait(s string) (time.Duration, error) {
	if s == "" || s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid argument: wait %q is not a duration", s)
	}
	return d, nil
}

// encodePayload follows the contract: valid JSON verbatim, else valid
// UTF-8 as a JSON string, else base64.
func encodePayload(b []byte) (json.RawMessage, string) {
	if json.Valid(b) {
		return json.RawMessage(b), ""
	}
	if utf8.Valid(b) {
		s, _ := json.Marshal(string(b))
		return s, ""
	}
	s, _ := json.Marshal(b) // []byte marshals as standard base64
	return s, "base64"
}

func messageOf(topic string, d messages.Delivery, withHandle bool) messages.MessageInfo {
	p, enc := encodePayload(d.Body)
	m := messages.MessageInfo{Topic: topic, Partition: d.Partition, Offset: d.Offset, Key: string(d.Key),
		Payload: p, PayloadEncoding: enc, Timestamp: time.Unix(0, d.Time).Unix()}
	if withHandle {
		m.ReceiptHandle = fmt.Sprintf("%d:%d:%d", d.Partition, d.Offset, d.Nonce)
	}
	return m
}

// parseHandle parses <partition>:<offset>:<nonce>.
func parseHandle(s string) (partition int, offset int64, nonce uint64, ok bool) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return 0, 0, 0, false
	}
	for _, p := range parts {
		if p == "" || strings.TrimLeft(p, "0123456789") != "" {
			return 0, 0, 0, false
		}
	}
	p, err1 := strconv.Atoi(parts[0])
	o, err2 := strconv.ParseInt(parts[1], 10, 64)
	nc, err3 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || nc == 0 {
		return 0, 0, 0, false
	}
	return p, o, nc, true
}

// writeMetrics serves the default metrics set. It also holds dragonboat's
// raft transport series; the contract names every series narad_, so those
// get the prefix rather than being dropped.
func writeMetrics(w http.ResponseWriter, _ *http.Request) {
	var buf bytes.Buffer
	metrics.WritePrometheus(&buf, false)
	var out bytes.Buffer
	for line := range bytes.Lines(buf.Bytes()) {
		rest := line
		if bytes.HasPrefix(line, []byte("# HELP ")) || bytes.HasPrefix(line, []byte("# TYPE ")) {
			out.Write(line[:7])
			rest = line[7:]
		}
		if rest[0] != '#' && !bytes.HasPrefix(rest, []byte("narad_")) {
			out.WriteString("narad_")
		}
		out.Write(rest)
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	w.Header().Set("Content-Length", strconv.Itoa(out.Len()))
	w.Write(out.Bytes())
}

// membersView is the member records of the local replica, with the
// partitions each owns and the moves out of it: what GET
// /v1/cluster/members and the admin "members" verb answer.
func (n *Node) membersView() []messages.MemberInfo {
	out := []messages.MemberInfo{}
	for _, m := range n.store.Members() {
		owned := n.store.OwnedBy(m.ID)
		moving := 0
		for _, a := range owned {
			if a.Target != "" {
				moving++
			}
		}
		out = append(out, messages.MemberInfo{ID: m.ID, Addr: m.HTTPAddr, Status: m.Status, Draining: m.Draining,
			OwnedPartitions: len(owned), OutboundMoves: moving})
	}
	return out
}

func (n *Node) members(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, messages.MemberList{Members: n.membersView()})
}

// movesView is every partition with a target in the local replica, by
// topic then partition: what GET /v1/cluster/moves and the admin "moves"
// verb answer. A target of an earlier incarnation of a topic name is left
// out: that topic is gone.
func (n *Node) movesView() messages.MoveList {
	out := messages.MoveList{Moves: []messages.MoveInfo{}}
	for _, a := range n.store.Moving() {
		if t, ok := n.store.Topic(a.Topic); ok && t.Incarnation == a.Incarnation {
			mv := messages.MoveInfo{Topic: a.Topic, Partition: a.Partition, From: a.Owner, To: a.Target,
				FromStatus: n.sideStatus(a.Owner), ToStatus: n.sideStatus(a.Target)}
			mv.Blocked = movesBlockedReasons(mv.FromStatus, mv.ToStatus)
			out.Moves = append(out.Moves, mv)
		}
	}
	slices.SortFunc(out.Moves, func(a, b messages.MoveInfo) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

func (n *Node) moves(w http.ResponseWriter, r *http.Request) {
	out := n.movesView()
	if r.URL.Query().Get("detail") == "1" {
		n.addProgress(r.Context(), out.Moves)
	}
	writeJSON(w, http.StatusOK, out)
}

// sideStatus is a move side's status for the listing: alive, dead,
// draining, or not_a_member.
func (n *Node) sideStatus(id string) string {
	m, ok := n.store.Member(id)
	switch {
	case !ok:
		return "not_a_member"
	case m.Status == messages.MemberDead:
		return "dead"
	case m.Draining:
		return "draining"
	}
	return "alive"
}

// movesBlockedReasons says why a move might need an abort (rule T5).
func movesBlockedReasons(from, to string) []string {
	var out []string
	if from == "dead" || from == "not_a_member" {
		out = append(out, "source_dead")
	}
	switch to {
	case "dead":
		out = append(out, "target_dead")
	case "not_a_member":
		out = append(out, "target_not_member")
	}
	return out
}

// addProgress asks each destination for its workers' progress (its
// "moves" service, or this node's runner) and attaches it to the moves.
func (n *Node) addProgress(ctx context.Context, moves []messages.MoveInfo) {
	byNode := map[string][]messages.MoveProgress{}
	for _, mv := range moves {
		if _, asked := byNode[mv.To]; asked {
			continue
		}
		byNode[mv.To] = n.progressOf(ctx, mv.To)
	}
	for i := range moves {
		for _, p := range byNode[moves[i].To] {
			if p.Topic == moves[i].Topic && p.Partition == moves[i].Partition {
				moves[i].Progress = &p
			}
		}
	}
}

// progressOf is node id's report of the moves it runs; nil when it
// cannot be asked.
func (n *Node) progressOf(ctx context.Context, id string) []messages.MoveProgress {
	if id == n.cfg.NodeID || n.nats == nil {
		res, err := n.request(n.mover, getMoveProgress{})
		if err != nil {
			return nil
		}
		return res.([]messages.MoveProgress)
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
	defer cancel()
	var out []messages.MoveProgress
	if err := transport.RequestJSON(ctx, n.nats, id, movesService, struct{}{}, &out); err != nil {
		return nil
	}
	return out
}

// movesService answers a node's move progress to its peers.
const movesService = "moves"

func (n *Node) serveMoves() error {
	return transport.HandleJSON(n.nats, movesService, func(context.Context, string, struct{}) ([]messages.MoveProgress, error) {
		res, err := n.request(n.mover, getMoveProgress{})
		if err != nil {
			return nil, transport.Errorf(transport.StatusTimeout, "move progress: %v", err)
		}
		return res.([]messages.MoveProgress), nil
	})
}

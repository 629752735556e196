package actors

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// Defaults of the API contract for a create that leaves a field at 0.
const (
	defaultVisibilityMs   = 30_000
	defaultMaxInFlight    = 1024
	defaultMaxAckedAhead  = 1024
	minRetentionMs        = 3_600_000
	defaultTopicListLimit = 100
	maxTopicListLimit     = 1000
	maxFanoutDelayMs      = 31_536_000_000
)

// topicOf is t's record as the API shows it; role is "" only in the answer
// to a create, as the contract says.
func topicOf(t messages.Topic, role string) messages.TopicInfo {
	return messages.TopicInfo{Name: t.Name, Partitions: t.Partitions, RetentionMs: t.RetentionMs,
		VisibilityTimeoutMs: t.VisibilityTimeoutMs, MaxInFlightPerPartition: t.MaxInFlightPerPartition,
		MaxAckedAheadPerPartition: t.MaxAckedAheadPerPartition, CreatedAt: t.CreatedAt, Role: role}
}

// metastoreError maps a metastore failure to the contract's status and text.
func metastoreError(w http.ResponseWriter, err error, op string) {
	switch {
	case errors.Is(err, metastore.ErrExists):
		writeError(w, http.StatusConflict, "topic already exists")
	case errors.Is(err, metastore.ErrNotFound):
		writeError(w, http.StatusNotFound, "topic not found")
	case errors.Is(err, metastore.ErrInvalid):
		writeError(w, http.StatusBadRequest, "invalid argument: "+err.Error())
	case errors.Is(err, metastore.ErrUnavailable):
		writeError(w, http.StatusServiceUnavailable, "control plane temporarily unavailable")
	default:
		writeError(w, http.StatusInternalServerError, op+" failed")
	}
}

// readJSON reads a topic request body strictly into v; on false it has
// answered 413 (past 1 MiB) or 400.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	body, tooLarge, err := readBody(r)
	switch {
	case tooLarge:
		writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
	case err != nil:
		writeError(w, http.StatusBadRequest, "invalid json: "+err.Error())
	default:
		if err := decodeStrict(body, v); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return false
		}
		return true
	}
	return false
}

func hasSchema(s json.RawMessage) bool { return len(s) > 0 && string(s) != "null" }

func (n *Node) createTopic(w http.ResponseWriter, r *http.Request) {
	var req messages.CreateTopicRequest
	if !readJSON(w, r, &req) {
		return
	}
	t, msg := n.resolveCreate(req)
	if msg != "" {
		writeError(w, http.StatusBadRequest, "invalid argument: "+msg)
		return
	}
	if req.Parent != "" {
		if _, ok := n.store.Topic(req.Parent); !ok {
			writeError(w, http.StatusNotFound, "parent topic not found")
			return
		}
		writeError(w, http.StatusBadRequest, "invalid argument: fan-out children are not supported by this broker yet")
		return
	}
	rep, err := n.askController(r.Context(), messages.ControllerRequest{CreateTopic: &t})
	if err != nil {
		metastoreError(w, err, "create topic")
		return
	}
	n.servePlaced(r.Context(), rep.Topic)
	writeJSON(w, http.StatusCreated, topicOf(rep.Topic, ""))
}

// resolveCreate applies the contract's defaults and limits; a non-empty
// message is the reason for a 400.
func (n *Node) resolveCreate(req messages.CreateTopicRequest) (messages.Topic, string) {
	t := messages.Topic{Name: req.Name, Partitions: req.Partitions, RetentionMs: orZero(req.RetentionMs),
		VisibilityTimeoutMs: orZero(req.VisibilityTimeoutMs), MaxInFlightPerPartition: orZero(req.MaxInFlightPerPartition),
		MaxAckedAheadPerPartition: orZero(req.MaxAckedAheadPerPartition), CreatedAt: time.Now().Unix()}
	delay := orZero(req.FanoutDelayMs)
	switch {
	case !validTopicName(req.Name):
		return messages.Topic{}, "invalid topic name"
	case req.Partitions < 0:
		return messages.Topic{}, "partitions must not be negative"
	case t.RetentionMs < 0 || t.VisibilityTimeoutMs < 0 || t.MaxInFlightPerPartition < 0 || t.MaxAckedAheadPerPartition < 0:
		return messages.Topic{}, "negative values are not allowed"
	case delay != 0 && req.Parent == "":
		return messages.Topic{}, "fanout_delay_ms needs parent"
	case delay < 0 || delay > maxFanoutDelayMs:
		return messages.Topic{}, "fanout_delay_ms must be between 0 and 31536000000 (1 year)"
	case req.Parent == req.Name && req.Parent != "":
		return messages.Topic{}, "a topic cannot be its own parent"
	}
	if t.Partitions == 0 {
		t.Partitions = n.cfg.TopicDefaultPartitions
	}
	if t.Partitions < 3 || t.Partitions > n.cfg.TopicMaxPartitions {
		return t, "partitions must be between 3 and " + strconv.Itoa(n.cfg.TopicMaxPartitions)
	}
	if t.RetentionMs == 0 {
		t.RetentionMs = n.cfg.TopicDefaultRetention.Milliseconds()
	}
	if t.RetentionMs != 0 && t.RetentionMs < minRetentionMs {
		return t, "retention_ms must be 0 or at least 3600000 (1h)"
	}
	if t.VisibilityTimeoutMs == 0 {
		t.VisibilityTimeoutMs = defaultVisibilityMs
	}
	if t.MaxInFlightPerPartition == 0 {
		t.MaxInFlightPerPartition = defaultMaxInFlight
	}
	if t.MaxAckedAheadPerPartition == 0 {
		t.MaxAckedAheadPerPartition = defaultMaxAckedAhead
	}
	if hasSchema(req.Schema) {
		if _, err := compileSchema(req.Schema); err != nil {
			return t, err.Error()
		}
		t.Schemas = []json.RawMessage{req.Schema}
	}
	return t, ""
}

// orZero reads an optional number of a create: absent, null and 0 all
// mean "the default", as in Narad.
func orZero(v *int64) int64 {
	if v == nil {
		return 0
	}
	return *v
}

// servePlaced returns once this node's replica has the placement the
// controller just made and the partitions placed here have running actors,
// so a client can use the topic through this node as soon as the create is
// answered (other nodes spawn theirs within milliseconds). Failing that,
// the partitions supervisor catches up on its own: the answer stands.
func (n *Node) servePlaced(ctx context.Context, t messages.Topic) {
	if err := n.store.CatchUp(ctx); err != nil {
		n.log.Warn("catch up with a placement", "topic", t.Name, "err", err)
	}
	if _, err := n.request(n.partitions, reconcilePartitions{}); err != nil {
		n.log.Warn("reconcile after placing partitions", "topic", t.Name, "err", err)
	}
}

// notServedYet reports an owner that answered but has no actor for the
// partition yet, as opposed to an owner that cannot be reached.
func notServedYet(err error) bool {
	var re *transport.RemoteError
	return errors.Is(err, actor.ErrDeadLetter) || (errors.As(err, &re) && re.Status == transport.StatusUnavailable)
}

func (n *Node) listTopics(w http.ResponseWriter, r *http.Request) {
	limit := defaultTopicListLimit
	if v, ok := r.URL.Query()["limit"]; ok {
		l, err := strconv.Atoi(v[0])
		if err != nil || l < 1 {
			writeError(w, http.StatusBadRequest, "limit must be a positive integer")
			return
		}
		limit = min(l, maxTopicListLimit)
	}
	after := r.URL.Query().Get("page_token")
	all := n.store.Topics()
	i := sort.Search(len(all), func(i int) bool { return all[i].Name > after })
	page := []messages.TopicInfo{}
	next := ""
	for ; i < len(all) && len(page) < limit; i++ {
		page = append(page, topicOf(all[i], "standalone"))
	}
	if i < len(all) && len(page) > 0 {
		next = page[len(page)-1].Name
	}
	writeJSON(w, http.StatusOK, messages.TopicPage{Topics: page, NextPageToken: next})
}

func (n *Node) getTopic(w http.ResponseWriter, r *http.Request) {
	t, ok := n.topicOr404(w, r)
	if !ok {
		return
	}
	only := -1
	if v, ok := r.URL.Query()["partition"]; ok {
		p, err := strconv.Atoi(v[0])
		if err != nil || p < 0 || p >= t.Partitions {
			writeError(w, http.StatusBadRequest, "invalid partition")
			return
		}
		only = p
	}
	out := messages.TopicDetails{TopicInfo: topicOf(t, "standalone"), PartitionStats: []messages.PartitionInfo{}}
	for _, a := range n.store.Assignments(t.Incarnation, t.Partitions) {
		if only >= 0 && a.Partition != only {
			continue
		}
		// Stats come from each owner, this node or a peer; an owner that
		// cannot be reached fails the request, as the contract says.
		ps := messages.PartitionInfo{Index: a.Partition, OwnerNode: a.Owner}
		k := messages.PartitionKey{Topic: t.Name, Incarnation: t.Incarnation, Partition: a.Partition}
		res, err := n.ask(r.Context(), k, &messages.GetStats{})
		if notServedYet(err) {
			// The owner has not started the partition yet (a create moments
			// ago): the entry is left out, and clients poll until every
			// partition has one, as the contract describes.
			continue
		}
		st, isStats := res.(*messages.PartitionStats)
		if err != nil || !isStats {
			writeError(w, http.StatusInternalServerError, "partition stats failed")
			return
		}
		ps.Segments, ps.OldestOffset, ps.NextOffset = st.Segments, st.OldestOffset, st.NextOffset
		ps.HighWatermark, ps.SizeBytes, ps.OldestSegmentAt = st.HighWatermark, st.SizeBytes, st.OldestSegmentAt
		out.PartitionStats = append(out.PartitionStats, ps)
	}
	sort.Slice(out.PartitionStats, func(i, j int) bool { return out.PartitionStats[i].Index < out.PartitionStats[j].Index })
	writeJSON(w, http.StatusOK, out)
}

// alterTopic applies retention, caps, partitions and schema in that order
// without a transaction, as the contract says: a later step that fails
// leaves the earlier ones applied.
func (n *Node) alterTopic(w http.ResponseWriter, r *http.Request) {
	var req messages.AlterTopicRequest
	if !readJSON(w, r, &req) {
		return
	}
	if req.Partitions == nil && req.RetentionMs == nil && req.MaxInFlightPerPartition == nil && req.MaxAckedAheadPerPartition == nil && !hasSchema(req.Schema) {
		writeError(w, http.StatusBadRequest, "invalid argument: no field to change")
		return
	}
	t, ok := n.topicOr404(w, r)
	if !ok {
		return
	}
	alter := messages.AlterTopic{Name: t.Name}
	fail := func(msg string) {
		if alter.RetentionMs != nil || alter.MaxInFlightPerPartition != nil || alter.MaxAckedAheadPerPartition != nil || alter.Partitions != 0 {
			if _, err := n.applyAlter(r, t, alter); err != nil {
				metastoreError(w, err, "alter topic")
				return
			}
		}
		writeError(w, http.StatusBadRequest, "invalid argument: "+msg)
	}
	if v := req.RetentionMs; v != nil {
		ret := *v
		if ret == 0 {
			ret = n.cfg.TopicDefaultRetention.Milliseconds()
		}
		if ret < 0 || (ret != 0 && ret < minRetentionMs) {
			fail("retention_ms must be 0 or at least 3600000 (1h)")
			return
		}
		alter.RetentionMs = &ret
	}
	for _, c := range []struct {
		in  *int64
		out **int64
		def int64
	}{{req.MaxInFlightPerPartition, &alter.MaxInFlightPerPartition, defaultMaxInFlight}, {req.MaxAckedAheadPerPartition, &alter.MaxAckedAheadPerPartition, defaultMaxAckedAhead}} {
		if c.in == nil {
			continue
		}
		v := *c.in
		if v < 0 {
			fail("caps must not be negative")
			return
		}
		if v == 0 {
			v = c.def
		}
		*c.out = &v
	}
	if p := req.Partitions; p != nil && *p != 0 {
		if *p < 0 || *p <= t.Partitions || *p > n.cfg.TopicMaxPartitions {
			fail("partitions may only grow, up to " + strconv.Itoa(n.cfg.TopicMaxPartitions))
			return
		}
		alter.Partitions = *p
	}
	if hasSchema(req.Schema) {
		if _, err := compileSchema(req.Schema); err != nil {
			fail(err.Error())
			return
		}
		if len(t.Schemas) > 0 {
			if err := schemaCompatible(t.Schemas[len(t.Schemas)-1], req.Schema); err != nil {
				fail("incompatible schema: " + err.Error())
				return
			}
		}
		alter.AddSchema = req.Schema
	}
	altered, err := n.applyAlter(r, t, alter)
	if err != nil {
		metastoreError(w, err, "alter topic")
		return
	}
	writeJSON(w, http.StatusOK, topicOf(altered, "standalone"))
}

// applyAlter stores an alter of t and places the partitions it added. A
// failed later step still applies the earlier ones, a grow included, so
// this is the only way an alter is stored: grown partitions without
// assignments would have no owner to commit or serve them.
func (n *Node) applyAlter(r *http.Request, t messages.Topic, alter messages.AlterTopic) (messages.Topic, error) {
	altered, err := n.store.AlterTopic(r.Context(), alter)
	if err != nil {
		return altered, err
	}
	if altered.Partitions > t.Partitions {
		if _, err := n.askController(r.Context(), messages.ControllerRequest{PlaceTopic: altered.Name}); err != nil {
			return altered, err
		}
		n.servePlaced(r.Context(), altered)
	}
	return altered, nil
}

func (n *Node) deleteTopic(w http.ResponseWriter, r *http.Request) {
	deleted, err := n.store.DeleteTopic(r.Context(), r.PathValue("topic"))
	if err != nil {
		metastoreError(w, err, "delete topic")
		return
	}
	if err := n.store.DeleteAssignments(r.Context(), deleted.Incarnation, deleted.Partitions); err != nil {
		metastoreError(w, err, "delete topic")
		return
	}
	// The local partitions stop and their data goes before the answer, so
	// a create of the same name right after starts from offset 0.
	if _, err := n.request(n.partitions, reconcilePartitions{}); err != nil {
		n.log.Warn("reconcile after deleting a topic", "topic", deleted.Name, "err", err)
	}
	w.WriteHeader(http.StatusNoContent)
}

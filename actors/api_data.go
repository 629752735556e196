package actors

import (
	"context"
	"errors"
	"hash/fnv"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// partitionForKey is the contract's FNV-1a 32 of the key, mod partitions.
func partitionForKey(key string, partitions int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(partitions))
}

func limitsOf(t messages.Topic) messages.ConsumeLimits {
	return messages.ConsumeLimits{Visibility: msDuration(t.VisibilityTimeoutMs),
		MaxInFlight: t.MaxInFlightPerPartition, MaxAckedAhead: t.MaxAckedAheadPerPartition}
}

// produce: authorization, query parsing, body read, topic lookup, in that
// order (the contract's check order), then the ingress WAL: 202 only once
// the record is fsynced there.
func (n *Node) produce(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if n.draining() {
		// rule D6: a node being decommissioned takes no new records, so
		// its ingress WAL only shrinks; clients retry on another node.
		writeError(w, http.StatusServiceUnavailable, "node is being decommissioned; produce to another node")
		return
	}
	if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
		writeError(w, http.StatusBadRequest, "invalid argument: "+err.Error())
		return
	}
	key, _, err := singleQuery(r, "key")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	partStr, hasPart, err := singleQuery(r, "partition")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	partition := -1
	if hasPart {
		p, err := strconv.Atoi(partStr)
		if err != nil || p < 0 {
			writeError(w, http.StatusBadRequest, "invalid partition")
			return
		}
		partition = p
	}
	body, tooLarge, err := readBody(r)
	if tooLarge {
		writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid argument: "+err.Error())
		return
	}
	if len(body) == 0 {
		writeError(w, http.StatusBadRequest, "message required")
		return
	}
	t, ok := n.topicOr404(w, r)
	if !ok {
		return
	}
	if partition >= t.Partitions {
		writeError(w, http.StatusBadRequest, "invalid argument: partition out of range")
		return
	}
	if len(t.Schemas) > 0 {
		s, err := n.schemas.get(t.Incarnation, len(t.Schemas), t.Schemas[len(t.Schemas)-1])
		if err == nil {
			err = validateBody(s, body)
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid argument: "+err.Error())
			return
		}
	}
	if n.stopping.Load() {
		writeError(w, http.StatusServiceUnavailable, "node is shutting down")
		return
	}
	if held, _ := n.wal.Backlog(); held >= n.cfg.MaxBacklogRecords {
		writeError(w, http.StatusServiceUnavailable, "ingress backlog full; retry later")
		return
	}
	if key == "" {
		key = "key-" + strconv.FormatUint(n.keySeq.Add(1), 36)
	}
	if partition < 0 {
		partition = n.livePartition(t, partitionForKey(key, t.Partitions))
	}
	rec := storage.WALRecord{Topic: t.Name, Partition: int32(partition), Key: []byte(key), Body: body}
	// Detached from the request: a client that goes away must not leave a
	// record durable in the WAL that the dispatcher never heard of (it would
	// hold the WAL's watermark until the next restart).
	seq, err := n.wal.Append(context.WithoutCancel(r.Context()), rec)
	if err != nil {
		if errors.Is(err, storage.ErrFull) {
			writeError(w, http.StatusServiceUnavailable, "ingress queue full; retry later")
			return
		}
		if errors.Is(err, storage.ErrTooLarge) || errors.Is(err, storage.ErrInvalid) {
			writeError(w, http.StatusBadRequest, "invalid argument: "+err.Error())
			return
		}
		n.log.Error("ingress WAL append", "err", err)
		writeError(w, http.StatusServiceUnavailable, "produce failed")
		return
	}
	rec.Seq = seq
	n.system.Root.Send(n.dispatcher, &dispatch{rec: rec})
	n.metrics.produceSeconds.UpdateDuration(start)
	w.WriteHeader(http.StatusAccepted)
}

// livePartition keeps a keyed produce on its key's partition unless that
// partition's owner reads dead: then the next partition whose owner is
// alive takes it, giving up the key's order for availability, as the
// contract allows ("Narad may reroute around dead owners"). With every
// owner dead the key's partition is kept: the WAL holds the record until
// its owner returns.
func (n *Node) livePartition(t messages.Topic, p int) int {
	for i := 0; i < t.Partitions; i++ {
		q := (p + i) % t.Partitions
		owner := n.ownerOf(messages.PartitionKey{Topic: t.Name, Incarnation: t.Incarnation, Partition: q})
		if m, ok := n.store.Member(owner); ok && m.Status != messages.MemberDead {
			return q
		}
		if owner == n.cfg.NodeID {
			return q
		}
	}
	return p
}

// sibling is a partition of k's topic other than k whose owner is alive.
func (n *Node) sibling(k messages.PartitionKey) (messages.PartitionKey, bool) {
	t, ok := n.store.Topic(k.Topic)
	if !ok || t.Incarnation != k.Incarnation || t.Partitions < 2 {
		return k, false
	}
	to := n.livePartition(t, (k.Partition+1)%t.Partitions)
	if to == k.Partition {
		return k, false
	}
	return messages.PartitionKey{Topic: k.Topic, Incarnation: k.Incarnation, Partition: to}, true
}

func (n *Node) consume(w http.ResponseWriter, r *http.Request) {
	if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
		writeError(w, http.StatusBadRequest, "invalid argument: "+err.Error())
		return
	}
	q := r.URL.Query()
	partition, offset := -1, int64(-1)
	if v, ok := q["partition"]; ok {
		p, err := strconv.Atoi(v[0])
		if err != nil || p < 0 {
			writeError(w, http.StatusBadRequest, "invalid partition")
			return
		}
		partition = p
	}
	if v, ok := q["offset"]; ok {
		o, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil || o < 0 {
			writeError(w, http.StatusBadRequest, "invalid argument: offset must be a non-negative integer")
			return
		}
		if partition < 0 {
			writeError(w, http.StatusBadRequest, "invalid argument: offset needs partition")
			return
		}
		offset = o
	}
	wait, err := parseWait(q.Get("wait"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	wait = min(max(wait, 0), n.cfg.MaxConsumeWait)
	if q.Get("local_only") == "1" {
		wait = 0
	}
	t, ok := n.topicOr404(w, r)
	if !ok {
		return
	}
	if partition >= t.Partitions {
		writeError(w, http.StatusBadRequest, "invalid partition")
		return
	}
	if offset >= 0 {
		n.replay(w, r, t, partition, offset)
		return
	}
	n.pull(w, r, t, partition, wait)
}

func (n *Node) replay(w http.ResponseWriter, r *http.Request, t messages.Topic, partition int, offset int64) {
	k := messages.PartitionKey{Topic: t.Name, Incarnation: t.Incarnation, Partition: partition}
	res, err := n.ask(r.Context(), k, &messages.ReadAt{Offset: offset})
	rr, ok := res.(*messages.Reserved)
	if err != nil || !ok {
		writeError(w, http.StatusServiceUnavailable, "partition unavailable; retry later")
		return
	}
	switch rr.Status {
	case messages.StatusOK:
		writeJSON(w, http.StatusOK, messageOf(t.Name, rr.Delivery, false))
	case messages.StatusEmpty:
		w.WriteHeader(http.StatusNoContent)
	case messages.StatusGone:
		// The contract gives an aged-out offset the stale-handle text (§13).
		writeError(w, http.StatusGone, "receipt handle no longer matches an active reservation")
	case messages.StatusUnavailable:
		writeError(w, http.StatusServiceUnavailable, "partition unavailable; retry later")
	default:
		writeError(w, http.StatusInternalServerError, "consume failed")
	}
}

// pollRescan bounds how long a long poll sleeps without looking again: a
// lease that expires makes a record deliverable without any commit.
const pollRescan = 200 * time.Millisecond

// pull is queue mode: reserve one record from the first partition, in a
// rotating order, that has one; wait for a commit up to the wait budget.
func (n *Node) pull(w http.ResponseWriter, r *http.Request, t messages.Topic, only int, wait time.Duration) {
	deadline := time.Now().Add(wait)
	limits := limitsOf(t)
	for {
		woken := n.notifier.wait(t.Name)
		parts := []int{only}
		if only < 0 {
			start := int(n.rotor.Add(1) % uint64(t.Partitions))
			parts = make([]int, t.Partitions)
			for i := range parts {
				parts[i] = (start + i) % t.Partitions
			}
		}
		for _, p := range parts {
			k := messages.PartitionKey{Topic: t.Name, Incarnation: t.Incarnation, Partition: p}
			res, err := n.ask(r.Context(), k, &messages.Reserve{Limits: limits})
			rr, ok := res.(*messages.Reserved)
			if err != nil || !ok || rr.Status != messages.StatusOK {
				continue
			}
			writeJSON(w, http.StatusOK, messageOf(t.Name, rr.Delivery, true))
			return
		}
		left := time.Until(deadline)
		if left <= 0 {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		timer := time.NewTimer(min(left, pollRescan))
		select {
		case <-woken:
		case <-timer.C:
		case <-r.Context().Done():
			timer.Stop()
			return
		}
		timer.Stop()
	}
}

func (n *Node) ack(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid argument: "+err.Error())
		return
	}
	handle := ""
	if vs := q["receipt_handle"]; len(vs) > 0 {
		handle = vs[0]
	}
	if handle == "" {
		writeError(w, http.StatusBadRequest, "receipt_handle required")
		return
	}
	partition, offset, nonce, ok := parseHandle(handle)
	if !ok {
		writeError(w, http.StatusBadRequest, "receipt handle is malformed")
		return
	}
	action := messages.LeaseAck
	switch q.Get("extend") {
	case "", "false":
	case "true", "1":
		action = messages.LeaseExtend
	case "0":
		action = messages.LeaseNack
	default:
		writeError(w, http.StatusBadRequest, "invalid argument: extend must be true, 1, 0 or false")
		return
	}
	t, ok := n.topicOr404(w, r)
	if !ok {
		return
	}
	if partition >= t.Partitions {
		writeError(w, http.StatusGone, "receipt handle no longer matches an active reservation")
		return
	}
	k := messages.PartitionKey{Topic: t.Name, Incarnation: t.Incarnation, Partition: partition}
	res, err := n.ask(r.Context(), k, &messages.Lease{Action: action, Offset: offset, Nonce: nonce, Limits: limitsOf(t)})
	lr, isLease := res.(*messages.LeaseResult)
	if err != nil || !isLease {
		writeError(w, http.StatusServiceUnavailable, "partition unavailable; retry later")
		return
	}
	switch lr.Status {
	case messages.StatusOK:
		w.WriteHeader(http.StatusNoContent)
	case messages.StatusGone:
		writeError(w, http.StatusGone, "receipt handle no longer matches an active reservation")
	case messages.StatusFull:
		writeError(w, http.StatusServiceUnavailable, "acked-ahead set is full; head of queue may be stuck")
	default:
		writeError(w, http.StatusServiceUnavailable, "partition unavailable; retry later")
	}
}

package api

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/naradmq/narad/messages"
)

// produce checks in the contract's order: admission, query, body, then
// what the node checks (topic, partition, schema, room). 202 only once the
// record is durable in the node's ingress WAL.
func (h *handlers) produce(w http.ResponseWriter, r *http.Request) {
	received := h.steady.Now()
	if err := h.node.Admit(); err != nil {
		produceFailed(w, err)
		return
	}
	rec, bad := readRecord(r)
	if bad != nil {
		writeError(w, bad.status, bad.text)
		return
	}
	rec.Received = received
	if err := h.node.Produce(r.Context(), rec); err != nil {
		produceFailed(w, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// badRequest is a request refused before the node is asked.
type badRequest struct {
	status int
	text   string
}

func invalidRequest(text string) *badRequest {
	return &badRequest{status: http.StatusBadRequest, text: text}
}

// readRecord reads a produce's query and body.
func readRecord(r *http.Request) (Record, *badRequest) {
	rec := Record{Topic: r.PathValue("topic"), Partition: -1}
	if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
		return rec, invalidRequest("invalid argument: " + err.Error())
	}
	key, _, err := singleQuery(r, "key")
	if err != nil {
		return rec, invalidRequest(err.Error())
	}
	if !utf8.ValidString(key) {
		// A key is a string to consumers (§9's "key"): bytes that are not
		// UTF-8 would read back as U+FFFD, not as sent.
		return rec, invalidRequest("invalid argument: key is not valid UTF-8")
	}
	rec.Key = key
	partStr, hasPart, err := singleQuery(r, "partition")
	if err != nil {
		return rec, invalidRequest(err.Error())
	}
	if hasPart {
		p, err := strconv.Atoi(partStr)
		if err != nil || p < 0 {
			return rec, invalidRequest(textBadPartition)
		}
		rec.Partition = p
	}
	body, tooLarge, err := readBody(r)
	switch {
	case tooLarge:
		return rec, &badRequest{status: http.StatusRequestEntityTooLarge, text: textTooLarge}
	case err != nil:
		return rec, invalidRequest("invalid argument: " + err.Error())
	case len(body) == 0:
		return rec, invalidRequest("message required")
	}
	rec.Body = body
	return rec, nil
}

// produceAnswers are the answers to a refused produce.
var produceAnswers = []answer{
	{ErrDraining, http.StatusServiceUnavailable, "node is being decommissioned; produce to another node"},
	{ErrStopping, http.StatusServiceUnavailable, "node is shutting down"},
	{ErrBacklogFull, http.StatusServiceUnavailable, "ingress backlog full; retry later"},
	{ErrNoSpace, http.StatusServiceUnavailable, "no space left on this node's disk; produce to another node"},
	{ErrIngressFull, http.StatusServiceUnavailable, "ingress queue full; retry later"},
	{ErrNotFound, http.StatusNotFound, textTopicNotFound},
	{ErrDelayChild, http.StatusConflict, "topic is a fan-out child with a delay: produce to its parent"},
	{ErrNoSuchPartition, http.StatusBadRequest, "invalid argument: partition out of range"},
	{ErrTooLarge, http.StatusRequestEntityTooLarge, textTooLarge},
	{ErrInvalid, http.StatusBadRequest, ""},
}

// produceFailed answers a refused produce. Anything unforeseen is 503: the
// record is surely not accepted, so the client may send it again.
func produceFailed(w http.ResponseWriter, err error) {
	writeFailure(w, err, produceAnswers, http.StatusServiceUnavailable, "produce failed")
}

// consume is queue mode (a lease, with a handle) or, with partition and
// offset, a replay (no lease, no handle).
func (h *handlers) consume(w http.ResponseWriter, r *http.Request) {
	q, bad := readConsume(r)
	if bad != nil {
		writeError(w, bad.status, bad.text)
		return
	}
	var d messages.Delivery
	var ok bool
	var err error
	if q.offset >= 0 {
		d, ok, err = h.node.Replay(r.Context(), q.topic, q.partition, q.offset)
	} else {
		d, ok, err = h.node.Consume(r.Context(), q.topic, q.partition, q.wait)
	}
	switch {
	case err != nil:
		consumeFailed(w, r, err)
	case !ok:
		w.WriteHeader(http.StatusNoContent)
	default:
		writeMessage(w, messageOf(q.topic, d, q.offset < 0))
	}
}

// consumeQuery is what a consume asks for; partition and offset are -1
// when not given.
type consumeQuery struct {
	topic     string
	partition int
	offset    int64
	wait      time.Duration
}

func readConsume(r *http.Request) (consumeQuery, *badRequest) {
	c := consumeQuery{topic: r.PathValue("topic"), partition: -1, offset: -1}
	if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
		return c, invalidRequest("invalid argument: " + err.Error())
	}
	q := r.URL.Query()
	if v, ok := q["partition"]; ok {
		p, err := strconv.Atoi(v[0])
		if err != nil || p < 0 {
			return c, invalidRequest(textBadPartition)
		}
		c.partition = p
	}
	if v, ok := q["offset"]; ok {
		o, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil || o < 0 {
			return c, invalidRequest("invalid argument: offset must be a non-negative integer")
		}
		if c.partition < 0 {
			return c, invalidRequest("invalid argument: offset needs partition")
		}
		c.offset = o
	}
	wait, err := parseWait(q.Get("wait"))
	if err != nil {
		return c, invalidRequest(err.Error())
	}
	local, bad := queryFlag(q, "local_only")
	if bad != nil {
		return c, bad
	}
	if !local {
		c.wait = wait
	}
	return c, nil
}

// consumeAnswers are the answers to a failed consume or replay.
var consumeAnswers = []answer{
	{ErrNotFound, http.StatusNotFound, textTopicNotFound},
	{ErrNoSuchPartition, http.StatusBadRequest, textBadPartition},
	// The contract gives an aged-out offset the stale-handle text (§13).
	{ErrGone, http.StatusGone, textStaleHandle},
	{ErrBusy, http.StatusServiceUnavailable, textBusyPolls},
	{ErrUnavailable, http.StatusServiceUnavailable, "partition unavailable; retry later"},
}

// textBusyPolls is the 503 of a long poll past the node's cap on them.
const textBusyPolls = "too many consumes waiting on this node; retry later"

func consumeFailed(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && errors.Is(err, r.Context().Err()) {
		// The client went away during a long poll: nobody reads an answer.
		return
	}
	if errors.Is(err, ErrBusy) {
		retryAfter(w)
	}
	writeFailure(w, err, consumeAnswers, http.StatusInternalServerError, "consume failed")
}

// settleAnswers are the answers to a failed ack, extend or nack.
var settleAnswers = []answer{
	{ErrNotFound, http.StatusNotFound, textTopicNotFound},
	{ErrGone, http.StatusGone, textStaleHandle},
	{ErrAckedAheadFull, http.StatusServiceUnavailable, "acked-ahead set is full; head of queue may be stuck"},
}

// ack acks, extends or nacks by receipt handle. A malformed handle is
// refused before the topic is looked up, as the contract says.
func (h *handlers) ack(w http.ResponseWriter, r *http.Request) {
	handle, action, bad := readSettle(r)
	if bad != nil {
		writeError(w, bad.status, bad.text)
		return
	}
	if err := h.node.Settle(r.Context(), r.PathValue("topic"), handle, action); err != nil {
		writeFailure(w, err, settleAnswers, http.StatusServiceUnavailable, "partition unavailable; retry later")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// readSettle reads an ack's handle (the first, if several) and action.
func readSettle(r *http.Request) (Handle, messages.LeaseAction, *badRequest) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return Handle{}, 0, invalidRequest("invalid argument: " + err.Error())
	}
	raw := ""
	if vs := q["receipt_handle"]; len(vs) > 0 {
		raw = vs[0]
	}
	if raw == "" {
		return Handle{}, 0, invalidRequest("receipt_handle required")
	}
	handle, ok := parseHandle(raw)
	if !ok {
		return Handle{}, 0, invalidRequest("receipt handle is malformed")
	}
	// extend takes the spellings of every flag, but §10 gives "" the
	// meaning of false, and 0 (unlike false) its own: nack.
	v := q.Get("extend")
	switch on, ok := flagSpelling(v); {
	case v == "0":
		return handle, messages.LeaseNack, nil
	case v == "" || (ok && !on):
		return handle, messages.LeaseAck, nil
	case ok:
		return handle, messages.LeaseExtend, nil
	}
	return Handle{}, 0, invalidRequest("invalid argument: extend must be true, 1, 0 or false")
}

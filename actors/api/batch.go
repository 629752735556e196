package api

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/naradmq/narad/messages"
)

// The batch routes (issue 45), beside the contract's one-record routes: a
// produce of many records in one request, a consume of up to N leased
// records, an ack of many handles. Each record or handle is answered alone,
// with the status and text its one-record request would have got; a
// record refused does not hold back the others. The request itself is
// refused whole only when it cannot be read: a body past MaxBatchBytes
// (413), more than MaxBatchRecords records or handles (413), JSON that
// does not decode (400), or a node that takes no produce at all (503).

// Defaults of Options.MaxBatchRecords and Options.MaxBatchBytes.
const (
	DefaultMaxBatchRecords = 1000
	DefaultMaxBatchBytes   = 8 << 20
)

// Payload encodings of a batch record (messages.BatchRecord).
const (
	encodingJSON   = ""
	encodingText   = "text"
	encodingBase64 = "base64"
)

// produceBatch produces every record of the body; 200 with one result per
// record.
func (h *handlers) produceBatch(w http.ResponseWriter, r *http.Request) {
	received := h.steady.Now()
	if err := h.node.Admit(); err != nil {
		produceFailed(w, err)
		return
	}
	var req messages.ProduceBatchRequest
	if !h.readBatch(w, r, &req) {
		return
	}
	if h.tooMany(w, len(req.Records), "records") {
		return
	}
	out := messages.ProduceBatchResponse{Results: make([]messages.BatchResult, len(req.Records))}
	recs := make([]Record, 0, len(req.Records))
	at := make([]int, 0, len(req.Records))
	for i, br := range req.Records {
		rec, bad := batchRecord(br)
		if bad != nil {
			out.Results[i] = messages.BatchResult{Status: bad.status, Error: bad.text}
			continue
		}
		rec.Received = received
		recs = append(recs, rec)
		at = append(at, i)
	}
	if len(recs) > 0 {
		for j, err := range h.node.ProduceBatch(r.Context(), r.PathValue("topic"), recs) {
			res := messages.BatchResult{Status: http.StatusAccepted}
			if err != nil {
				res.Status, res.Error = failure(err, produceAnswers, http.StatusServiceUnavailable, "produce failed")
			} else {
				out.Accepted++
			}
			out.Results[at[j]] = res
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// batchRecord is one batch record as a Record, or why it is refused.
func batchRecord(br messages.BatchRecord) (Record, *badRequest) {
	rec := Record{Partition: -1, Key: br.Key}
	if !utf8.ValidString(br.Key) {
		return rec, invalidRequest("invalid argument: key is not valid UTF-8")
	}
	if br.Partition != nil {
		if *br.Partition < 0 {
			return rec, invalidRequest(textBadPartition)
		}
		rec.Partition = *br.Partition
	}
	if len(br.Payload) == 0 {
		return rec, invalidRequest("message required")
	}
	switch br.PayloadEncoding {
	case encodingJSON:
		rec.Body = br.Payload
	case encodingText, encodingBase64:
		var s string
		if err := json.Unmarshal(br.Payload, &s); err != nil {
			return rec, invalidRequest(fmt.Sprintf("invalid argument: a payload encoded %q must be a JSON string", br.PayloadEncoding))
		}
		rec.Body = []byte(s)
		if br.PayloadEncoding == encodingBase64 {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return rec, invalidRequest("invalid argument: payload is not standard base64: " + err.Error())
			}
			rec.Body = b
		}
	default:
		return rec, invalidRequest(fmt.Sprintf("invalid argument: payload_encoding %q: want text, base64 or none", br.PayloadEncoding))
	}
	switch {
	case len(rec.Body) == 0:
		return rec, invalidRequest("message required")
	case len(rec.Body) > MaxBodyBytes:
		return rec, &badRequest{status: http.StatusRequestEntityTooLarge, text: textTooLarge}
	}
	return rec, nil
}

// consumeBatch leases up to max records (the max query parameter, 1 to
// MaxBatchRecords); 200 with them, 204 when none came within wait.
func (h *handlers) consumeBatch(w http.ResponseWriter, r *http.Request) {
	q, bad := readConsume(r)
	if bad == nil && q.offset >= 0 {
		bad = invalidRequest("invalid argument: a batch consume takes no offset: replay reads one record at a time")
	}
	max := 0
	if bad == nil {
		s, _, err := singleQuery(r, "max")
		switch max, err = strconv.Atoi(s); {
		case err != nil || max < 1:
			bad = invalidRequest(fmt.Sprintf("invalid argument: max must be an integer from 1 to %d", h.maxBatchRecords))
		}
	}
	if bad != nil {
		writeError(w, bad.status, bad.text)
		return
	}
	if h.tooMany(w, max, "records") {
		return
	}
	ds, err := h.node.ConsumeBatch(r.Context(), q.topic, q.partition, q.wait, max)
	switch {
	case err != nil:
		consumeFailed(w, r, err)
	case len(ds) == 0:
		w.WriteHeader(http.StatusNoContent)
	default:
		out := messages.ConsumeBatchResponse{Messages: make([]messages.MessageInfo, len(ds))}
		for i, d := range ds {
			out.Messages[i] = messageOf(q.topic, d, true)
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// ackBatch settles every handle of the body with its action; 200 with one
// result per handle.
func (h *handlers) ackBatch(w http.ResponseWriter, r *http.Request) {
	var req messages.AckBatchRequest
	if !h.readBatch(w, r, &req) {
		return
	}
	if h.tooMany(w, len(req.ReceiptHandles), "handles") {
		return
	}
	var action messages.LeaseAction
	switch req.Action {
	case "", "ack":
		action = messages.LeaseAck
	case "extend":
		action = messages.LeaseExtend
	case "nack":
		action = messages.LeaseNack
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid argument: action %q: want ack, extend or nack", req.Action))
		return
	}
	out := messages.AckBatchResponse{Results: make([]messages.BatchResult, len(req.ReceiptHandles))}
	hs := make([]Handle, 0, len(req.ReceiptHandles))
	at := make([]int, 0, len(req.ReceiptHandles))
	for i, raw := range req.ReceiptHandles {
		hd, ok := parseHandle(raw)
		switch {
		case raw == "":
			out.Results[i] = messages.BatchResult{Status: http.StatusBadRequest, Error: "receipt_handle required"}
		case !ok:
			out.Results[i] = messages.BatchResult{Status: http.StatusBadRequest, Error: "receipt handle is malformed"}
		default:
			hs = append(hs, hd)
			at = append(at, i)
		}
	}
	if len(hs) > 0 {
		for j, err := range h.node.SettleBatch(r.Context(), r.PathValue("topic"), hs, action) {
			res := messages.BatchResult{Status: http.StatusNoContent}
			if err != nil {
				res.Status, res.Error = failure(err, settleAnswers, http.StatusServiceUnavailable, "partition unavailable; retry later")
			}
			out.Results[at[j]] = res
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// tooMany answers 413 and true for a batch of n records or handles (what)
// past maxBatchRecords.
func (h *handlers) tooMany(w http.ResponseWriter, n int, what string) bool {
	if n <= h.maxBatchRecords {
		return false
	}
	writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("batch of %d %s: at most %d", n, what, h.maxBatchRecords))
	return true
}

// readBatch reads a batch request's body strictly into v; on false it has
// answered 413 (past maxBatchBytes) or 400.
func (h *handlers) readBatch(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := io.ReadAll(io.LimitReader(r.Body, int64(h.maxBatchBytes)+1))
	switch {
	case err != nil:
		writeError(w, http.StatusBadRequest, "invalid json: "+err.Error())
		return false
	case len(b) > h.maxBatchBytes:
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("batch request body past %d bytes", h.maxBatchBytes))
		return false
	}
	if err := decodeStrict(b, v); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return false
	}
	return true
}

package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/naradmq/narad/messages"
)

// MaxBodyBytes is the contract's cap on every request body (1 MiB), and so
// on a record's body.
const MaxBodyBytes = 1 << 20

// The contract's texts that more than one handler answers.
const (
	textTopicNotFound = "topic not found"
	textStaleHandle   = "receipt handle no longer matches an active reservation"
	textTooLarge      = "request body too large"
	textControlPlane  = "control plane temporarily unavailable"
	textBadPartition  = "invalid partition"
)

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

// writeMessage writes m as writeJSON would, but splices its payload in as
// it is: encoding/json validates and compacts a RawMessage again, a second
// pass over every body consumed that encodePayload already made.
func writeMessage(w http.ResponseWriter, m messages.MessageInfo) {
	payload := m.Payload
	m.Payload = json.RawMessage("0")
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		writeJSON(w, http.StatusInternalServerError, messages.ErrorBody{Error: "encode failed"})
		return
	}
	// The first `"payload":0` is the field: inside the topic or key
	// strings before it every quote is escaped.
	out := buf.Bytes()
	at := bytes.Index(out, []byte(`"payload":0`)) + len(`"payload":`)
	b := make([]byte, 0, len(out)-1+len(payload))
	b = append(append(append(b, out[:at]...), payload...), out[at+1:]...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, messages.ErrorBody{Error: msg})
}

// readBody reads a request body of at most MaxBodyBytes; tooLarge reports
// a larger one.
func readBody(r *http.Request) (body []byte, tooLarge bool, err error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, false, err
	}
	if len(b) > MaxBodyBytes {
		return nil, true, nil
	}
	return b, false, nil
}

// readJSON reads a topic request body strictly into v; on false it has
// answered 413 (past 1 MiB) or 400.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	return readJSONOr(w, r, v, http.StatusRequestEntityTooLarge, textTooLarge)
}

// readJSONOr reads a request body strictly into v; on false it has
// answered 400, or tooLarge with tooLargeText for a body past 1 MiB.
func readJSONOr(w http.ResponseWriter, r *http.Request, v any, tooLarge int, tooLargeText string) bool {
	body, over, err := readBody(r)
	switch {
	case over:
		writeError(w, tooLarge, tooLargeText)
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
	// Compact validates and compacts in one pass, and emits what
	// encoding/json makes of a RawMessage with HTML escaping off: the
	// response need not be checked again (writeMessage).
	var c bytes.Buffer
	c.Grow(len(b))
	if json.Compact(&c, b) == nil {
		return c.Bytes(), ""
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
func parseHandle(s string) (Handle, bool) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return Handle{}, false
	}
	for _, p := range parts {
		if p == "" || strings.TrimLeft(p, "0123456789") != "" {
			return Handle{}, false
		}
	}
	p, err1 := strconv.Atoi(parts[0])
	o, err2 := strconv.ParseInt(parts[1], 10, 64)
	nc, err3 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || nc == 0 {
		return Handle{}, false
	}
	return Handle{Partition: p, Offset: o, Nonce: nc}, true
}

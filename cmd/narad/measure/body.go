package measure

import (
	"encoding/json"
	"strconv"
	"strings"
)

// A measured record's body is {"id":"<id>","ts":<unix ns>,"pad":"xx..."}:
// the consumer reads the id to know the record (bench/history reads the
// same "id" field) and the send time to measure end to end. ids are made
// of [A-Za-z0-9-] only, so they need no JSON escaping.
const (
	bodyHead  = `{"id":"`
	bodyTS    = `","ts":`
	bodyPad   = `,"pad":"`
	bodyTail  = `"}`
	tsDigits  = 19 // unix ns has 19 digits until the year 2286
	padByte   = 'x'
	maxPadLen = 1 << 20
)

// BodyOverhead is the size of a body for an id of idLen bytes with no pad:
// the smallest size MakeBody can meet exactly.
func BodyOverhead(idLen int) int {
	return len(bodyHead) + idLen + len(bodyTS) + tsDigits + len(bodyPad) + len(bodyTail)
}

// Pad returns the padding MakeBody slices for bodies of size bytes at
// most; make it once a run.
func Pad(size int) []byte {
	return []byte(strings.Repeat(string(padByte), min(max(size, 0), maxPadLen)))
}

// MakeBody returns the body of record id sent at sentUnixNano, padded so
// that it is size bytes when size is at least BodyOverhead(len(id)); a
// smaller size gives the smallest body (the id and time must fit).
func MakeBody(id string, sentUnixNano int64, size int, pad []byte) []byte {
	b := make([]byte, 0, max(size, BodyOverhead(len(id))))
	b = append(b, bodyHead...)
	b = append(b, id...)
	b = append(b, bodyTS...)
	b = strconv.AppendInt(b, sentUnixNano, 10)
	b = append(b, bodyPad...)
	if n := size - len(b) - len(bodyTail); n > 0 {
		b = append(b, pad[:min(n, len(pad))]...)
	}
	return append(b, bodyTail...)
}

// ParseBody reads the id and send time back out of a consumed payload; ok
// is false for a body MakeBody did not make.
func ParseBody(payload []byte) (id string, sentUnixNano int64, ok bool) {
	var v struct {
		ID string `json:"id"`
		TS int64  `json:"ts"`
	}
	if err := json.Unmarshal(payload, &v); err != nil || v.ID == "" {
		return "", 0, false
	}
	return v.ID, v.TS, true
}

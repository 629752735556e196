package history

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/naradmq/narad/messages"
)

// body is the shape MakeBody writes. Extra fields written by other
// producers (a send timestamp, say) are ignored by ParseBody.
type body struct {
	ID  string `json:"id"`
	Pad string `json:"pad,omitempty"`
}

// MakeBody returns a JSON message body carrying id and padBytes bytes of
// padding, e.g. {"id":"p3-000123","pad":"xxxx"}. Because the body is valid
// JSON, the broker hands it back embedded verbatim in the consume response's
// payload field, where ParseBody finds the id again.
func MakeBody(id string, padBytes int) []byte {
	b := body{ID: id}
	if padBytes > 0 {
		b.Pad = strings.Repeat("x", padBytes)
	}
	out, err := json.Marshal(b)
	if err != nil {
		// A struct of two strings always marshals.
		panic("history: marshal body: " + err.Error())
	}
	return out
}

// ParseBody returns the id a body carries: raw is either the produced bytes
// or the payload field of a consume response. It also accepts the body
// wrapped in a JSON string, in case a broker embeds the text as a string
// instead of verbatim. ok is false when raw carries no id.
func ParseBody(raw []byte) (id string, ok bool) {
	var b body
	if err := json.Unmarshal(raw, &b); err == nil {
		return b.ID, b.ID != ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	if err := json.Unmarshal([]byte(s), &b); err != nil {
		return "", false
	}
	return b.ID, b.ID != ""
}

// Delivery is what a history test needs of one consume response.
type Delivery struct {
	ID            string
	Partition     int
	Offset        int64
	ReceiptHandle string
}

// Delivered decodes a 200 consume response of topic, records the delivery
// and returns it (the caller acks with its ReceiptHandle and then calls
// Acked). An error means the response is not a consume response carrying a
// MakeBody id.
func (h *History) Delivered(topic string, response []byte) (Delivery, error) {
	var m messages.MessageInfo
	if err := json.Unmarshal(response, &m); err != nil {
		return Delivery{}, fmt.Errorf("consume response %q: %w", response, err)
	}
	id, ok := ParseBody(m.Payload)
	if !ok {
		return Delivery{}, fmt.Errorf("payload %s carries no id", m.Payload)
	}
	h.Consumed(id, topic, m.Partition, m.Offset)
	return Delivery{ID: id, Partition: m.Partition, Offset: m.Offset, ReceiptHandle: m.ReceiptHandle}, nil
}

package client

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/naradmq/narad/messages"
)

// A produce batch's body decodes to the records it was made of, each
// payload's bytes as given (spaces kept); a payload that is not one JSON
// value is refused before anything is sent.
func TestEncodeProduceBatchKeepsEachPayloadAsGiven(t *testing.T) {
	p := 3
	recs := []messages.BatchRecord{
		BatchRecordOf("k\"1", &p, []byte(`{ "a" : 1 }`)),
		BatchRecordOf("", nil, []byte("text, not JSON")),
		BatchRecordOf("", nil, []byte{0xff, 0x00}),
	}
	b, err := encodeProduceBatch(recs)
	if err != nil {
		t.Fatal(err)
	}
	var got messages.ProduceBatchRequest
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("the body %s does not decode: %v", b, err)
	}
	if len(got.Records) != 3 || string(got.Records[0].Payload) != `{ "a" : 1 }` || got.Records[0].Key != "k\"1" || *got.Records[0].Partition != 3 ||
		got.Records[1].PayloadEncoding != "text" || got.Records[2].PayloadEncoding != "base64" {
		t.Fatalf("decoded: got %+v, want the records as made", got.Records)
	}
	for _, bad := range []string{`1},{"payload":2`, ``, `1 2`} {
		if _, err := encodeProduceBatch([]messages.BatchRecord{{Payload: json.RawMessage(bad)}}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("payload %q: got %v, want ErrInvalid", bad, err)
		}
	}
}

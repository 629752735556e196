package history

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestCleanHistoryPasses(t *testing.T) {
	h := New()
	for i := range 5 {
		id := fmt.Sprintf("p0-%06d", i)
		h.Produced(id)
		h.Consumed(id, "t", i%2, int64(i/2))
		h.Acked(id)
	}
	r := h.Check()
	if !r.OK() {
		t.Fatalf("got not OK, want OK:\n%s", r)
	}
	if r.Produced != 5 || r.Consumed != 5 || r.Acked != 5 || r.Duplicates != 0 {
		t.Errorf("got produced %d consumed %d acked %d duplicates %d, want 5 5 5 0",
			r.Produced, r.Consumed, r.Acked, r.Duplicates)
	}
	if !strings.HasPrefix(r.String(), "history OK") {
		t.Errorf("got %q, want it to start with %q", r.String(), "history OK")
	}
}

func TestLossIsDetected(t *testing.T) {
	h := New()
	h.Produced("a")
	h.Produced("b")
	h.Produced("c")
	h.Consumed("b", "t", 0, 0)

	r := h.Check()
	if r.OK() {
		t.Fatalf("got OK, want a failure for the lost ids")
	}
	if got, want := strings.Join(r.Lost, ","), "a,c"; got != want {
		t.Errorf("got lost %q, want %q", got, want)
	}
	if !strings.Contains(r.String(), "lost a") {
		t.Errorf("got report %q, want it to name the lost id a", r.String())
	}
}

func TestFailedProduceNeverConsumedIsNotLoss(t *testing.T) {
	h := New()
	h.ProduceFailed("a") // the broker may or may not have it

	r := h.Check()
	if !r.OK() {
		t.Fatalf("got not OK, want OK:\n%s", r)
	}
	if r.MaybeProduced != 1 {
		t.Errorf("got maybe-produced %d, want 1", r.MaybeProduced)
	}
}

func TestFailedThenAcceptedProduceMustBeConsumed(t *testing.T) {
	h := New()
	h.ProduceFailed("a")
	h.Produced("a") // the retry got 202

	r := h.Check()
	if got, want := len(r.Lost), 1; got != want {
		t.Fatalf("got %d lost, want %d", got, want)
	}
	if r.MaybeProduced != 0 {
		t.Errorf("got maybe-produced %d, want 0: the id was answered 202 in the end", r.MaybeProduced)
	}
}

func TestDuplicatesAreCountedNotFailed(t *testing.T) {
	h := New()
	h.Produced("a")
	h.Consumed("a", "t", 0, 0)
	h.Consumed("a", "t", 0, 0) // redelivered after its lease ran out
	h.ProduceFailed("b")
	h.Produced("b")
	h.Consumed("b", "t", 0, 1)
	h.Consumed("b", "t", 1, 0) // the retried produce stored it again

	r := h.Check()
	if !r.OK() {
		t.Fatalf("got not OK, want OK (duplicates are allowed):\n%s", r)
	}
	if r.Duplicates != 2 {
		t.Errorf("got duplicates %d, want 2", r.Duplicates)
	}
	if r.DuplicateRecords != 1 {
		t.Errorf("got duplicate records %d, want 1", r.DuplicateRecords)
	}
	if r.Deliveries != 4 {
		t.Errorf("got deliveries %d, want 4", r.Deliveries)
	}
}

func TestPhantomIsDetected(t *testing.T) {
	h := New()
	h.Produced("a")
	h.Consumed("a", "t", 0, 0)
	h.Consumed("ghost", "t", 0, 1)

	r := h.Check()
	if r.OK() {
		t.Fatalf("got OK, want a failure for the phantom")
	}
	if r.UnknownConsumed != 1 {
		t.Errorf("got phantoms %d, want 1", r.UnknownConsumed)
	}
}

func TestMaybeProducedConsumedIsNotPhantom(t *testing.T) {
	h := New()
	h.ProduceFailed("a")
	h.Consumed("a", "t", 0, 0) // the failed produce did land

	r := h.Check()
	if !r.OK() {
		t.Fatalf("got not OK, want OK:\n%s", r)
	}
}

func TestOffsetConflictIsDetected(t *testing.T) {
	h := New()
	h.Produced("a")
	h.Produced("b")
	h.Consumed("a", "t", 2, 7)
	h.Consumed("b", "t", 2, 7) // same place, another message
	h.Consumed("a", "u", 2, 7) // another topic: no conflict

	r := h.Check()
	if r.OK() {
		t.Fatalf("got OK, want a failure for the reused offset")
	}
	if r.OffsetConflicts != 1 {
		t.Errorf("got offset conflicts %d, want 1", r.OffsetConflicts)
	}
	if !strings.Contains(r.String(), "offset conflict at t/2@7: a, b") {
		t.Errorf("got report %q, want it to show the conflict", r.String())
	}
}

func TestDeliveryPastHighWatermarkIsDetected(t *testing.T) {
	h := New()
	h.Produced("a")
	h.Produced("b")
	h.Consumed("a", "t", 0, 0)
	h.Consumed("b", "t", 0, 1)
	h.HighWatermark("t", 0, 1)
	h.HighWatermark("t", 0, 0) // an older reading never lowers it

	r := h.Check()
	if r.BeyondWatermark != 1 {
		t.Errorf("got past-watermark %d, want 1", r.BeyondWatermark)
	}
	if r.OK() {
		t.Errorf("got OK, want a failure for the delivery past the high watermark")
	}

	h.HighWatermark("t", 0, 2)
	if r := h.Check(); !r.OK() {
		t.Errorf("got not OK after the watermark reached 2, want OK:\n%s", r)
	}
}

func TestOutstandingFollowsProducesAndFirstDeliveries(t *testing.T) {
	h := New()
	h.Produced("a")
	h.Produced("b")
	if got := h.Outstanding(); got != 2 {
		t.Fatalf("got outstanding %d, want 2", got)
	}
	h.Consumed("a", "t", 0, 0)
	h.Consumed("a", "t", 0, 0)
	if got := h.Outstanding(); got != 1 {
		t.Fatalf("got outstanding %d after a redelivery, want 1", got)
	}
	// A consumer may see a record before its producer sees the 202.
	h.Consumed("c", "t", 0, 1)
	h.Produced("c")
	h.Produced("c")
	if got := h.Outstanding(); got != 1 {
		t.Fatalf("got outstanding %d, want 1 (only b)", got)
	}
}

func TestConcurrentUse(t *testing.T) {
	h := New()
	const producers, perProducer = 4, 200
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range perProducer {
				id := fmt.Sprintf("p%d-%06d", p, i)
				h.Produced(id)
				h.Consumed(id, "t", p, int64(i))
				h.Acked(id)
				_ = h.Outstanding()
			}
		})
	}
	wg.Wait()
	r := h.Check()
	if !r.OK() || r.Consumed != producers*perProducer {
		t.Fatalf("got consumed %d, OK %v, want %d and OK:\n%s", r.Consumed, r.OK(), producers*perProducer, r)
	}
	if got := h.Outstanding(); got != 0 {
		t.Errorf("got outstanding %d, want 0", got)
	}
}

func TestBodyRoundTrip(t *testing.T) {
	b := MakeBody("p3-000123", 16)
	if got, want := string(b), `{"id":"p3-000123","pad":"xxxxxxxxxxxxxxxx"}`; got != want {
		t.Fatalf("got body %s, want %s", got, want)
	}
	id, ok := ParseBody(b)
	if !ok || id != "p3-000123" {
		t.Errorf("got %q %v, want p3-000123 true", id, ok)
	}
}

func TestParseBody(t *testing.T) {
	tests := []struct {
		name   string
		raw    string
		wantID string
		wantOK bool
	}{
		{"object", `{"id":"x1"}`, "x1", true},
		{"extra fields", `{"id":"x1","ts":123,"pad":"xx"}`, "x1", true},
		{"wrapped in a string", `"{\"id\":\"x1\"}"`, "x1", true},
		{"no id", `{"pad":"xx"}`, "", false},
		{"empty id", `{"id":""}`, "", false},
		{"not json", `hello`, "", false},
		{"plain string", `"hello"`, "", false},
		{"number", `42`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, ok := ParseBody([]byte(tt.raw))
			if id != tt.wantID || ok != tt.wantOK {
				t.Errorf("got %q %v, want %q %v", id, ok, tt.wantID, tt.wantOK)
			}
		})
	}
}

func TestDeliveredRecordsAConsumeResponse(t *testing.T) {
	h := New()
	h.Produced("p0-1")
	d, err := h.Delivered("t", []byte(`{"topic":"t","partition":2,"offset":7,"payload":{"id":"p0-1"},"timestamp":1,"receipt_handle":"2:7:9"}`))
	if err != nil || d.ID != "p0-1" || d.Partition != 2 || d.Offset != 7 || d.ReceiptHandle != "2:7:9" {
		t.Fatalf("delivered: got %+v (%v), want p0-1 at t/2@7 with handle 2:7:9", d, err)
	}
	if h.Outstanding() != 0 {
		t.Fatalf("outstanding after the delivery: got %d, want 0", h.Outstanding())
	}
	if _, err := h.Delivered("t", []byte(`{"payload":"no id here"}`)); err == nil {
		t.Fatal("a payload without an id: got nil, want an error")
	}
}

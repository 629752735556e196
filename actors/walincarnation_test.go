package actors

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/naradmq/narad/actors/dispatch"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// appendRecord writes rec to the rig's WAL only, as a node that stopped
// before dispatching it would have left it.
func (r *dispatcherRig) appendRecord(rec storage.WALRecord) storage.WALRecord {
	r.t.Helper()
	seq, err := r.wal.Append(context.Background(), rec)
	if err != nil {
		r.t.Fatal(err)
	}
	rec.Seq = seq
	return rec
}

// dropped reads narad_wal_records_dropped_total of the rig's dispatcher
// (its node's metrics set).
func (r *dispatcherRig) dropped(why string) uint64 {
	return r.metrics.set.GetOrCreateCounter(fmt.Sprintf(`narad_wal_records_dropped_total{node=%q,reason=%q}`, r.metrics.node, why)).Get()
}

// incarnationOf is the topic's incarnation as the node's replica has it.
func (tn *testNode) incarnationOf(topic string) uint64 {
	tn.t.Helper()
	tp, ok := tn.n.store.Topic(topic)
	if !ok {
		tn.t.Fatalf("topic %s: not in the replica", topic)
	}
	return tp.Incarnation
}

// recreate deletes the topic and creates it again under the same name,
// and returns the new incarnation.
func (tn *testNode) recreate(topic string, partitions int) uint64 {
	tn.t.Helper()
	old := tn.incarnationOf(topic)
	tn.must(http.StatusNoContent, "DELETE", "/v1/topics/"+topic, nil)
	tn.createTopic(topic, partitions)
	inc := tn.incarnationOf(topic)
	if inc == old {
		tn.t.Fatalf("recreated %s: got incarnation %d again, want a new one", topic, inc)
	}
	return inc
}

// bodiesAt reads partition p of the topic's incarnation inc from offset 0
// up to its high watermark, from the node's own partition actor.
func (tn *testNode) bodiesAt(topic string, inc uint64, p int) []string {
	tn.t.Helper()
	k := messages.PartitionKey{Topic: topic, Incarnation: inc, Partition: p}
	ctx, cancel := context.WithTimeout(context.Background(), rigWaitBound)
	defer cancel()
	res, err := tn.n.route.Ask(ctx, k, &messages.GetStats{})
	if err != nil {
		tn.t.Fatalf("stats of %v: %v", k, err)
	}
	stats := res.(*messages.PartitionStats)
	var out []string
	for off := int64(0); off < stats.HighWatermark; off++ {
		res, err := tn.n.route.Ask(ctx, k, &messages.ReadAt{Offset: off})
		if err != nil {
			tn.t.Fatalf("read %v at %d: %v", k, off, err)
		}
		out = append(out, string(res.(*messages.Reserved).Delivery.Body))
	}
	return out
}

// A record produced against a topic incarnation that is deleted, and the
// topic recreated under the same name, while the record sits in the
// ingress WAL, is dropped when the dispatcher reaches it: the recreated
// topic's partition never holds it. A record from before the WAL carried
// incarnations (0) still commits, to the current incarnation.
func TestDispatcherNeverCommitsARecordToANewerIncarnationOfItsTopic(t *testing.T) {
	tn := newTestNode(t)
	tn.createTopic("reborn", 3)
	old := tn.incarnationOf("reborn")
	r := newDispatcherRig(t, tn, nil).toNode()
	droppedBefore := r.dropped(dispatch.DropTopicDeleted)
	stale := r.appendRecord(storage.WALRecord{Topic: "reborn", Incarnation: old, Partition: 0, Key: []byte("k"), Body: []byte("of the deleted incarnation")})

	inc := tn.recreate("reborn", 3)
	fresh := r.appendRecord(storage.WALRecord{Topic: "reborn", Incarnation: inc, Partition: 0, Key: []byte("k"), Body: []byte("of the new incarnation")})
	legacy := r.appendRecord(storage.WALRecord{Topic: "reborn", Partition: 0, Key: []byte("k"), Body: []byte("of an older node")})
	r.start()

	waitFor(t, func() bool { return r.wal.CommittedThrough() >= legacy.Seq })
	got := tn.bodiesAt("reborn", inc, 0)
	want := []string{string(fresh.Body), string(legacy.Body)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("new incarnation's partition: got %q, want %q (seq %d dropped)", got, want, stale.Seq)
	}
	if n := r.dropped(dispatch.DropTopicDeleted) - droppedBefore; n != 1 {
		t.Fatalf("narad_wal_records_dropped_total{reason=%q}: got %d more, want 1", dispatch.DropTopicDeleted, n)
	}
}

// A record already queued for a peer's partition when its topic is deleted
// and recreated: the owner refuses the old incarnation (no actor of it
// there: 503), and the dispatcher drops the record at its next tick,
// releasing its seq, rather than retry or reroute it into the new
// incarnation, whose partitions would take it.
func TestDispatcherDropsAQueuedRecordWhoseIncarnationWasDeleted(t *testing.T) {
	tn := newTestNode(t)
	tn.createTopic("requeued", 3)
	old := tn.incarnationOf("requeued")
	r := newDispatcherRig(t, tn, map[int]string{0: "n1", 1: "n1", 2: "n1"})
	droppedBefore := r.dropped(dispatch.DropTopicDeleted)
	noActor := answerError(fmt.Errorf("commit to n1: %w: %w", transport.Errorf(transport.StatusUnavailable, "no partition"), ErrUnavailable))
	r.owners.answer(0, noActor)
	// Queued by the replay at the start: a dispatch sent as well could
	// reach the actor before its replay and queue the record twice.
	rec := r.appendRecord(storage.WALRecord{Topic: "requeued", Incarnation: old, Partition: 0, Key: []byte("k"), Body: []byte("v")})
	r.start()
	r.waitCommitted(0, rec.Seq)

	inc := tn.recreate("requeued", 3)
	// As the owner answers now: the new incarnation's partitions would
	// take the record, the old one's are gone.
	for p := range 3 {
		r.owners.answer(p, func(c *messages.Commit) (any, error) {
			if c.Key.Incarnation != inc {
				return noActor(c)
			}
			return answerStatus(messages.StatusOK)(c)
		})
	}
	// Past the reroute grace: a reroute, had the record been kept, would
	// have happened by then.
	deadline := time.Now().Add(rigWaitBound)
	for range 3 * rigGrace / rigTick {
		r.clock.Advance(rigTick)
		for r.wal.CommittedThrough() < rec.Seq && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if got := r.wal.CommittedThrough(); got < rec.Seq {
		t.Fatalf("WAL committed through %d: want the dropped seq %d released", got, rec.Seq)
	}
	r.owners.mu.Lock()
	defer r.owners.mu.Unlock()
	for _, a := range r.owners.attempts {
		if a.incarnation != old {
			t.Fatalf("commit of a deleted incarnation's record: got %v, want only incarnation %d (new is %d)", a, old, inc)
		}
	}
	if n := r.dropped(dispatch.DropTopicDeleted) - droppedBefore; n != 1 {
		t.Fatalf("narad_wal_records_dropped_total{reason=%q}: got %d more, want 1", dispatch.DropTopicDeleted, n)
	}
}

// The owner's side of a commit that names a deleted incarnation: a peer's
// request is answered 503 (no actor of that incarnation here, surely not
// processed), and the recreated topic's partition stays empty.
func TestAnOwnerRefusesACommitToAnIncarnationItNoLongerServes(t *testing.T) {
	tn := newTestNode(t)
	tn.createTopic("refused", 3)
	old := tn.incarnationOf("refused")
	inc := tn.recreate("refused", 3)

	ctx, cancel := context.WithTimeout(context.Background(), rigWaitBound)
	defer cancel()
	k := messages.PartitionKey{Topic: "refused", Incarnation: old, Partition: 0}
	commit := &messages.Commit{Key: k, Records: []messages.CommitRecord{{Seq: 1, Key: []byte("k"), Body: []byte("v")}}}
	_, err := tn.n.route.ServePartition(ctx, messages.PartitionRequest{Key: k, Commit: commit})
	var remote *transport.RemoteError
	if !errors.As(err, &remote) || remote.Status != transport.StatusUnavailable {
		t.Fatalf("commit to deleted incarnation %d: got %v, want a 503 remote error", old, err)
	}
	if got := tn.bodiesAt("refused", inc, 0); len(got) != 0 {
		t.Fatalf("new incarnation %d's partition: got %q, want nothing", inc, got)
	}
}

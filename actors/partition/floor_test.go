package partition

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// A partition re-created after its owner's disk was lost opens at its
// floor: its next record takes the floor's offset and a consumer is served
// that one, never an older record at an offset it may have seen. This node
// owned the partition before the lost one did, so it still holds an older
// copy: that is set aside for an operator, not served.
func TestARecreatedPartitionStartsAtItsFloorAndSetsAnOlderCopyAside(t *testing.T) {
	r := newSupervisorRig(t)
	orders, k := r.servedWithOneRecord()
	r.replica.SetOwner(orders, 0, "n3") // moved to n3, whose disk is later lost
	r.waitServing(orders, 0, false)
	r.replica.Recreate(orders, 0, "n1")
	r.waitServing(orders, 0, true)

	floor := messages.FloorGeneration
	st := r.ask(k, &messages.GetStats{}).(*messages.PartitionStats)
	if st.NextOffset != floor || st.OldestOffset != floor {
		t.Fatalf("re-created partition: got next offset %d oldest %d, want both %d", st.NextOffset, st.OldestOffset, floor)
	}
	if got := r.commit(k, 2); got != messages.StatusOK {
		t.Fatalf("commit after the re-creation: got status %d, want OK", got)
	}
	lim := messages.ConsumeLimits{MaxInFlight: 10, MaxAckedAhead: 10, Visibility: 30 * time.Second}
	d := r.leaseWith(k, lim)
	if d.Offset != floor {
		t.Errorf("first record served: got offset %d, want %d", d.Offset, floor)
	}
	if res := r.ask(k, &messages.ReadAt{Offset: 0}).(*messages.Reserved); res.Status == messages.StatusOK {
		t.Errorf("replay of offset 0 after the re-creation: got the record %q, want none", res.Delivery.Body)
	}

	// Lost a second time, with that record leased: the partition starts a
	// generation higher, and the consumer's ack of its old handle is
	// refused, not applied to whatever the new log holds there.
	r.replica.SetOwner(orders, 0, "n3")
	r.waitServing(orders, 0, false)
	r.replica.Recreate(orders, 0, "n1")
	r.waitServing(orders, 0, true)
	if st := r.ask(k, &messages.GetStats{}).(*messages.PartitionStats); st.NextOffset != 2*floor {
		t.Fatalf("re-created again: got next offset %d, want %d", st.NextOffset, 2*floor)
	}
	if got := r.ask(k, &messages.Lease{Action: messages.LeaseAck, Offset: d.Offset, Nonce: d.Nonce, Limits: lim}).(*messages.LeaseResult).Status; got != messages.StatusGone {
		t.Errorf("ack of a handle from before the re-creation: got status %d, want Gone", got)
	}
	aside, err := filepath.Glob(storage.PartitionPath(r.dataDir, "orders", 0) + ".quarantine*")
	if err != nil || len(aside) != 2 {
		t.Fatalf("the older copies: got %v set aside (%v), want two", aside, err)
	}
	for _, a := range aside {
		if _, err := os.Stat(a); err != nil {
			t.Fatal(err)
		}
	}
}

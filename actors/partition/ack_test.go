package partition

import (
	"os"
	"testing"
	"time"

	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// A consumer whose ack took effect but whose answer was lost (the node that
// forwarded it died, the connection broke) retries the same handle: the
// retry answers OK, and the record stays acked. Every other handle of the
// record still answers Gone, and so does the same handle when the memory is
// off, as it did before.
func TestARetriedAckOfTheSameHandleAnswersOKAndNoOtherHandleDoes(t *testing.T) {
	lim := messages.ConsumeLimits{Visibility: time.Minute, MaxInFlight: 8, MaxAckedAhead: 8}
	leaseOne := func(r *supervisorRig, k messages.PartitionKey) messages.Delivery {
		t.Helper()
		res := r.ask(k, &messages.Reserve{Limits: lim}).(*messages.Reserved)
		if res.Status != messages.StatusOK {
			t.Fatalf("reserve: got status %d (%s), want OK", res.Status, res.Err)
		}
		return res.Delivery
	}
	lease := func(r *supervisorRig, k messages.PartitionKey, a messages.LeaseAction, d messages.Delivery, nonce uint64) messages.Status {
		t.Helper()
		return r.ask(k, &messages.Lease{Action: a, Offset: d.Offset, Nonce: nonce, Limits: lim}).(*messages.LeaseResult).Status
	}

	t.Run("remembered", func(t *testing.T) {
		r := newSupervisorRig(t)
		_, k := r.servedWithOneRecord()
		d := leaseOne(r, k)
		if got := lease(r, k, messages.LeaseAck, d, d.Nonce); got != messages.StatusOK {
			t.Fatalf("first ack: got status %d, want OK", got)
		}
		if got := lease(r, k, messages.LeaseAck, d, d.Nonce); got != messages.StatusOK {
			t.Fatalf("retried ack of the same handle: got status %d, want OK", got)
		}
		for _, c := range []struct {
			name   string
			action messages.LeaseAction
			nonce  uint64
		}{
			{"ack of another handle of the record", messages.LeaseAck, d.Nonce + 1},
			{"extend of the acked handle", messages.LeaseExtend, d.Nonce},
			{"nack of the acked handle", messages.LeaseNack, d.Nonce},
		} {
			if got := lease(r, k, c.action, d, c.nonce); got != messages.StatusGone {
				t.Fatalf("%s: got status %d, want Gone", c.name, got)
			}
		}
		if got := r.ask(k, &messages.Reserve{Limits: lim}).(*messages.Reserved).Status; got != messages.StatusEmpty {
			t.Fatalf("consume after the acks: got status %d, want Empty (the record stays acked)", got)
		}
	})
	t.Run("memory off", func(t *testing.T) {
		r := newSupervisorRig(t, func(d *Deps) { d.Config.AckMemoryWindow = 0 })
		_, k := r.servedWithOneRecord()
		d := leaseOne(r, k)
		if got := lease(r, k, messages.LeaseAck, d, d.Nonce); got != messages.StatusOK {
			t.Fatalf("first ack: got status %d, want OK", got)
		}
		if got := lease(r, k, messages.LeaseAck, d, d.Nonce); got != messages.StatusGone {
			t.Fatalf("retried ack with the memory off: got status %d, want Gone", got)
		}
	})
}

// An ack is answered once the consumer state that holds it is written, so a
// process killed right after the 204 finds the ack on disk and does not
// deliver the record again (issue 30: a third of the duplicates after a
// SIGKILL were acks answered within the flush interval). With write-through
// off the state waits for the flush timer, here an hour away.
func TestAnAckIsAnsweredOnceItsStateIsWritten(t *testing.T) {
	lim := messages.ConsumeLimits{Visibility: time.Minute, MaxInFlight: 8, MaxAckedAhead: 8}
	for _, tc := range []struct {
		name         string
		writeThrough int
		wantFrontier int64
	}{
		{"write-through", 1024, 0},
		{"off", 0, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newSupervisorRig(t, func(d *Deps) {
				d.Config.AckWriteThroughEntriesMax = tc.writeThrough
				d.Config.ConsumerFlushInterval = time.Hour
			})
			_, k := r.servedWithOneRecord()
			res := r.ask(k, &messages.Reserve{Limits: lim}).(*messages.Reserved)
			if res.Status != messages.StatusOK {
				t.Fatalf("reserve: got status %d (%s), want OK", res.Status, res.Err)
			}
			ack := &messages.Lease{Action: messages.LeaseAck, Offset: res.Delivery.Offset, Nonce: res.Delivery.Nonce, Limits: lim}
			if got := r.ask(k, ack).(*messages.LeaseResult).Status; got != messages.StatusOK {
				t.Fatalf("ack: got status %d, want OK", got)
			}
			st, err := storage.LoadConsumerState(storage.PartitionPath(r.dataDir, k.Topic, k.Partition))
			if err != nil {
				t.Fatalf("load consumer state after the ack: %v", err)
			}
			if st.Frontier != tc.wantFrontier {
				t.Fatalf("frontier on disk once the ack is answered: got %d, want %d", st.Frontier, tc.wantFrontier)
			}
		})
	}
}

// The process dies right after an ack was applied and written, before its
// answer left: the consumer retries the same handle against the
// partition's next life, which answers OK from the handles its state
// carries (Config.AckMemoryPersistedMax); another handle of the record
// still answers Gone. The next life is a second supervisor opening a copy
// of the first one's data dir as a kill leaves it (the first is still
// running, so nothing was flushed on a way out).
func TestARetriedAckAnswersOKInThePartitionsNextLife(t *testing.T) {
	lim := messages.ConsumeLimits{Visibility: time.Minute, MaxInFlight: 8, MaxAckedAhead: 8}
	for _, tc := range []struct {
		name      string
		persisted int
		want      messages.Status
	}{
		{"handles written with the state", 64, messages.StatusOK},
		{"none written", 0, messages.StatusGone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tweak := func(d *Deps) {
				d.Config.AckMemoryPersistedMax = tc.persisted
				d.Config.ConsumerFlushInterval = time.Hour // only the ack's own write
			}
			first := newSupervisorRig(t, tweak)
			orders, k := first.servedWithOneRecord()
			d := first.leaseWith(k, lim)
			ack := &messages.Lease{Action: messages.LeaseAck, Offset: d.Offset, Nonce: d.Nonce, Limits: lim}
			if got := first.ask(k, ack).(*messages.LeaseResult).Status; got != messages.StatusOK {
				t.Fatalf("ack: got status %d, want OK", got)
			}
			next := first.nextLife(t, orders, tweak)
			if got := next.ask(k, ack).(*messages.LeaseResult).Status; got != tc.want {
				t.Fatalf("the ack retried in the next life: got status %d, want %d", got, tc.want)
			}
			other := &messages.Lease{Action: messages.LeaseAck, Offset: d.Offset, Nonce: d.Nonce + 1, Limits: lim}
			if got := next.ask(k, other).(*messages.LeaseResult).Status; got != messages.StatusGone {
				t.Fatalf("an ack of another handle in the next life: got status %d, want Gone", got)
			}
			if got := next.ask(k, &messages.Reserve{Limits: lim}).(*messages.Reserved).Status; got != messages.StatusEmpty {
				t.Fatalf("consume in the next life: got status %d, want Empty (acked before the kill)", got)
			}
		})
	}
}

// The process dies while a consumer holds a record: the partition's next
// life brings the lease back from the state written before the delivery
// was answered (Config.LeasePersistedMax), so no other consumer gets the
// record, and the holder's ack, retried against the next life, answers OK.
// With the leases not written, the record goes at once to whoever asks and
// the holder's ack is Gone: a duplicate (issue 30, the duplicates after a
// SIGKILL). The next life opens a copy of the data dir as a kill leaves it.
func TestALeaseOutWhenTheProcessDiesHoldsItsRecordInTheNextLife(t *testing.T) {
	lim := messages.ConsumeLimits{Visibility: time.Minute, MaxInFlight: 8, MaxAckedAhead: 8}
	for _, tc := range []struct {
		name        string
		persisted   int
		wantConsume messages.Status
		wantAck     messages.Status
	}{
		{"leases written with the state", 1024, messages.StatusEmpty, messages.StatusOK},
		{"none written", 0, messages.StatusOK, messages.StatusGone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tweak := func(d *Deps) {
				d.Config.LeasePersistedMax = tc.persisted
				d.Config.ConsumerFlushInterval = time.Hour // only the delivery's own write
			}
			first := newSupervisorRig(t, tweak)
			orders, k := first.servedWithOneRecord()
			d := first.leaseWith(k, lim)
			next := first.nextLife(t, orders, tweak)
			if got := next.ask(k, &messages.Reserve{Limits: lim}).(*messages.Reserved).Status; got != tc.wantConsume {
				t.Fatalf("another consume in the next life: got status %d, want %d", got, tc.wantConsume)
			}
			ack := &messages.Lease{Action: messages.LeaseAck, Offset: d.Offset, Nonce: d.Nonce, Limits: lim}
			if got := next.ask(k, ack).(*messages.LeaseResult).Status; got != tc.wantAck {
				t.Fatalf("the holder's ack in the next life: got status %d, want %d", got, tc.wantAck)
			}
			if tc.wantAck == messages.StatusOK {
				if got := next.ask(k, &messages.Reserve{Limits: lim}).(*messages.Reserved).Status; got != messages.StatusEmpty {
					t.Fatalf("consume after the holder's ack: got status %d, want Empty", got)
				}
				if got := next.leasesRestored.Get(); got != 1 {
					t.Errorf("narad_leases_restored_total: got %d, want 1", got)
				}
			}
		})
	}
}

// leaseWith leases partition k's next record under lim, failing the test
// if none is served.
func (r *supervisorRig) leaseWith(k messages.PartitionKey, lim messages.ConsumeLimits) messages.Delivery {
	r.t.Helper()
	res := r.ask(k, &messages.Reserve{Limits: lim}).(*messages.Reserved)
	if res.Status != messages.StatusOK {
		r.t.Fatalf("reserve: got status %d (%s), want OK", res.Status, res.Err)
	}
	return res.Delivery
}

// nextLife is the partitions' next life after a kill of this rig's
// process: a second rig opening a copy of the data dir as a kill leaves it
// (this one still runs, so nothing was flushed on a way out), serving
// topic orders here.
func (r *supervisorRig) nextLife(t *testing.T, orders messages.Topic, tweak func(*Deps)) *supervisorRig {
	t.Helper()
	killed := t.TempDir()
	if err := os.CopyFS(killed, os.DirFS(r.dataDir)); err != nil {
		t.Fatal(err)
	}
	next := newSupervisorRig(t, tweak, func(d *Deps) { d.DataDir = killed })
	next.replica.Put(orders, "n1")
	next.waitServing(orders, 0, true)
	return next
}

package partition

import (
	"testing"
	"time"

	"github.com/naradmq/narad/messages"
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

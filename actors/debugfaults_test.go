package actors

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/naradmq/narad/actors/partition"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// faultsStatus reads GET /debug/faults.
func faultsStatus(t *testing.T, tn *testNode) messages.FaultsStatus {
	t.Helper()
	var s messages.FaultsStatus
	if err := json.Unmarshal(tn.must(http.StatusOK, "GET", "/debug/faults", nil), &s); err != nil {
		t.Fatalf("GET /debug/faults: %v", err)
	}
	return s
}

// consumeAll consumes and acks until every body in want was delivered at
// least once, and returns how often each came.
func consumeAll(t *testing.T, tn *testNode, topic string, want []string) map[string]int {
	t.Helper()
	got := map[string]int{}
	waitFor(t, func() bool {
		if m := tn.consume(topic, "wait=100ms"); m != nil {
			got[string(m.Payload)]++
			tn.must(http.StatusNoContent, "POST", "/v1/topics/"+topic+"/ack?receipt_handle="+url.QueryEscape(m.ReceiptHandle), nil)
		}
		for _, b := range want {
			if got[b] == 0 {
				return false
			}
		}
		return true
	})
	return got
}

// Under injected fsync errors, and then write errors, no produce is
// answered 202 (the ingress WAL cannot make it durable: 500), and a commit
// whose fsync fails is failed back to the dispatcher, which retries it.
// Once the fault is off the node serves again by itself, without a
// restart, and every record it answered 202 is consumed: "c", accepted
// before the fault and committed while it lasts, too.
// With PartitionMaxRestarts 1, a partition whose log turned broken at a
// failed cut (the fsync of the truncation after a failed commit) was given
// up on after its second failure and "b" was never delivered.
func TestFaultDiskErrorsRefuseProduceAndEveryAcceptedRecordIsConsumedAfterOff(t *testing.T) {
	h := newSyncHold()
	tn := newTestNode(t, func(c *Config) {
		c.DebugFaults = true
		c.PartitionMaxRestarts = 1
		c.faults = &faultHooks{partition: partition.Knobs{Synced: h.hook}}
	})
	holdSecondRecord(t, tn, h) // "a" visible on f/0, "b" accepted, held past its fsync
	// "c" accepted: its commit waits behind "b"'s write.
	tn.must(http.StatusAccepted, "POST", "/v1/topics/f/produce?partition=0", []byte(`"c"`))
	accepted := []string{`"a"`, `"b"`, `"c"`}

	tn.must(http.StatusNoContent, "POST", "/debug/faults/disk", []byte(`{"fail":"fsync"}`))
	if got := faultsStatus(t, tn); got.Disk != "fsync" || got.ClockOffsetMs != 0 {
		t.Fatalf("faults after fsync on: got %+v, want disk fsync, offset 0", got)
	}
	h.unblock()
	// "b" was durable before the fault and becomes visible; "c" cannot be
	// made durable: its commit fails, and so does each retry while the
	// fault lasts.
	waitFor(t, func() bool { return tn.n.metrics.commitFailures.Get() >= 3 })

	for _, mode := range []string{"fsync", "write"} {
		tn.must(http.StatusNoContent, "POST", "/debug/faults/disk", []byte(fmt.Sprintf(`{"fail":%q}`, mode)))
		for i := range 3 {
			code, body := tn.do("POST", "/v1/topics/f/produce", []byte(fmt.Sprintf(`"%s-%d"`, mode, i)))
			if code < 500 {
				t.Fatalf("produce %d under %s faults: got %d %s, want 5xx", i, mode, code, body)
			}
		}
	}
	if got := tn.n.metrics.faultsInjected[storage.FaultWrite].Get(); got == 0 {
		t.Fatalf("narad_faults_injected_total{kind=write}: got 0, want the failed writes counted")
	}
	if got := tn.n.metrics.faultsInjected[storage.FaultFsync].Get(); got == 0 {
		t.Fatalf("narad_faults_injected_total{kind=fsync}: got 0, want the failed fsyncs counted")
	}

	tn.must(http.StatusNoContent, "POST", "/debug/faults/disk", []byte(`{"fail":"off"}`))
	for i := range 4 {
		b := fmt.Sprintf(`"after-%d"`, i)
		tn.must(http.StatusAccepted, "POST", "/v1/topics/f/produce", []byte(b))
		accepted = append(accepted, b)
	}
	got := consumeAll(t, tn, "f", accepted)
	for b := range got {
		if len(b) > 7 && (b[:7] == `"fsync-` || b[:7] == `"write-`) {
			t.Fatalf("consumed %s: got a record whose produce was refused, want none (its WAL write was cut)", b)
		}
	}
}

// The node's injected clock steps as a wall clock does: a step forward
// past the visibility timeout makes every lease out expire, so the leased
// records are delivered again (duplicates, never a loss); a step back
// makes leases last longer, and loses nothing either. The steps add up.
func TestFaultClockStepPastTheVisibilityTimeoutRedeliversAndABackStepLosesNothing(t *testing.T) {
	base := newFakeClock() // under the steps, so the test's own time never counts
	tn := newTestNode(t, func(c *Config) { c.DebugFaults, c.clock = true, base })
	tn.must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"steps","partitions":3,"visibility_timeout_ms":60000}`))
	for i := range 3 {
		tn.must(http.StatusAccepted, "POST", "/v1/topics/steps/produce", []byte(fmt.Sprintf(`"r%d"`, i)))
	}
	leased := map[string]string{} // body: handle
	for len(leased) < 3 {
		m := tn.consume("steps", "wait=2s")
		if m == nil {
			t.Fatalf("consume %d: got nothing, want a record", len(leased))
		}
		leased[string(m.Payload)] = m.ReceiptHandle
	}
	if m := tn.consume("steps", ""); m != nil {
		t.Fatalf("consume with all three leased: got %s, want nothing", m.Payload)
	}

	tn.must(http.StatusNoContent, "POST", "/debug/faults/clock", []byte(`{"step_ms":60001}`))
	if got := faultsStatus(t, tn); got.ClockOffsetMs != 60001 || got.Disk != "off" {
		t.Fatalf("faults after a step of 60001 ms: got %+v, want offset 60001, disk off", got)
	}
	again := map[string]bool{}
	for len(again) < 3 {
		m := tn.consume("steps", "")
		if m == nil {
			t.Fatalf("after the step: got %d of 3 redelivered, want every leased record again", len(again))
		}
		b := string(m.Payload)
		if _, ok := leased[b]; !ok || again[b] {
			t.Fatalf("after the step: got %s, want one of the three leased, once", b)
		}
		again[b] = true
		tn.must(http.StatusGone, "POST", "/v1/topics/steps/ack?receipt_handle="+url.QueryEscape(leased[b]), nil)
		tn.must(http.StatusNoContent, "POST", "/v1/topics/steps/ack?receipt_handle="+url.QueryEscape(m.ReceiptHandle), nil)
	}

	tn.must(http.StatusAccepted, "POST", "/v1/topics/steps/produce", []byte(`"r3"`))
	r3 := tn.consume("steps", "wait=2s")
	if r3 == nil || string(r3.Payload) != `"r3"` {
		t.Fatalf("consume after the acks: got %+v, want r3", r3)
	}
	tn.must(http.StatusNoContent, "POST", "/debug/faults/clock", []byte(`{"step_ms":-120000}`))
	if got := faultsStatus(t, tn); got.ClockOffsetMs != -59999 {
		t.Fatalf("faults after a step back of 120000 ms: got offset %d, want -59999", got.ClockOffsetMs)
	}
	tn.must(http.StatusAccepted, "POST", "/v1/topics/steps/produce", []byte(`"r4"`))
	r4 := tn.consume("steps", "wait=2s")
	if r4 == nil || string(r4.Payload) != `"r4"` {
		t.Fatalf("consume after the step back: got %+v, want r4", r4)
	}
	base.Advance(time.Minute) // real time goes on: r4's lease, taken after the step, ends now
	if m := tn.consume("steps", ""); m == nil || string(m.Payload) != `"r4"` {
		t.Fatalf("a minute of real time after r4's lease: got %+v, want r4 again, and r3 still leased", m)
	} else {
		tn.must(http.StatusNoContent, "POST", "/v1/topics/steps/ack?receipt_handle="+url.QueryEscape(m.ReceiptHandle), nil)
	}
	// r3's lease was taken before the step back: it now ends two minutes
	// later than it would have, and its handle still acks.
	tn.must(http.StatusNoContent, "POST", "/v1/topics/steps/ack?receipt_handle="+url.QueryEscape(r3.ReceiptHandle), nil)
	if m := tn.consume("steps", ""); m != nil {
		t.Fatalf("with every record acked: got %s, want nothing", m.Payload)
	}
}

// Bad bodies are 400 with the reason; the switches stay as they were.
func TestFaultRoutesRefuseBadBodies(t *testing.T) {
	tn := newTestNode(t, func(c *Config) { c.DebugFaults = true })
	for _, tc := range []struct{ path, body string }{
		{"/debug/faults/disk", `{"fail":"sync"}`},
		{"/debug/faults/disk", `{}`},
		{"/debug/faults/disk", `{"fail":"fsync","extra":1}`},
		{"/debug/faults/clock", `{}`},
		{"/debug/faults/clock", `{"step_ms":3600001}`},
		{"/debug/faults/clock", `{"step_ms":-3600001}`},
		{"/debug/faults/clock", `{"step_ms":1.5}`},
	} {
		tn.must(http.StatusBadRequest, "POST", tc.path, []byte(tc.body))
	}
	if got := faultsStatus(t, tn); got != (messages.FaultsStatus{Disk: "off"}) {
		t.Fatalf("faults after refused bodies: got %+v, want disk off, offset 0", got)
	}
	tn.must(http.StatusNoContent, "POST", "/debug/faults/clock", []byte(`{"step_ms":-3600000}`))
}

// Without --debug-faults the routes are unknown paths.
func TestFaultRoutesAreUnknownWithoutDebugFaults(t *testing.T) {
	tn := newTestNode(t)
	tn.must(http.StatusNotFound, "GET", "/debug/faults", nil)
	tn.must(http.StatusNotFound, "POST", "/debug/faults/disk", []byte(`{"fail":"fsync"}`))
	tn.must(http.StatusNotFound, "POST", "/debug/faults/clock", []byte(`{"step_ms":1000}`))
}

package partition

import (
	"time"

	"github.com/naradmq/narad/storage"
)

// ackMemory remembers the leases a partition acked lately, so that a retried
// ack of the same receipt handle answers 204 again instead of 410. A client
// retries an ack whose answer it never got: the node that forwarded the ack
// died after the owner applied it, or the connection broke on the way back.
// Without the memory the retry finds no lease, the client reads "no active
// reservation" and concludes its ack was lost, while the record is acked for
// good and never comes back to anyone.
//
// Only the same (offset, nonce) counts: a handle replaced by a redelivery, a
// nacked or expired one, and a record acked through another handle still
// answer 410 (API contract section 10), because none of them was acked
// through this handle.
//
// Bounds: an entry lives for window after its ack, and at most max entries
// are kept, the oldest dropped first; so a partition holds min(ack rate x
// window, max) entries, and an idle one none (the storage is released when
// the last entry goes). The newest few entries are written with the
// consumer state (newest, Config.AckMemoryPersistedMax) and remembered
// again when the partition opens, so a retry that reaches the next life of
// a killed owner still answers 204; a move forgets them all. A pure value:
// no clock (every call is handed now), no I/O; the partition actor is its
// only user.
type ackMemory struct {
	window time.Duration
	max    int
	// fifo holds the entries in ack order from head on; since now never
	// goes back, their until is ascending, so expiry pops from the head.
	fifo []rememberedAck
	head int
	// byOffset is the newest entry of each offset. Within one life of the
	// actor an offset is acked once (the log only grows), but the memory
	// does not count on it: an older fifo entry never removes a newer one.
	byOffset map[int64]rememberedAck
}

type rememberedAck struct {
	offset int64
	nonce  uint64
	until  time.Time
}

func newAckMemory(window time.Duration, max int) ackMemory {
	return ackMemory{window: window, max: max}
}

// remember notes that (offset, nonce) was acked at now.
func (m *ackMemory) remember(now time.Time, offset int64, nonce uint64) {
	if m.max <= 0 || m.window <= 0 {
		return
	}
	m.expire(now)
	if m.len() >= m.max {
		m.pop()
	}
	e := rememberedAck{offset: offset, nonce: nonce, until: now.Add(m.window)}
	if m.byOffset == nil {
		m.byOffset = make(map[int64]rememberedAck)
	}
	m.byOffset[offset] = e
	m.fifo = append(m.fifo, e)
}

// acked reports whether (offset, nonce) is a handle acked within the window
// before now and not yet dropped for room.
func (m *ackMemory) acked(now time.Time, offset int64, nonce uint64) bool {
	m.expire(now)
	e, ok := m.byOffset[offset]
	return ok && e.nonce == nonce
}

func (m *ackMemory) len() int { return len(m.fifo) - m.head }

// expire drops the entries whose window has passed at now.
func (m *ackMemory) expire(now time.Time) {
	for m.len() > 0 && !m.fifo[m.head].until.After(now) {
		m.pop()
	}
}

// pop drops the oldest entry. The slice is compacted once half of it is
// dead, so it stays within twice the live count, O(1) amortised.
func (m *ackMemory) pop() {
	e := m.fifo[m.head]
	if cur, ok := m.byOffset[e.offset]; ok && cur == e {
		delete(m.byOffset, e.offset)
	}
	m.fifo[m.head] = rememberedAck{}
	m.head++
	if m.releaseIfEmpty() {
		return
	}
	if m.head > len(m.fifo)/2 {
		n := copy(m.fifo, m.fifo[m.head:])
		clear(m.fifo[n:])
		m.fifo, m.head = m.fifo[:n], 0
	}
}

// releaseIfEmpty gives the storage back when nothing is remembered: a map
// keeps its buckets after deletes, and an idle partition should cost none.
func (m *ackMemory) releaseIfEmpty() bool {
	if m.len() > 0 {
		return false
	}
	m.fifo, m.head, m.byOffset = nil, 0, nil
	return true
}

// newest appends to dst up to n of the handles remembered last, oldest
// first: what the consumer state carries to the next life. They are acked
// offsets (the table acked each), as storage.ConsumerState requires.
func (m *ackMemory) newest(dst []storage.AckedHandle, n int) []storage.AckedHandle {
	live := m.fifo[m.head:]
	for _, e := range live[max(0, len(live)-n):] {
		dst = append(dst, storage.AckedHandle{Offset: e.offset, Nonce: e.nonce})
	}
	return dst
}

// Package history records what a test client did against a broker (which
// produces were accepted, which failed, what was delivered where, what was
// acked) and checks the result against the broker's promises:
//
//   - every produce answered 202 is consumed at least once (no loss);
//   - nothing is delivered that was never produced (no phantom);
//   - one topic/partition/offset never holds two different messages (no
//     reused offset);
//   - nothing is delivered at or past a partition's high watermark.
//
// Duplicates are allowed (the broker is at-least-once) and only counted.
// Messages are told apart by an id the producer embeds in the body; see
// MakeBody and ParseBody. Load runs, crash tests and cluster tests share it.
//
// Start with History in history.go: a client calls Produced (or
// ProduceFailed), Consumed and Acked as it goes, HighWatermark once the run
// has drained, and Check judges it all into a Report. body.go is the
// message side: the id in the body, and Delivered for a test that holds a
// raw consume response.
package history

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// History is safe for concurrent use by any number of producers and
// consumers. The zero value is not ready: use New.
type History struct {
	mu sync.Mutex

	// produced holds ids answered 202; maybe holds ids whose produce was
	// answered with an error or not at all, so the record may or may not
	// exist (and a retried produce may have stored it twice).
	produced map[string]struct{}
	maybe    map[string]struct{}

	// deliveries counts deliveries per id; positions holds the distinct
	// places an id was delivered from.
	deliveries map[string]int
	positions  map[string][]Position
	// atPosition holds the distinct ids delivered from each place, to catch
	// an offset that the broker handed out twice.
	atPosition map[Position][]string
	acked      map[string]struct{}

	// watermarks holds the highest high watermark seen per partition.
	watermarks map[Partition]int64

	// outstanding counts ids answered 202 and not delivered yet, kept up
	// to date so that a load driver can poll it cheaply while draining.
	outstanding int
}

// Partition names one partition of one topic.
type Partition struct {
	Topic     string
	Partition int
}

// Position is where a message was delivered from.
type Position struct {
	Topic     string
	Partition int
	Offset    int64
}

func (p Position) String() string {
	return fmt.Sprintf("%s/%d@%d", p.Topic, p.Partition, p.Offset)
}

// New returns an empty history.
func New() *History {
	return &History{
		produced:   map[string]struct{}{},
		maybe:      map[string]struct{}{},
		deliveries: map[string]int{},
		positions:  map[string][]Position{},
		atPosition: map[Position][]string{},
		acked:      map[string]struct{}{},
		watermarks: map[Partition]int64{},
	}
}

// Produced records a produce the broker answered with 202. Recording the
// same id again (a retry that finally got 202) is harmless.
func (h *History) Produced(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.produced[id]; ok {
		return
	}
	h.produced[id] = struct{}{}
	// A consumer can see the record before the producer sees its 202, so
	// the id only counts as outstanding when nobody has consumed it yet.
	if h.deliveries[id] == 0 {
		h.outstanding++
	}
}

// ProduceFailed records a produce that was answered with anything but 202,
// or not answered at all: the record may exist or not.
func (h *History) ProduceFailed(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.maybe[id] = struct{}{}
}

// Consumed records one delivery, whether or not it is acked later. Replay
// reads count as deliveries too.
func (h *History) Consumed(id string, topic string, partition int, offset int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	pos := Position{Topic: topic, Partition: partition, Offset: offset}
	h.deliveries[id]++
	if h.deliveries[id] == 1 {
		if _, ok := h.produced[id]; ok {
			h.outstanding--
		}
	}
	if !containsPosition(h.positions[id], pos) {
		h.positions[id] = append(h.positions[id], pos)
	}
	if !containsString(h.atPosition[pos], id) {
		h.atPosition[pos] = append(h.atPosition[pos], id)
	}
}

// Acked records a successful ack of a delivered message.
func (h *History) Acked(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.acked[id] = struct{}{}
}

// HighWatermark records a partition's high watermark (exclusive bound of
// the visible records). Call it after the last delivery that it should
// judge, for instance from GET /v1/topics/{topic} once the run has drained:
// a high watermark never goes back, so any delivery at or past one observed
// later exposed a record that was not committed. The highest value recorded
// per partition is kept.
func (h *History) HighWatermark(topic string, partition int, hwm int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := Partition{Topic: topic, Partition: partition}
	if cur, ok := h.watermarks[p]; !ok || hwm > cur {
		h.watermarks[p] = hwm
	}
}

// Outstanding returns how many ids answered 202 have not been delivered
// yet. It costs O(1), for polling while a run drains.
func (h *History) Outstanding() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.outstanding
}

// Report is the outcome of Check.
type Report struct {
	// Produced counts distinct ids answered 202; MaybeProduced counts the
	// distinct ids whose produce failed and that never got a 202.
	Produced      int
	MaybeProduced int
	// Consumed counts distinct ids delivered at least once; Deliveries
	// counts every delivery.
	Consumed   int
	Deliveries int
	// Acked counts distinct ids acked.
	Acked int
	// Lost lists, sorted, the ids answered 202 and never delivered.
	Lost []string
	// Duplicates counts deliveries beyond the first per id: redeliveries
	// after a lease ran out, and copies stored by retried produces.
	Duplicates int
	// DuplicateRecords counts, per id, the positions beyond the first it
	// was delivered from: copies stored twice, which a retried produce may
	// explain. Informational; part of Duplicates.
	DuplicateRecords int
	// UnknownConsumed counts delivered ids that were never produced, not
	// even by a failed produce: a phantom, which is a broker bug.
	UnknownConsumed int
	// OffsetConflicts counts, per topic/partition/offset, the distinct ids
	// beyond the first delivered from it: the broker reused an offset.
	OffsetConflicts int
	// BeyondWatermark counts positions delivered at or past the highest
	// high watermark recorded for their partition.
	BeyondWatermark int
	// Examples holds a few readable samples of each kind of violation.
	Examples []string
}

// maxExamples bounds Report.Examples so that a badly broken run still gives
// a readable report.
const maxExamples = 10

// Check compares what was produced with what was delivered. It may be
// called at any time, also while producers and consumers still run.
func (h *History) Check() Report {
	h.mu.Lock()
	defer h.mu.Unlock()

	r := Report{
		Produced: len(h.produced),
		Consumed: len(h.deliveries),
		Acked:    len(h.acked),
	}
	for id := range h.maybe {
		if _, ok := h.produced[id]; !ok {
			r.MaybeProduced++
		}
	}
	for id := range h.produced {
		if h.deliveries[id] == 0 {
			r.Lost = append(r.Lost, id)
		}
	}
	sort.Strings(r.Lost)
	for i, id := range r.Lost {
		if i == 3 {
			break
		}
		r.Examples = append(r.Examples, "lost "+id)
	}

	// Walk ids in order so that the examples do not depend on map order.
	ids := make([]string, 0, len(h.deliveries))
	for id := range h.deliveries {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		n := h.deliveries[id]
		r.Deliveries += n
		r.Duplicates += n - 1
		r.DuplicateRecords += len(h.positions[id]) - 1
		_, produced := h.produced[id]
		_, maybe := h.maybe[id]
		if !produced && !maybe {
			r.UnknownConsumed++
			r.addExample(fmt.Sprintf("phantom %s at %s", id, h.positions[id][0]))
		}
	}

	positions := make([]Position, 0, len(h.atPosition))
	for pos := range h.atPosition {
		positions = append(positions, pos)
	}
	sort.Slice(positions, func(i, j int) bool { return positionLess(positions[i], positions[j]) })
	for _, pos := range positions {
		idsHere := h.atPosition[pos]
		if len(idsHere) > 1 {
			r.OffsetConflicts += len(idsHere) - 1
			r.addExample(fmt.Sprintf("offset conflict at %s: %s", pos, strings.Join(idsHere, ", ")))
		}
		if hwm, ok := h.watermarks[Partition{Topic: pos.Topic, Partition: pos.Partition}]; ok && pos.Offset >= hwm {
			r.BeyondWatermark++
			r.addExample(fmt.Sprintf("delivery at %s is past the high watermark %d", pos, hwm))
		}
	}
	return r
}

func (r *Report) addExample(s string) {
	if len(r.Examples) < maxExamples {
		r.Examples = append(r.Examples, s)
	}
}

// OK reports whether the broker kept its promises: nothing lost, no
// phantom, no reused offset, nothing past a high watermark. Duplicates are
// allowed.
func (r Report) OK() bool {
	return len(r.Lost) == 0 && r.UnknownConsumed == 0 && r.OffsetConflicts == 0 && r.BeyondWatermark == 0
}

// String gives a short multi-line summary, with examples when not OK.
func (r Report) String() string {
	var b strings.Builder
	verdict := "OK"
	if !r.OK() {
		verdict = "FAILED"
	}
	fmt.Fprintf(&b, "history %s: produced %d (+%d maybe), consumed %d distinct in %d deliveries, acked %d\n",
		verdict, r.Produced, r.MaybeProduced, r.Consumed, r.Deliveries, r.Acked)
	fmt.Fprintf(&b, "  lost %d, duplicates %d (%d stored twice), phantoms %d, offset conflicts %d, past high watermark %d",
		len(r.Lost), r.Duplicates, r.DuplicateRecords, r.UnknownConsumed, r.OffsetConflicts, r.BeyondWatermark)
	for _, e := range r.Examples {
		b.WriteString("\n  ")
		b.WriteString(e)
	}
	return b.String()
}

func positionLess(a, b Position) bool {
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	if a.Partition != b.Partition {
		return a.Partition < b.Partition
	}
	return a.Offset < b.Offset
}

// The per-id and per-position lists stay tiny (one entry unless something
// was duplicated), so a linear scan beats a nested map.
func containsPosition(ps []Position, p Position) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

func containsString(ss []string, s string) bool {
	for _, q := range ss {
		if q == s {
			return true
		}
	}
	return false
}

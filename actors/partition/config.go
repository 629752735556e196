package partition

import (
	"fmt"
	"time"
)

// Config is the partition actors' part of the node's configuration
// (actors.Config composes it as Partition): the settings no other part of
// the node reads. Every limit has its unit in its name.
type Config struct {
	// ConsumerFlushInterval is how often a partition writes its consumer
	// position after an ack (the seed's 100 ms bound on redelivery after a
	// restart).
	ConsumerFlushInterval time.Duration
	// LeaseDrainTimeout is how long a prepare waits for leases out before
	// it reports (the seed's 500 ms, or a quarter of FreezeTTL if shorter).
	LeaseDrainTimeout time.Duration
	// MoveChunkReadsInFlight bounds the chunk reads one source partition
	// serves off its actor at once (8): each holds up to MoveChunkBytes,
	// and off the actor a read neither waits behind the partition's
	// commits nor holds them up. Past it a read runs on the actor, which
	// slows the asker down rather than queueing more memory.
	MoveChunkReadsInFlight int
	// AckMemoryWindow is how long a partition remembers a handle it acked,
	// so that a retry of that ack answers 204, not 410 (ackMemory): a
	// client retries when the node that forwarded its ack died, or the
	// connection broke, after the owner applied it. A minute covers a
	// client's request timeout and a few retries; 0 turns it off.
	AckMemoryWindow time.Duration
	// AckMemoryEntriesMax bounds the handles one partition remembers
	// (about 40 bytes each), oldest dropped first: a busy partition keeps
	// the last AckMemoryEntriesMax acks, not a minute of them.
	AckMemoryEntriesMax int
	// AckWriteThroughEntriesMax: while a partition's acked-ahead set holds
	// at most this many offsets, an ack is answered only once the consumer
	// state holding it is written (to the page cache; the fsync still
	// comes every SyncInterval), one write for the acks of a mailbox
	// burst, so a process killed after a 204 does not deliver the record
	// again. Each write rewrites the set (8 bytes an offset), so above
	// this size acks are answered at once and written by the
	// ConsumerFlushInterval timer, as before. 0 turns it off.
	AckWriteThroughEntriesMax int
	// AckMemoryPersistedMax is how many of the handles acked last each
	// consumer-state write carries (16 bytes each), remembered again when
	// the partition opens: the acks in flight when a process is killed are
	// retried against its next life, and there are about as many as
	// consumers acking at once, not a minute of them. 0 writes none.
	AckMemoryPersistedMax int
	// LeasePersistedMax is how many of a partition's leases out each
	// consumer-state write carries (24 bytes each, lowest offsets first),
	// restored at open with a full visibility each (restoreLeases): a
	// consumer holding a record when its owner was killed retries its ack
	// against the next life and finds its lease, where the record would
	// otherwise go at once to another consumer, a duplicate. While a
	// partition holds at most this many leases, a delivery is answered
	// only once the state holding its lease is written (to the page
	// cache, one write per mailbox burst, as acks are); above it the
	// timer writes them. The price: after a crash, a record whose holder
	// died with it waits one more visibility. 0 turns it off.
	LeasePersistedMax int
	// LeaseRestoreSpanMax bounds how far past the frontier a restored
	// lease may lie: every unacked offset below the highest one restored
	// becomes redeliverable at open, a map entry each, since the last life
	// may have delivered it. A lease further out is not restored; its
	// record is served again at once.
	LeaseRestoreSpanMax int64
	// RestAfter is how long a partition with nothing in flight (no lease,
	// write, freeze, move or fan-out) keeps its actor before it closes its
	// log and stops (passivation, issue 50): at rest it holds no actor,
	// timer, goroutine or open file, and the next request opens it again,
	// a log open's cost (about a fifth of a millisecond here). Two
	// minutes: far above any client's retry or poll gap, so a partition in
	// use never pays the open, and short beside the hours an idle queue
	// sits. 0 keeps every partition open.
	RestAfter time.Duration
	// ColdProbesPerPassMax bounds the partitions resting since the node
	// started whose oldest segment one retention pass reads from disk (a
	// directory listing and a stat each, in the supervisor's mailbox):
	// 4,096 keeps a pass to tens of milliseconds, so wakes and reconciles
	// do not wait behind it, and a node of 100,000 partitions knows every
	// one within 25 passes (25 minutes at the node's default
	// RetentionInterval); retention removes whole segments, days old by
	// default, so a later removal costs disk, not a record.
	ColdProbesPerPassMax int
	// SurveyOpensMax bounds the partitions started at rest that the
	// supervisor opens at once after the start to read their figures,
	// each resting again at once (Supervisor.survey): the topic gauges,
	// the announcement of records to deliver, the stats and drained mark
	// at the door. 4: the opens run beside the node's traffic, about a
	// fifth of a millisecond of CPU each, and each open takes a slot of
	// the node's open bound; a node of 100,000 partitions is surveyed in
	// well under a minute. 0: no survey; a partition at rest since the
	// start is missing from the topic gauges, and its records wait for a
	// consumer's full scan, until its first request.
	SurveyOpensMax int
	// CreatedAtRest starts a partition created on this node at rest, its
	// log not opened until its first request other than a stats read or a
	// lease (Supervisor.startEmpty), while RestAfter is on: a create of
	// 300,000 partitions took the cluster 128-169 s, most of it opening
	// logs nobody had written to (issue 50). Off, each opens at its
	// create, as before.
	CreatedAtRest bool
}

// DefaultConfig is the partition actors' settings as a node runs them.
func DefaultConfig() Config {
	return Config{ConsumerFlushInterval: 100 * time.Millisecond, LeaseDrainTimeout: 500 * time.Millisecond,
		MoveChunkReadsInFlight: 8, AckMemoryWindow: time.Minute, AckMemoryEntriesMax: 4096,
		AckWriteThroughEntriesMax: 1024, AckMemoryPersistedMax: 64, LeasePersistedMax: 1024, LeaseRestoreSpanMax: 1 << 16,
		RestAfter: 2 * time.Minute, ColdProbesPerPassMax: 4096, SurveyOpensMax: 4, CreatedAtRest: true}
}

// Validate reports the first field out of range, naming it.
func (c Config) Validate() error {
	bad := func(field string, v any, why string) error {
		return fmt.Errorf("partition config: %s %v %s", field, v, why)
	}
	switch {
	case c.ConsumerFlushInterval <= 0:
		return bad("ConsumerFlushInterval", c.ConsumerFlushInterval, "must be positive")
	case c.MoveChunkReadsInFlight < 0 || c.MoveChunkReadsInFlight > 64:
		return bad("MoveChunkReadsInFlight", c.MoveChunkReadsInFlight, "must be within 0..64 (0: every chunk read on the partition's actor)")
	case c.AckMemoryWindow < 0 || c.AckMemoryWindow > time.Hour:
		return bad("AckMemoryWindow", c.AckMemoryWindow, "must be within 0..1h (0: a retried ack of an acked handle answers 410)")
	case c.AckMemoryEntriesMax < 0 || c.AckMemoryEntriesMax > 1<<20:
		return bad("AckMemoryEntriesMax", c.AckMemoryEntriesMax, "must be within 0..1048576")
	case c.AckWriteThroughEntriesMax < 0 || c.AckWriteThroughEntriesMax > 1<<16:
		return bad("AckWriteThroughEntriesMax", c.AckWriteThroughEntriesMax, "must be within 0..65536 (0: acks are answered before their state is written)")
	case c.AckMemoryPersistedMax < 0 || c.AckMemoryPersistedMax > 1024:
		return bad("AckMemoryPersistedMax", c.AckMemoryPersistedMax, "must be within 0..1024 (the consumer state's limit)")
	case c.LeasePersistedMax < 0 || c.LeasePersistedMax > 1<<16:
		return bad("LeasePersistedMax", c.LeasePersistedMax, "must be within 0..65536 (the consumer state's limit; 0: leases die with the process)")
	case c.LeasePersistedMax > 0 && (c.LeaseRestoreSpanMax < 1 || c.LeaseRestoreSpanMax > 1<<22):
		return bad("LeaseRestoreSpanMax", c.LeaseRestoreSpanMax, "must be within 1..4194304 while leases are persisted")
	case c.RestAfter != 0 && (c.RestAfter < 100*time.Millisecond || c.RestAfter > 24*time.Hour):
		return bad("RestAfter", c.RestAfter, "must be 0 (never) or within 100ms..24h")
	case c.ColdProbesPerPassMax < 1 || c.ColdProbesPerPassMax > 1<<20:
		return bad("ColdProbesPerPassMax", c.ColdProbesPerPassMax, "must be within 1..1048576")
	case c.SurveyOpensMax < 0 || c.SurveyOpensMax > 256:
		return bad("SurveyOpensMax", c.SurveyOpensMax, "must be within 0..256 (0: no survey)")
	case c.LeaseDrainTimeout < 0:
		return bad("LeaseDrainTimeout", c.LeaseDrainTimeout, "must not be negative")
	}
	return nil
}

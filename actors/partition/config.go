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
}

// DefaultConfig is the partition actors' settings as a node runs them.
func DefaultConfig() Config {
	return Config{ConsumerFlushInterval: 100 * time.Millisecond, LeaseDrainTimeout: 500 * time.Millisecond,
		MoveChunkReadsInFlight: 8, AckMemoryWindow: time.Minute, AckMemoryEntriesMax: 4096}
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
	case c.LeaseDrainTimeout < 0:
		return bad("LeaseDrainTimeout", c.LeaseDrainTimeout, "must not be negative")
	}
	return nil
}

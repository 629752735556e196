package mover

import "github.com/naradmq/narad/messages"

// DropEarlier asks the partitions supervisor to drop whatever in-memory
// consumer state an earlier ownership of the partition left on this node
// (rule K7): a move's destination asks before its install and again after
// it. The supervisor stops the partition's actor if one still runs while
// the node does not own the partition; the answer is DroppedEarlier. The
// mover declares it because it is the one asking; the partitions
// supervisor (Deps.Partitions) answers it.
type DropEarlier struct{ Key messages.PartitionKey }

// DroppedEarlier answers DropEarlier; Stopped says an actor was stopped.
type DroppedEarlier struct{ Stopped bool }

package partition

import (
	"sync"

	"github.com/naradmq/narad/messages"
)

// Running is the set of partitions the supervisor runs an actor for. The
// supervisor alone writes it, in its Receive, at each spawn and each stop;
// a move worker reads it to skip asking the supervisor to drop an earlier
// ownership's state (rule K7, messages.DropEarlier) of a partition nothing
// runs for: there is nothing to drop, and the ask would wait in the
// supervisor's mailbox behind the reconciles of a bulk move, inside the
// partition's freeze (issue 46). An actor spawned after the worker looked
// is one of an ownership that begins with the flip, not an earlier one:
// the supervisor spawns only for partitions the replica says this node
// owns, and while the move is in flight it says the source does. Safe for
// concurrent use; a nil Running answers every Has with true (ask).
type Running struct{ m sync.Map }

// Has reports whether an actor runs for k.
func (r *Running) Has(k messages.PartitionKey) bool {
	if r == nil {
		return true
	}
	_, ok := r.m.Load(k)
	return ok
}

func (r *Running) add(k messages.PartitionKey) {
	if r != nil {
		r.m.Store(k, struct{}{})
	}
}

func (r *Running) remove(k messages.PartitionKey) {
	if r != nil {
		r.m.Delete(k)
	}
}

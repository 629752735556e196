package partition

import (
	"fmt"
	"maps"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/messages"
)

// Running is the set of partitions the supervisor runs an actor for, and
// the door every request to one of them passes (Ask): a partition at rest
// (passivated, issue 50) has a closed door and no actor, and a request
// that finds its door closed wakes it first.
//
// The supervisor alone adds and removes doors, in its Receive, at each
// spawn and each stop. An actor closes its own door to rest, only while no
// request is in flight through it: a request counts itself in (enter)
// before it is sent and out (leave) once answered, under the same lock as
// the close, so no request ever reaches an actor that is resting or about
// to, and none is lost or passed by one sent after it (the sender waits
// for the wake, then sends).
//
// A move worker reads Has to skip asking the supervisor to drop an
// earlier ownership's state (rule K7, messages.DropEarlier) of a partition
// nothing runs for: there is nothing to drop, and the ask would wait in
// the supervisor's mailbox behind the reconciles of a bulk move, inside
// the partition's freeze (issue 46). An actor spawned after the worker
// looked is one of an ownership that begins with the flip, not an earlier
// one: the supervisor spawns only for partitions the replica says this
// node owns, and while the move is in flight it says the source does. A
// resting partition holds no state to drop either.
//
// Safe for concurrent use; a nil Running answers every Has with true (ask)
// and lets every request through.
type Running struct {
	mu    sync.Mutex
	doors map[messages.PartitionKey]*door
	// stopping holds the partitions whose actor was stopped to rest and
	// has not ended: it may still write its files as it closes, so Has
	// counts it (a move's install asks the supervisor, which waits for
	// the end, rule K7).
	stopping map[messages.PartitionKey]bool
	// closed counts the doors that are closed: the partitions served here
	// at rest, read by the resting gauge (Closed).
	closed int
}

// door is one partition's: open while its actor takes requests, and how
// many requests are on their way through it.
type door struct {
	open     bool
	inflight int
	// stats is what the partition's stats were when it closed the door to
	// rest: nothing changes a resting partition but a wake, so a stats
	// read (a console's poll, a client's wait for a create) is answered
	// from it without one. Nil while open, and for a partition that rests
	// again after a failed open.
	stats *messages.PartitionStats
	// drained: when it rested every record was acked, so a lease asked of
	// it finds nothing and is answered empty at the door (a consumer
	// polling its topic does not keep it open); only a commit, which
	// wakes it, gives it a record to deliver.
	drained bool
}

// Has reports whether an actor runs for k: one that takes requests, or
// one stopped to rest that has not ended.
func (r *Running) Has(k messages.PartitionKey) bool {
	if r == nil {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.doors[k]
	return d != nil && d.open || r.stopping[k]
}

// stopStarted and stopEnded bracket the stop of k's actor to rest.
func (r *Running) stopStarted(k messages.PartitionKey) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.markStoppingLocked(k)
}

// markStoppingLocked counts k's actor as running until its end
// (stopEnded); r.mu is held.
func (r *Running) markStoppingLocked(k messages.PartitionKey) {
	if r.stopping == nil {
		r.stopping = map[messages.PartitionKey]bool{}
	}
	r.stopping[k] = true
}

func (r *Running) stopEnded(k messages.PartitionKey) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.stopping, k)
}

// add opens k's door: its actor was just spawned.
func (r *Running) add(k messages.PartitionKey) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if d := r.doors[k]; d != nil {
		if !d.open {
			r.closed--
		}
		d.open, d.stats, d.drained = true, nil, false
		return
	}
	r.putLocked(k, &door{open: true})
}

// putLocked gives k, which has none, door d; r.mu is held.
func (r *Running) putLocked(k messages.PartitionKey, d *door) {
	if r.doors == nil {
		r.doors = map[messages.PartitionKey]*door{}
	}
	if r.doors[k] != nil {
		panic(fmt.Sprintf("partition: a second door for %v", k))
	}
	r.doors[k] = d
	if !d.open {
		r.closed++
	}
}

// closeEmpty closes k's door, which has none yet, with the stats of a
// partition that holds nothing and nothing to deliver (drained): one
// created here that never opened its log (Supervisor.startEmpty). Its
// stats are those its open will give it, one empty segment, which is what
// the contract promises of a partition that is served.
func (r *Running) closeEmpty(k messages.PartitionKey) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.putLocked(k, &door{stats: &messages.PartitionStats{Index: k.Partition, Segments: 1}, drained: true})
}

// remove forgets k's door: the partition is neither served nor at rest
// here any more.
func (r *Running) remove(k messages.PartitionKey) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if d := r.doors[k]; d != nil && !d.open {
		r.closed--
	}
	delete(r.doors, k)
}

// enter counts a request in through k's open door; nil when the door is
// closed or there is none (the partition rests, or is not served here).
func (r *Running) enter(k messages.PartitionKey) *door {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.doors[k]
	if d == nil || !d.open {
		return nil
	}
	d.inflight++
	return d
}

// leave counts out a request enter let through d, once it was answered.
func (r *Running) leave(d *door) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d.inflight <= 0 {
		panic("partition door: a request left that never entered")
	}
	d.inflight--
}

// Enter counts in a request its caller sends itself (the dispatcher's
// pipelined commits, which must reach the mailbox in the order sent);
// leave counts it out once answered. ok is false when the door is closed
// or there is none: wake the partition first (Wake). A nil Running lets
// every request through.
func (r *Running) Enter(k messages.PartitionKey) (leave func(), ok bool) {
	if r == nil {
		return func() {}, true
	}
	d := r.enter(k)
	if d == nil {
		return nil, false
	}
	return func() { r.leave(d) }, true
}

// Wake is the supervisor's address and the message that wakes k there.
func (r *Running) Wake(sys *actor.ActorSystem, k messages.PartitionKey) (*actor.PID, any) {
	return SupervisorPID(sys), Wake{Key: k}
}

// rest closes k's door if no request is on its way through it, and
// reports whether it did: the actor may then stop, and the next request
// wakes the partition through the supervisor, but a stats read, which
// stats answers (the partition's as it closed, exact: no request is in
// flight, and its actor takes none after this).
//
// drained says whether every record was acked as it rested.
func (r *Running) rest(k messages.PartitionKey, stats *messages.PartitionStats, drained bool) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.doors[k]
	if d == nil || !d.open || d.inflight > 0 {
		return false
	}
	d.open, d.stats, d.drained = false, stats, drained
	r.closed++
	// Still running until its end (stopEnded): counted from the close on,
	// or a move could find nothing running before the stop began.
	r.markStoppingLocked(k)
	return true
}

// closedDoor is what a resting partition left at its door: a copy of its
// stats (nil: none left) and whether it rested drained. ok is false when
// k's door is open or absent: k does not rest.
func (r *Running) closedDoor(k messages.PartitionKey) (stats *messages.PartitionStats, drained, ok bool) {
	if r == nil {
		return nil, false, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.doors[k]
	if d == nil || d.open {
		return nil, false, false
	}
	if d.stats != nil {
		st := *d.stats
		st.Cursors = maps.Clone(st.Cursors)
		stats = &st
	}
	return stats, d.drained, true
}

// Resting reports whether k rests: its door is there and closed (its
// actor stopped or is stopping), and a request must wake it first.
func (r *Running) Resting(k messages.PartitionKey) bool { return r.resting(k) }

// close closes k's door, which a request then wakes: the actor woken from
// rest could not open, and the partition rests again.
func (r *Running) close(k messages.PartitionKey) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if d := r.doors[k]; d != nil {
		if d.open {
			d.open = false
			r.closed++
		}
		return
	}
	r.putLocked(k, &door{})
}

// Closed is how many partitions served here rest: their door is closed,
// so no actor takes their requests and none holds an open file once its
// stop ended.
func (r *Running) Closed() int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// resting reports whether k's door is there and closed: its actor rests
// or is on its way to.
func (r *Running) resting(k messages.PartitionKey) bool {
	_, _, ok := r.closedDoor(k)
	return ok
}

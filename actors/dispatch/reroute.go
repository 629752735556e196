package dispatch

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// shorter). Any other failure (a paused owner, a timeout, a refusal, a
// commit too large to send) keeps the records waiting for their partition,
// so a partition a producer named is never overridden because a send
// failed. A commit in flight is waited for: its outcome may still come.
// Records a commit of unknown outcome carried stay even then, while the
// node it went to is a member (splitUnknown); it returns false while any
// stay, so they are retried at their partition.
func (d *Actor) reroute(ctx actor.Context, k messages.PartitionKey, q *partitionQueue) bool {
	if q.inFlight > 0 || q.failingSince.IsZero() || len(q.recs) == 0 || q.tooLarge {
		return false
	}
	now := d.clock.Now()
	why := ""
	switch {
	case !q.frozenSince.IsZero() && now.Sub(q.frozenSince) >= d.deps.Config.RerouteGrace:
		why = "frozen"
	case now.Sub(q.failingSince) >= d.deps.Config.RerouteGrace && d.ownerDead(k):
		why = "owner dead"
	default:
		return false
	}
	to, ok := d.deps.Owners.Sibling(k)
	if !ok {
		return false
	}
	movable, pinned := d.splitUnknown(q)
	d.warnPinned(k, q, len(pinned), why)
	if len(movable) == 0 {
		return false
	}
	d.deps.Logger.Warn("rerouting held records to a live sibling partition", "topic", k.Topic, "from", k.Partition, "to", to.Partition,
		"records", len(movable), "failing_for", now.Sub(q.failingSince), "why", why, "owner", d.deps.Owners.OwnerOf(k))
	if len(pinned) > 0 {
		q.recs = pinned
	} else {
		delete(d.queues, k)
	}
	for _, r := range movable {
		delete(q.unknown, r.Seq)
		r.Partition = int32(to.Partition)
		d.enqueue(ctx, r)
	}
	// Pinned records stay and are retried at their partition this tick.
	return len(pinned) == 0
}

// awaitsOwner reports whether q holds records of a commit of unknown
// outcome while its partition's owner reads dead: then nothing is resent
// until the owner reads alive again (or another node owns the partition,
// or the node is removed and reroute moves them). A paused owner reads
// every request queued for it when it wakes, so each resend meanwhile
// would be one more copy in the partition.
func (d *Actor) awaitsOwner(k messages.PartitionKey, q *partitionQueue) bool {
	if len(q.unknown) == 0 || !d.ownerDead(k) {
		return false
	}
	_, pinned := d.splitUnknown(q)
	d.warnPinned(k, q, len(pinned), "owner dead")
	return len(pinned) > 0
}

// warnPinned logs, once per queue, that records of a commit of unknown
// outcome are held for their owner; what an operator does about it.
func (d *Actor) warnPinned(k messages.PartitionKey, q *partitionQueue, pinned int, why string) {
	if pinned == 0 || q.unknownLogged {
		return
	}
	q.unknownLogged = true
	d.deps.Logger.Warn("holding records whose commit has an unknown outcome: their owner may still commit them, so they wait for it to answer or to be removed from the cluster",
		"topic", k.Topic, "partition", k.Partition, "records", pinned, "owner", d.deps.Owners.OwnerOf(k), "why", why)
}

// splitUnknown parts q's records into those a sibling may take and those
// pinned to their partition: a commit of unknown outcome went to a node
// that is still a member (alive, paused or marked dead), which may commit
// them yet. Once that node is removed from the cluster it commits nothing
// the cluster sees, and its records move on.
func (d *Actor) splitUnknown(q *partitionQueue) (movable, pinned []storage.WALRecord) {
	for _, r := range q.recs {
		node, ok := q.unknown[r.Seq]
		if ok {
			if _, member := d.deps.Store.Member(node); member {
				pinned = append(pinned, r)
				continue
			}
		}
		movable = append(movable, r)
	}
	return movable, pinned
}

// ownerDead reports whether k's owner, as the local replica reads it, is
// dead or gone: no owner, an owner that is no member, or a dead member. A
// paused owner that is not marked dead yet is alive: its commits wait.
func (d *Actor) ownerDead(k messages.PartitionKey) bool {
	owner := d.deps.Owners.OwnerOf(k)
	if owner == "" {
		return true
	}
	m, ok := d.deps.Store.Member(owner)
	return !ok || m.Status == messages.MemberDead
}

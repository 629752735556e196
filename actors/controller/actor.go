package controller

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/actors/supervise"
	"github.com/naradmq/narad/cluster/membership"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// Name is the controller's name under the node's actor system root.
const Name = "controller"

// ErrNotLeader answers a controller request that reached a node which does
// not lead the metadata shard (leadership moved): nothing was done, so the
// caller asks again where the leader is now. It is the node's
// ErrUnavailable (errs.ErrUnavailable) underneath.
var ErrNotLeader = fmt.Errorf("not the metadata leader: %w", errs.ErrUnavailable)

// tickDue is the controller's own timer.
type tickDue struct{}

// changed is the replica having changed (a member leaving, draining or
// registering, a move ending): the leader plans at the busy cadence rather
// than waiting out RebalanceInterval.
type changed struct{}

// Ask carries a ControllerRequest to the local controller; the answer is
// an Answer. The work it starts ends by Deadline, the asker's, so that
// nothing outlives the request.
type Ask struct {
	Deadline time.Time
	Req      messages.ControllerRequest
}

// Answer is the controller's answer to an Ask.
type Answer struct {
	Reply messages.ControllerReply
	Err   error
}

// Deps is what the controller needs of its node. Every field is set by the
// node before the spawn and only read afterwards.
type Deps struct {
	Config Config
	// Membership is the node's heartbeat interval and dead timeout: the
	// liveness pass runs every HeartbeatInterval with a tracker of them,
	// and a barrier waits one HeartbeatInterval at most.
	Membership membership.Config
	// Timeout bounds a placement sweep, a voter check and a rebalance pass
	// (the node's ControllerTimeout, which its asks of the controller
	// share).
	Timeout time.Duration
	// RequestTimeout bounds the ask of a draining node's drain service.
	RequestTimeout time.Duration
	// MaxInFlightMoves caps the moves the planner keeps in flight (the
	// node's, which its freeze pacing also reads).
	MaxInFlightMoves int
	Logger           *slog.Logger
	Store            Store
	// NATS reaches a draining node's drain service; nil without NATS
	// (one node: nothing to ask).
	NATS    *transport.Transport
	Metrics Metrics
	// Clock paces the liveness pass and the rebalance and stamps members'
	// heartbeats as this node sees them: the node's steady clock (package
	// clock), never stepped, so that a test moving the node clock does not
	// find every member silent. Nil is the wall clock.
	Clock clock.Clock
}

// Actor is the controller. It runs on every node and acts only while this node leads
// the metadata shard, so there is one decider at a time:
//   - liveness: it stamps members' heartbeats on this node's own clock and
//     proposes dead/alive transitions. Leadership lost drops the tracker,
//     and leadership won starts a fresh one, so a new leader never acts on
//     a stamp it inherited (rule T1);
//   - placement: it creates topics and places partitions (planPlacement),
//     for every node's API, the creates asked at once as a group
//     (create.go), and on winning leadership places what a
//     previous leader left unplaced;
//   - voters: it promotes a non-voter when a shard has fewer than
//     MetastoreVoters voters (a voter left).
//
// Requests that reach it on a follower answer ErrNotLeader. Spawn it with
// New; the node stops it, which ends its watch goroutine.
type Actor struct {
	d       Deps
	tracker *membership.Tracker // nil while not leading
	// swept: the placement sweep ran since leadership was won.
	swept bool
	// lastVoterCheck is when the voters were last compared with the want;
	// lastPlan when the rebalance pass last ran.
	lastVoterCheck time.Time
	lastPlan       time.Time
	// lastLiveness is when liveness last ran: every HeartbeatInterval,
	// while the tick may run faster for the rebalance.
	lastLiveness time.Time
	// busy: the last rebalance pass saw moves in flight, planned some, or
	// saw a node shedding, or the replica changed since; the next pass then
	// comes after RebalanceBusyInterval, so that freed slots fill at once
	// and a node that starts leaving is shed within it.
	busy bool
	// changes turns the replica's changes into changed; stop ends it.
	changes metastore.ChangeWatch
	stop    chan struct{}
	// decomBlocked is why each draining member could not progress at the
	// last pass (narad_decommission_blocked).
	decomBlocked map[string]string
	// loggedBlocked remembers the blocked moves logged in this leadership.
	loggedBlocked map[string]bool
	// creates wait for the next group (create.go); createsDue:
	// a createsDue message is on its way.
	creates    []pendingCreate
	createsDue bool
	// clock is Deps.Clock or the wall; next is the tick set, stopped
	// with the actor so that no timer outlives it.
	clock clock.Clock
	next  clock.Timer
}

// New is the controller of a node.
func New(d Deps) *Actor {
	c := clock.Or(d.Clock)
	return &Actor{d: d, clock: c, changes: metastore.ChangeWatch{Clock: c}}
}

func (a *Actor) Receive(ctx actor.Context) {
	defer supervise.LogPanic(a.d.Logger, Name)
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.stop = make(chan struct{})
		self, root := ctx.Self(), ctx.ActorSystem().Root
		a.changes.Start(a.d.Store, a.stop, func() { root.Send(self, changed{}) })
		a.schedule(ctx)
	case *actor.Stopping, *actor.Restarting:
		// A restarted instance starts a watch of its own.
		if a.stop != nil {
			close(a.stop)
			a.stop = nil
		}
		if a.next != nil {
			a.next.Stop()
			a.next = nil
		}
	case changed:
		a.changes.Handled()
		if a.leading() {
			a.busy = true
			a.rebalance(a.clock.Now())
		}
	case tickDue:
		a.tick()
		a.schedule(ctx)
	case *Ask:
		if m.Req.CreateTopic != nil {
			a.queueCreate(ctx, m)
			return
		}
		ctx.Respond(a.answer(m))
	case createsDue:
		a.commitCreates(ctx)
	}
}

func (a *Actor) schedule(ctx actor.Context) {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	a.next = a.clock.AfterFunc(min(a.d.Membership.HeartbeatInterval, a.d.Config.RebalanceBusyInterval), func() { root.Send(self, tickDue{}) })
}

// leading reports whether this node leads the metadata shard, and resets
// the leader's state when it does not.
func (a *Actor) leading() bool {
	if leader, ok := a.d.Store.Leader(metastore.MetaShard); ok && leader == a.d.Store.ReplicaID() {
		return true
	}
	a.tracker, a.swept, a.loggedBlocked = nil, false, nil
	// A former leader's reasons are stale: left at 1, they would stand
	// beside the new leader's own, and an operator would read two nodes
	// blocking one decommission for different reasons (rule D7).
	if len(a.decomBlocked) > 0 {
		a.reportBlocked(nil)
	}
	return false
}

func (a *Actor) tick() {
	if !a.leading() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.d.Membership.HeartbeatInterval)
	defer cancel()
	now := a.clock.Now()
	if now.Sub(a.lastLiveness) >= a.d.Membership.HeartbeatInterval {
		a.lastLiveness = now
		a.liveness(ctx)
	}
	if !a.swept {
		a.swept = a.sweep()
	}
	if now.Sub(a.lastVoterCheck) >= a.d.Config.VoterCheckInterval {
		a.lastVoterCheck = now
		a.keepVoters()
	}
	a.rebalance(now)
}

// liveness observes the members as the leader has them and proposes what
// the tracker says. A refused compare-and-set means a heartbeat landed
// after the read: the next pass sees it.
func (a *Actor) liveness(ctx context.Context) {
	if a.tracker == nil {
		t, err := membership.NewTracker(a.d.Membership)
		if err != nil {
			panic(err) // the config was validated at start
		}
		a.tracker = t
	}
	members, err := a.d.Store.LeaderMembers(ctx)
	if err != nil {
		a.d.Logger.Warn("liveness: read members", "err", err)
		return
	}
	now := a.clock.Now()
	for _, tr := range a.tracker.Observe(now, members) {
		res, err := a.d.Store.SetMemberStatusIf(ctx, tr.Command())
		if err != nil {
			a.d.Logger.Warn("liveness: propose status", "member", tr.ID, "to", tr.To, "err", err)
			continue
		}
		if res.Code == messages.ResultOK {
			a.d.Logger.Warn("member status changed", "member", tr.ID, "from", tr.From, "to", tr.To, "silent", tr.Silent)
		}
	}
	for _, m := range members {
		if stamp, ok := a.tracker.Stamp(m.ID); ok {
			a.d.Metrics.HeartbeatAge(m.ID, now.Sub(stamp).Seconds())
		}
	}
}

// sweep places the partitions of every topic that has some without an
// owner: a leader that stopped between a topic's create and its placement
// left them so. It reports whether every topic is placed (or nothing could
// take partitions yet); on false the next tick tries again.
func (a *Actor) sweep() bool {
	ctx, cancel := context.WithTimeout(context.Background(), a.d.Timeout)
	defer cancel()
	for _, t := range a.d.Store.Topics() {
		placed, err := a.place(ctx, t)
		if err != nil {
			a.d.Logger.Warn("controller: place partitions left unplaced", "topic", t.Name, "err", err)
			return false
		}
		if placed > 0 {
			a.d.Logger.Warn("controller: placed partitions a create or grow had left unplaced", "topic", t.Name, "partitions", placed)
		}
	}
	return true
}

// keepVoters promotes one non-voter per check while a shard has fewer than
// MetastoreVoters voters. Every shard is checked, not only the metadata
// shard: PromoteToVoter changes the shards one by one, and one that failed
// midway is finished by the next check (it skips shards already done).
func (a *Actor) keepVoters() {
	ctx, cancel := context.WithTimeout(context.Background(), a.d.Timeout)
	defer cancel()
	for _, shard := range a.d.Store.Shards() {
		rm, err := a.d.Store.RaftMembership(ctx, shard)
		if err != nil {
			a.d.Logger.Warn("controller: read raft membership", "shard", shard, "err", err)
			return
		}
		replica, addr, ok := pickPromotion(rm.Voters, rm.NonVoters, a.d.Store.Members(), a.d.Config.MetastoreVoters)
		if !ok {
			continue
		}
		if err := a.d.Store.PromoteToVoter(ctx, replica, addr); err != nil {
			a.d.Logger.Warn("controller: promote a non-voter", "replica", replica, "err", err)
			return
		}
		a.d.Metrics.Promoted.Inc()
		for _, m := range a.d.Store.Members() {
			if m.ReplicaID == replica {
				if err := a.d.Store.SetMemberRole(ctx, m.ID, messages.RoleVoter); err != nil {
					a.d.Logger.Warn("controller: record the promoted member's role", "member", m.ID, "err", err)
				}
				a.d.Logger.Warn("controller: promoted a non-voter to keep the metastore's voters", "member", m.ID,
					"replica", replica, "shard", shard, "voters_before", len(rm.Voters), "want", a.d.Config.MetastoreVoters)
			}
		}
		return
	}
}

func (a *Actor) answer(m *Ask) Answer {
	if !a.leading() {
		return Answer{Err: ErrNotLeader}
	}
	ctx, cancel := context.WithDeadline(context.Background(), m.Deadline)
	defer cancel()
	switch {
	case m.Req.DecommissionBlocked:
		return Answer{Reply: messages.ControllerReply{Blocked: maps.Clone(a.decomBlocked)}}
	case m.Req.AlterTopic != nil:
		return a.alter(ctx, *m.Req.AlterTopic)
	case m.Req.DeleteTopic != "":
		return a.delete(ctx, m.Req.DeleteTopic)
	}
	return Answer{Err: fmt.Errorf("controller request with no request: %w", errs.ErrInvalid)}
}

// alter stores an alter and places the partitions a grow added: grown
// partitions without assignments would have no owner to commit or serve
// them.
func (a *Actor) alter(ctx context.Context, c messages.AlterTopic) Answer {
	before, _ := a.d.Store.Topic(c.Name)
	altered, err := a.d.Store.AlterTopic(ctx, c)
	if err != nil {
		return Answer{Err: err}
	}
	if altered.Partitions <= before.Partitions {
		return Answer{Reply: messages.ControllerReply{Topic: altered}}
	}
	placed, err := a.place(ctx, altered)
	return Answer{Reply: messages.ControllerReply{Topic: altered, Placed: placed}, Err: err}
}

// delete removes the topic, then every assignment of its incarnation. A
// crash between the two leaves assignments of an incarnation no topic
// names; nodes serve and move only the current incarnation's.
func (a *Actor) delete(ctx context.Context, name string) Answer {
	deleted, err := a.d.Store.DeleteTopic(ctx, name)
	if err != nil {
		return Answer{Err: err}
	}
	if err := a.d.Store.DeleteAssignments(ctx, deleted.Incarnation, deleted.Partitions); err != nil {
		return Answer{Reply: messages.ControllerReply{Topic: deleted}, Err: fmt.Errorf("delete the assignments of %s: %w", name, err)}
	}
	return Answer{Reply: messages.ControllerReply{Topic: deleted}}
}

// place gives every partition of t without an owner one. Placing is
// create-if-absent, so a partition placed meanwhile keeps its owner.
func (a *Actor) place(ctx context.Context, t messages.Topic) (int, error) {
	missing := missingPartitions(t, a.d.Store.Assignments(t.Incarnation, t.Partitions))
	if len(missing) == 0 {
		return 0, nil
	}
	as := planPlacement(a.loads(), t, missing)
	if len(as) == 0 {
		return 0, fmt.Errorf("place %d partitions of %s: no live member may take partitions: %w", len(missing), t.Name, metastore.ErrUnavailable)
	}
	if err := a.d.Store.PutAssignments(ctx, as); err != nil {
		return 0, err
	}
	a.d.Metrics.Placed.Add(len(as))
	return len(as), nil
}

// loads reads the members that may take partitions from the leader's
// replica: a placement from slightly stale counts is still valid, only
// less even, and the rebalance planner evens it out later. The counts are
// the owner indexes' sizes: a sorted listing of each member's partitions,
// twice per create, was most of a create's time at 30,000 partitions
// (issue 27).
func (a *Actor) loads() []memberLoad {
	return eligibleLoads(a.d.Store.Members(), a.d.Store.OwnedCount)
}

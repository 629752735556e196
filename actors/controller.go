package actors

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/cluster/membership"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// errNotLeader answers a controller request that reached a node which does
// not lead the metadata shard (leadership moved): nothing was done, so the
// caller asks again where the leader is now.
var errNotLeader = fmt.Errorf("not the metadata leader: %w", ErrUnavailable)

// controllerTick is the controller's own timer.
type controllerTick struct{}

// controllerChanged is the replica having changed (a member leaving,
// draining or registering, a move ending): the leader plans at the busy
// cadence rather than waiting out RebalanceInterval.
type controllerChanged struct{}

// controllerAsk carries a ControllerRequest to the local controller; the
// answer is a controllerAnswer. The work it starts ends by deadline, the
// asker's, so that nothing outlives the request.
type controllerAsk struct {
	deadline time.Time
	req      messages.ControllerRequest
}

// controllerAnswer is the controller's answer to a controllerAsk.
type controllerAnswer struct {
	reply messages.ControllerReply
	err   error
}

// controllerActor runs on every node and acts only while this node leads
// the metadata shard, so there is one decider at a time:
//   - liveness: it stamps members' heartbeats on this node's own clock and
//     proposes dead/alive transitions. Leadership lost drops the tracker,
//     and leadership won starts a fresh one, so a new leader never acts on
//     a stamp it inherited (rule T1);
//   - placement: it creates topics and places partitions (planPlacement),
//     for every node's API, the creates asked at once as a group
//     (controller_create.go), and on winning leadership places what a
//     previous leader left unplaced;
//   - voters: it promotes a non-voter when a shard has fewer than
//     MetastoreVoters voters (a voter left).
//
// Requests that reach it on a follower answer errNotLeader.
type controllerActor struct {
	deps
	store   controllerStore
	nats    *transport.Transport // nil without NATS
	tracker *membership.Tracker  // nil while not leading
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
	// changes turns the replica's changes into controllerChanged; stop
	// ends it.
	changes changeWatch
	stop    chan struct{}
	// decomBlocked is why each draining member could not progress at the
	// last pass (narad_decommission_blocked).
	decomBlocked map[string]string
	// loggedBlocked remembers the blocked moves logged in this leadership.
	loggedBlocked map[string]bool
	// creates wait for the next group (controller_create.go); createsDue:
	// a createsDue message is on its way.
	creates    []pendingCreate
	createsDue bool
}

const controllerName = "controller"

func (a *controllerActor) Receive(ctx actor.Context) {
	defer logPanic(a.deps.log, controllerName)
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.stop = make(chan struct{})
		self, root := ctx.Self(), ctx.ActorSystem().Root
		go a.changes.run(a.store, a.stop, func() { root.Send(self, controllerChanged{}) })
		a.schedule(ctx)
	case *actor.Stopping, *actor.Restarting:
		// A restarted instance starts a watch of its own.
		if a.stop != nil {
			close(a.stop)
			a.stop = nil
		}
	case controllerChanged:
		a.changes.handled()
		if a.leading() {
			a.busy = true
			a.rebalance(time.Now())
		}
	case controllerTick:
		a.tick()
		a.schedule(ctx)
	case *controllerAsk:
		if m.req.CreateTopic != nil {
			a.queueCreate(ctx, m)
			return
		}
		ctx.Respond(a.answer(m))
	case createsDue:
		a.commitCreates(ctx)
	}
}

func (a *controllerActor) schedule(ctx actor.Context) {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	time.AfterFunc(min(a.cfg.Membership.HeartbeatInterval, a.cfg.RebalanceBusyInterval), func() { root.Send(self, controllerTick{}) })
}

// leading reports whether this node leads the metadata shard, and resets
// the leader's state when it does not.
func (a *controllerActor) leading() bool {
	if leader, ok := a.store.Leader(metastore.MetaShard); ok && leader == a.store.ReplicaID() {
		return true
	}
	a.tracker, a.swept, a.loggedBlocked = nil, false, nil
	return false
}

func (a *controllerActor) tick() {
	if !a.leading() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.Membership.HeartbeatInterval)
	defer cancel()
	now := time.Now()
	if now.Sub(a.lastLiveness) >= a.cfg.Membership.HeartbeatInterval {
		a.lastLiveness = now
		a.liveness(ctx)
	}
	if !a.swept {
		a.swept = a.sweep()
	}
	if now.Sub(a.lastVoterCheck) >= a.cfg.VoterCheckInterval {
		a.lastVoterCheck = now
		a.keepVoters()
	}
	a.rebalance(now)
}

// liveness observes the members as the leader has them and proposes what
// the tracker says. A refused compare-and-set means a heartbeat landed
// after the read: the next pass sees it.
func (a *controllerActor) liveness(ctx context.Context) {
	if a.tracker == nil {
		t, err := membership.NewTracker(a.cfg.Membership)
		if err != nil {
			panic(err) // the config was validated at start
		}
		a.tracker = t
	}
	members, err := a.store.LeaderMembers(ctx)
	if err != nil {
		a.deps.log.Warn("liveness: read members", "err", err)
		return
	}
	now := time.Now()
	for _, tr := range a.tracker.Observe(now, members) {
		res, err := a.store.SetMemberStatusIf(ctx, tr.Command())
		if err != nil {
			a.deps.log.Warn("liveness: propose status", "member", tr.ID, "to", tr.To, "err", err)
			continue
		}
		if res.Code == messages.ResultOK {
			a.deps.log.Warn("member status changed", "member", tr.ID, "from", tr.From, "to", tr.To, "silent", tr.Silent)
		}
	}
	for _, m := range members {
		if stamp, ok := a.tracker.Stamp(m.ID); ok {
			a.metrics.heartbeatAge(m.ID, now.Sub(stamp).Seconds())
		}
	}
}

// sweep places the partitions of every topic that has some without an
// owner: a leader that stopped between a topic's create and its placement
// left them so. It reports whether every topic is placed (or nothing could
// take partitions yet); on false the next tick tries again.
func (a *controllerActor) sweep() bool {
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ControllerTimeout)
	defer cancel()
	for _, t := range a.store.Topics() {
		placed, err := a.place(ctx, t)
		if err != nil {
			a.deps.log.Warn("controller: place partitions left unplaced", "topic", t.Name, "err", err)
			return false
		}
		if placed > 0 {
			a.deps.log.Warn("controller: placed partitions a create or grow had left unplaced", "topic", t.Name, "partitions", placed)
		}
	}
	return true
}

// keepVoters promotes one non-voter per check while a shard has fewer than
// MetastoreVoters voters. Every shard is checked, not only the metadata
// shard: PromoteToVoter changes the shards one by one, and one that failed
// midway is finished by the next check (it skips shards already done).
func (a *controllerActor) keepVoters() {
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ControllerTimeout)
	defer cancel()
	for _, shard := range a.store.Shards() {
		rm, err := a.store.RaftMembership(ctx, shard)
		if err != nil {
			a.deps.log.Warn("controller: read raft membership", "shard", shard, "err", err)
			return
		}
		replica, addr, ok := pickPromotion(rm.Voters, rm.NonVoters, a.store.Members(), a.cfg.MetastoreVoters)
		if !ok {
			continue
		}
		if err := a.store.PromoteToVoter(ctx, replica, addr); err != nil {
			a.deps.log.Warn("controller: promote a non-voter", "replica", replica, "err", err)
			return
		}
		a.metrics.promoted.Inc()
		for _, m := range a.store.Members() {
			if m.ReplicaID == replica {
				if err := a.store.SetMemberRole(ctx, m.ID, messages.RoleVoter); err != nil {
					a.deps.log.Warn("controller: record the promoted member's role", "member", m.ID, "err", err)
				}
				a.deps.log.Warn("controller: promoted a non-voter to keep the metastore's voters", "member", m.ID,
					"replica", replica, "shard", shard, "voters_before", len(rm.Voters), "want", a.cfg.MetastoreVoters)
			}
		}
		return
	}
}

func (a *controllerActor) answer(m *controllerAsk) controllerAnswer {
	if !a.leading() {
		return controllerAnswer{err: errNotLeader}
	}
	ctx, cancel := context.WithDeadline(context.Background(), m.deadline)
	defer cancel()
	switch {
	case m.req.DecommissionBlocked:
		return controllerAnswer{reply: messages.ControllerReply{Blocked: maps.Clone(a.decomBlocked)}}
	case m.req.AlterTopic != nil:
		return a.alter(ctx, *m.req.AlterTopic)
	case m.req.DeleteTopic != "":
		return a.delete(ctx, m.req.DeleteTopic)
	}
	return controllerAnswer{err: fmt.Errorf("controller request with no request: %w", ErrInvalid)}
}

// alter stores an alter and places the partitions a grow added: grown
// partitions without assignments would have no owner to commit or serve
// them.
func (a *controllerActor) alter(ctx context.Context, c messages.AlterTopic) controllerAnswer {
	before, _ := a.store.Topic(c.Name)
	altered, err := a.store.AlterTopic(ctx, c)
	if err != nil {
		return controllerAnswer{err: err}
	}
	if altered.Partitions <= before.Partitions {
		return controllerAnswer{reply: messages.ControllerReply{Topic: altered}}
	}
	placed, err := a.place(ctx, altered)
	return controllerAnswer{reply: messages.ControllerReply{Topic: altered, Placed: placed}, err: err}
}

// delete removes the topic, then every assignment of its incarnation. A
// crash between the two leaves assignments of an incarnation no topic
// names; nodes serve and move only the current incarnation's.
func (a *controllerActor) delete(ctx context.Context, name string) controllerAnswer {
	deleted, err := a.store.DeleteTopic(ctx, name)
	if err != nil {
		return controllerAnswer{err: err}
	}
	if err := a.store.DeleteAssignments(ctx, deleted.Incarnation, deleted.Partitions); err != nil {
		return controllerAnswer{reply: messages.ControllerReply{Topic: deleted}, err: fmt.Errorf("delete the assignments of %s: %w", name, err)}
	}
	return controllerAnswer{reply: messages.ControllerReply{Topic: deleted}}
}

// place gives every partition of t without an owner one. Placing is
// create-if-absent, so a partition placed meanwhile keeps its owner.
func (a *controllerActor) place(ctx context.Context, t messages.Topic) (int, error) {
	missing := missingPartitions(t, a.store.Assignments(t.Incarnation, t.Partitions))
	if len(missing) == 0 {
		return 0, nil
	}
	as := planPlacement(a.loads(), t, missing)
	if len(as) == 0 {
		return 0, fmt.Errorf("place %d partitions of %s: no live member may take partitions: %w", len(missing), t.Name, metastore.ErrUnavailable)
	}
	if err := a.store.PutAssignments(ctx, as); err != nil {
		return 0, err
	}
	a.metrics.placed.Add(len(as))
	return len(as), nil
}

// loads reads the members that may take partitions from the leader's
// replica: a placement from slightly stale counts is still valid, only
// less even, and the rebalance planner evens it out later. The counts are
// the owner indexes' sizes: a sorted listing of each member's partitions,
// twice per create, was most of a create's time at 30,000 partitions
// (issue 27).
func (a *controllerActor) loads() []memberLoad {
	return eligibleLoads(a.store.Members(), a.store.OwnedCount)
}

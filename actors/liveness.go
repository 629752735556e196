package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/cluster/membership"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// livenessTick is the liveness actor's own timer.
type livenessTick struct{}

// livenessActor runs on every node and acts only while this node leads the
// metadata shard: it stamps members' heartbeats on this node's own clock
// and proposes dead/alive transitions. Leadership lost drops the tracker,
// and leadership won starts a fresh one, so a new leader never acts on a
// stamp it inherited (rule T1).
type livenessActor struct {
	deps
	store   *metastore.Store
	tracker *membership.Tracker
}

const livenessName = "liveness"

func (a *livenessActor) Receive(ctx actor.Context) {
	defer logPanic(a.deps.log, livenessName)
	switch ctx.Message().(type) {
	case *actor.Started:
		a.schedule(ctx)
	case livenessTick:
		a.pass()
		a.schedule(ctx)
	}
}

func (a *livenessActor) schedule(ctx actor.Context) {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	time.AfterFunc(a.cfg.Membership.HeartbeatInterval, func() { root.Send(self, livenessTick{}) })
}

// pass observes the members as the leader has them and proposes what the
// tracker says. A refused compare-and-set means a heartbeat landed after
// the read: the next pass sees it.
func (a *livenessActor) pass() {
	if leader, ok := a.store.Leader(metastore.MetaShard); !ok || leader != a.store.ReplicaID() {
		a.tracker = nil
		return
	}
	if a.tracker == nil {
		t, err := membership.NewTracker(a.cfg.Membership)
		if err != nil {
			panic(err) // the config was validated at start
		}
		a.tracker = t
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.Membership.HeartbeatInterval)
	defer cancel()
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
			age := now.Sub(stamp).Seconds()
			a.metrics.heartbeatAge(m.ID, age)
		}
	}
}

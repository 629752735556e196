package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// Topic creates commit as a group. The controller is one actor, so creates
// asked at once used to wait for each other: two metastore rounds each (the
// topic, then its assignments), 300 creates of 100 partitions in 20 s on a
// 2-core machine (issue 27). Now a create is queued, and the creates queued
// by the time the controller turns to them go together: their topic
// records proposed at once (the metadata shard commits proposals that
// arrive together in one Raft round), then every assignment of every topic
// in one PutAssignments, one entry per assignment shard. Each create still
// stands alone: a name taken, an invalid topic or a deadline passed fails
// only its own create.

// pendingCreate is a create waiting for the controller's next group.
type pendingCreate struct {
	ask    *Ask
	sender *actor.PID
}

// createsDue tells the controller to commit the creates queued so far.
type createsDue struct{}

// createQueueGroups bounds the creates waiting for a group: this many
// groups' worth. Each group costs two metastore rounds, so a create past
// it would wait out its deadline in the queue anyway; it is refused at
// once instead, and the client asks again.
const createQueueGroups = 16

// admitCreate refuses a create when the queue already holds
// createQueueGroups groups' worth.
func (a *Actor) admitCreate() error {
	if n := len(a.creates); n >= createQueueGroups*a.d.Config.MaxCreatesPerGroup {
		return fmt.Errorf("create topic: %d creates already wait for the controller: %w", n, metastore.ErrUnavailable)
	}
	return nil
}

// queueCreate keeps m for the next group and makes sure one is due.
func (a *Actor) queueCreate(ctx actor.Context, m *Ask) {
	if err := a.admitCreate(); err != nil {
		ctx.Respond(Answer{Err: err})
		return
	}
	a.creates = append(a.creates, pendingCreate{ask: m, sender: ctx.Sender()})
	if !a.createsDue {
		a.createsDue = true
		ctx.Send(ctx.Self(), createsDue{})
	}
}

// commitCreates commits up to MaxCreatesPerGroup of the queued creates and
// answers each; what is left waits for the next createsDue, behind the
// messages that came meanwhile.
func (a *Actor) commitCreates(ctx actor.Context) {
	n := min(len(a.creates), a.d.Config.MaxCreatesPerGroup)
	group := a.creates[:n:n]
	a.creates = append([]pendingCreate(nil), a.creates[n:]...)
	if len(a.creates) > 0 {
		ctx.Send(ctx.Self(), createsDue{})
	} else {
		a.createsDue = false
	}
	asks := make([]*Ask, len(group))
	for i, p := range group {
		asks[i] = p.ask
	}
	a.d.Metrics.CreateGroups.Inc()
	a.d.Metrics.CreatesGrouped.Add(len(asks))
	for i, ans := range a.createGroup(asks) {
		if group[i].sender != nil {
			ctx.Send(group[i].sender, ans)
		}
	}
}

// createGroup stores the topics of asks and places their partitions, one
// answer per ask in order.
func (a *Actor) createGroup(asks []*Ask) []Answer {
	out := make([]Answer, len(asks))
	fail := func(err error) []Answer {
		for i := range out {
			out[i] = Answer{Err: err}
		}
		return out
	}
	if !a.leading() {
		return fail(ErrNotLeader)
	}
	loads := a.loads()
	if len(loads) == 0 {
		return fail(fmt.Errorf("create topic: no live member may take partitions: %w", metastore.ErrUnavailable))
	}
	last := asks[0].Deadline
	var wg sync.WaitGroup
	for i, m := range asks {
		last = laterOf(last, m.Deadline)
		wg.Go(func() {
			ctx, cancel := context.WithDeadline(context.Background(), m.Deadline)
			defer cancel()
			created, err := a.d.Store.CreateTopic(ctx, *m.Req.CreateTopic)
			if err != nil {
				out[i] = Answer{Err: err}
				return
			}
			out[i] = Answer{Reply: messages.ControllerReply{Topic: created}}
		})
	}
	wg.Wait()
	var all []messages.Assignment
	placed := make([]int, len(asks))
	for i := range asks {
		if out[i].Err != nil {
			continue
		}
		t := out[i].Reply.Topic
		missing := missingPartitions(t, a.d.Store.Assignments(t.Incarnation, t.Partitions))
		as := planPlacement(loads, t, missing)
		addLoads(loads, as)
		placed[i] = len(as)
		all = append(all, as...)
	}
	if len(all) == 0 {
		return out
	}
	ctx, cancel := context.WithDeadline(context.Background(), last)
	defer cancel()
	err := a.d.Store.PutAssignments(ctx, all)
	if err == nil {
		a.d.Metrics.Placed.Add(len(all))
	}
	for i := range asks {
		if placed[i] == 0 {
			continue
		}
		if err != nil {
			// The topic exists with partitions not placed: the sweep
			// places them, as after a leader that stopped midway.
			out[i].Err = fmt.Errorf("place %d partitions of %s: %w", placed[i], out[i].Reply.Topic.Name, err)
			continue
		}
		out[i].Reply.Placed = placed[i]
	}
	return out
}

// addLoads counts as in loads, so that the next topic of a group is
// placed beside the ones before it, not on the same members.
func addLoads(loads []memberLoad, as []messages.Assignment) {
	for _, as := range as {
		for i := range loads {
			if loads[i].ID == as.Owner {
				loads[i].Owned++
				break
			}
		}
	}
}

func laterOf(x, y time.Time) time.Time {
	if y.After(x) {
		return y
	}
	return x
}

package sim

import (
	"time"

	"github.com/naradmq/narad/cluster/membership"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/planner"
	"github.com/naradmq/narad/messages"
)

// The simulated metastore: one Raft log, its leader's state machine (the
// real assignment shard's apply), the member records, leader changes with
// proposals whose outcome is unknown, each node's replica applying the log
// behind it, the liveness tracker and the controller on the leader.

const topic = "t"

// entry is one committed log entry: an assignment command, or a change of
// a member record.
type entry struct {
	assign *messages.AssignCommand
	member *memberCmd
}

// memberCmd changes one member record: a heartbeat, a status
// compare-and-set (the tracker's transition), or the drain flag.
type memberCmd struct {
	id        string
	heartbeat bool
	status    *membership.Transition
	draining  *bool
}

// member is one member record as a state machine holds it.
type member struct {
	heartbeats uint64
	status     string
	draining   bool
}

// members is a member shard's content, on the leader and on each replica.
type members map[string]*member

func (ms members) apply(c *memberCmd) {
	m := ms[c.id]
	if m == nil {
		return
	}
	switch {
	case c.heartbeat:
		m.heartbeats++
	case c.status != nil:
		// The compare-and-set a heartbeat landing in between refuses.
		if m.status == c.status.From && m.heartbeats == c.status.Heartbeats {
			m.status = c.status.To
		}
	case c.draining != nil:
		m.draining = *c.draining
	}
}

type meta struct {
	w *world
	// state and members are the leader's: the log applied.
	state   *metastore.AssignMachine
	members members
	log     []entry
	// electingUntil: a leader change is under way; proposals arriving
	// may commit late or never, answered by nobody.
	electingUntil time.Duration
	// tracker is the leader's liveness tracker: a new one per leader.
	tracker *membership.Tracker
	// lastBeat is when each member's latest heartbeat committed: the
	// simulator's truth, for rule T1's check.
	lastBeat map[string]time.Duration
	// prevBeat is the one before it.
	prevBeat map[string]time.Duration
}

const incarnation = 1

func newMeta(w *world) *meta {
	return &meta{w: w, state: metastore.NewAssignMachine(), members: members{}, lastBeat: map[string]time.Duration{}, prevBeat: map[string]time.Duration{}, tracker: newTracker()}
}

func newTracker() *membership.Tracker {
	t, err := membership.NewTracker(membership.Config{DeadTimeout: deadTimeout, HeartbeatInterval: heartbeatInterval})
	if err != nil {
		panic(err) // constants
	}
	return t
}

// create puts the topic's partitions on their first owners: all on one
// node, or spread at random.
func (m *meta) create(partitions int) {
	w := m.w
	for _, n := range w.nodes {
		m.members[n.id] = &member{status: messages.MemberAlive}
	}
	var as []messages.Assignment
	together := w.chance(0.5)
	for p := range partitions {
		owner := w.nodes[0]
		if !together {
			owner = w.nodes[w.rng.IntN(len(w.nodes))]
		}
		as = append(as, messages.Assignment{Topic: topic, Incarnation: incarnation, Partition: p, Owner: owner.id})
		owner.disk[p] = &plog{}
	}
	m.commit(entry{assign: &messages.AssignCommand{Version: messages.CommandVersion, PutAssignments: &messages.PutAssignments{Assignments: as}}})
	for _, n := range w.nodes {
		n.replicate(len(m.log))
	}
}

func (m *meta) start() {
	w := m.w
	w.every(time.Second, func() bool {
		if !m.electing() {
			m.observe()
		}
		return true
	})
	w.every(rebalanceInterval, func() bool {
		if !m.electing() {
			m.rebalance()
		}
		return true
	})
}

func (m *meta) electing() bool { return m.electingUntil > m.w.now }

// commit appends e to the log and applies it on the leader.
func (m *meta) commit(e entry) any {
	w := m.w
	m.log = append(m.log, e)
	index := uint64(len(m.log))
	for _, n := range w.nodes {
		// The leader sends the entry to every replica (a lost one is
		// fetched by the node's catch-up).
		w.deliver(nil, n, func() { n.replicate(int(index)) })
	}
	if e.member != nil {
		m.members.apply(e.member)
		if e.member.heartbeat {
			m.prevBeat[e.member.id], m.lastBeat[e.member.id] = m.lastBeat[e.member.id], w.now
		}
		return nil
	}
	var flips []messages.Flip
	if c := e.assign; c.Flip != nil {
		flips = []messages.Flip{*c.Flip}
	} else if c.Flips != nil {
		flips = c.Flips.Flips
	}
	type was struct {
		a   messages.Assignment
		had bool
	}
	before := make([]was, len(flips))
	for i, f := range flips {
		before[i].a, before[i].had = m.state.Get(f.Incarnation, f.Partition)
	}
	res, err := m.state.Apply(*e.assign, index)
	if err != nil {
		w.failf("assignment shard refused entry %d: %v", index, err)
		return res
	}
	for i, f := range flips {
		code := res.Code
		if e.assign.Flips != nil {
			code = res.Flips[i].Code
		}
		if b := before[i]; b.had && code == messages.ResultOK && b.a.Owner != f.To {
			w.checkFlip(b.a, f)
		}
	}
	return res
}

// propose is a node's proposal: committed and answered, or, during a
// leader change, committed late or never with no answer (the caller's
// timeout makes it an unknown outcome). As with Dragonboat's SyncPropose,
// the answer is the proposer's own replica's apply: it has applied the
// log up to the entry before the answer reaches the proposer.
func (m *meta) propose(from *node, alive func() bool, e entry, done func(res any, ok bool)) {
	w := m.w
	w.call(from, nil, alive, func(reply func(any)) {
		if !m.electing() {
			res := m.commit(e)
			reply(applied{res: res, index: len(m.log)})
			return
		}
		if w.chance(0.5) {
			w.note("proposal lost in a leader change")
			return
		}
		late := min(m.electingUntil-w.now+w.jitter(2*time.Second), lateCommitMax)
		w.at(late, func() {
			w.note("proposal committed late", int64(len(m.log)+1))
			m.commit(e)
		})
	}, func(ans any, ok bool) {
		if !ok {
			done(nil, false)
			return
		}
		a := ans.(applied)
		from.replicate(a.index)
		done(a.res, true)
	})
}

// applied is an answer that the caller's replica has applied the log up
// to index (a proposal's result, a ReadIndex read).
type applied struct {
	res   any
	index int
}

// leaderRead answers the assignment as the leader has it, or nothing
// during a leader change. Like a ReadIndex read on the caller's replica,
// the caller's replica has applied the log up to the read before the
// answer.
func (m *meta) leaderRead(from *node, alive func() bool, p int, done func(a messages.Assignment, found, ok bool)) {
	m.w.call(from, nil, alive, func(reply func(any)) {
		if m.electing() {
			return
		}
		a, found := m.state.Get(incarnation, p)
		reply(applied{res: leaderAnswer{a: a, found: found}, index: len(m.log)})
	}, func(ans any, ok bool) {
		if !ok {
			done(messages.Assignment{}, false, false)
			return
		}
		ap := ans.(applied)
		from.replicate(ap.index)
		la := ap.res.(leaderAnswer)
		done(la.a, la.found, true)
	})
}

// leaderMember reads one member record through the leader.
func (m *meta) leaderMember(from *node, alive func() bool, id string, done func(member, bool)) {
	m.w.call(from, nil, alive, func(reply func(any)) {
		if m.electing() {
			return
		}
		reply(applied{res: *m.members[id], index: len(m.log)})
	}, func(ans any, ok bool) {
		if !ok {
			done(member{}, false)
			return
		}
		ap := ans.(applied)
		from.replicate(ap.index)
		done(ap.res.(member), true)
	})
}

type leaderAnswer struct {
	a     messages.Assignment
	found bool
}

// leaderChange starts an election lasting d; the new leader has a fresh
// tracker (its stamps start at its own first observation, rule T1).
func (m *meta) leaderChange(d time.Duration) {
	w := m.w
	if m.electing() {
		return
	}
	m.electingUntil = w.now + d
	w.stats.LeaderChanges++
	w.note("leader change", int64(d))
	w.at(d, func() { m.tracker = newTracker() })
}

// observe is the leader's liveness pass: the tracker's transitions become
// status compare-and-sets.
func (m *meta) observe() {
	w := m.w
	list := make([]messages.Member, 0, len(m.members))
	for _, n := range w.nodes {
		r := m.members[n.id]
		list = append(list, messages.Member{ID: n.id, Status: r.status, Heartbeats: r.heartbeats, Draining: r.draining})
	}
	for _, tr := range m.tracker.Observe(base.Add(w.now), list) {
		w.note("liveness "+string(tr.To), int64(w.byID[tr.ID].index))
		m.commit(entry{member: &memberCmd{id: tr.ID, status: &tr}})
	}
}

// rebalance is the controller's pass on the leader's state: clear the
// targets of dead destinations (rule T1), then plan (rules L1-L3).
func (m *meta) rebalance() {
	w := m.w
	now := base.Add(w.now)
	var pms []planner.Member
	for _, n := range w.nodes {
		r := m.members[n.id]
		pms = append(pms, planner.Member{ID: n.id, Alive: r.status == messages.MemberAlive, Draining: r.draining})
	}
	var places []planner.Placement
	for _, a := range m.state.All() {
		if a.Target != "" {
			r, ok := m.members[a.Target]
			dead := ok && r.status == messages.MemberDead
			deadFor := m.tracker.DeadFor(a.Target, now)
			// The simulated nodes never leave the Raft configuration.
			gone := planner.TargetGone(planner.Destination{Member: ok, Dead: dead, Draining: r.draining, DeadFor: deadFor, InRaft: true}, deadTargetAbortAfter)
			if w.cfg.Breaks.T1 {
				gone = !ok || dead
			}
			if gone && m.clear(a) {
				w.checkTargetCleared(a)
				continue
			}
		}
		places = append(places, planner.Placement{Ref: planner.Ref{Topic: a.Topic, Incarnation: a.Incarnation, Partition: a.Partition}, Owner: a.Owner, Target: a.Target})
	}
	for _, mv := range planner.Plan(planner.NewInput(pms, places, maxInFlightMoves)) {
		m.setTarget(mv.Partition, mv.From, "", mv.To, "plan")
	}
}

func (m *meta) clear(a messages.Assignment) bool {
	ok := m.setTarget(a.Partition, a.Owner, a.Target, "", "clear dead target")
	if ok {
		m.w.stats.TargetsCleared++
	}
	return ok
}

// setTarget commits a target compare-and-set and reports whether it took.
func (m *meta) setTarget(p int, owner, from, to, why string) bool {
	w := m.w
	res := m.commit(entry{assign: &messages.AssignCommand{Version: messages.CommandVersion,
		SetTarget: &messages.SetTarget{Incarnation: incarnation, Partition: p, Owner: owner, From: from, To: to}}})
	ok := res.(messages.AssignResult).Code == messages.ResultOK
	if ok {
		w.notef("set target", []int64{int64(p)}, "%s: partition %d owner %s target %q -> %q", why, p, owner, from, to)
	}
	return ok
}

// operatorMove moves a partition by hand to another live member.
func (m *meta) operatorMove() {
	w := m.w
	if m.electing() {
		return
	}
	p := w.rng.IntN(w.cfg.Partitions)
	a, _ := m.state.Get(incarnation, p)
	if a.Target != "" {
		return
	}
	to := w.nodes[w.rng.IntN(len(w.nodes))]
	if to.id == a.Owner || m.members[to.id].status != messages.MemberAlive || m.members[to.id].draining {
		return
	}
	m.setTarget(p, a.Owner, "", to.id, "operator move")
}

// operatorAbort gives up on a move in flight (the abort's compare-and-set).
func (m *meta) operatorAbort() {
	w := m.w
	mv := m.state.Moving()
	if m.electing() || len(mv) == 0 {
		return
	}
	a := mv[w.rng.IntN(len(mv))]
	m.setTarget(a.Partition, a.Owner, a.Target, "", "operator abort")
}

// toggleDrain drains a node (the planner moves everything off it) or
// lifts a drain; at least two members keep receiving.
func (m *meta) toggleDrain(n *node) {
	w := m.w
	if m.electing() {
		return
	}
	r := m.members[n.id]
	if !r.draining {
		receiving := 0
		for _, x := range m.members {
			if !x.draining {
				receiving++
			}
		}
		if receiving <= 2 {
			return
		}
	}
	d := !r.draining
	m.commit(entry{member: &memberCmd{id: n.id, draining: &d}})
	w.notef("drain", []int64{int64(n.index), b2i(d)}, "%s draining=%v", n.id, d)
}

func (m *meta) undrainAll() {
	for _, n := range m.w.nodes {
		if m.members[n.id].draining {
			f := false
			m.commit(entry{member: &memberCmd{id: n.id, draining: &f}})
		}
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

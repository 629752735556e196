package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Kind is a fault.
type Kind string

// The faults. Each ends with the node back: started again on its data after
// kill and term, resumed after stop, reconnected after cut.
const (
	// Kill is SIGKILL: the node dies at once, its leases and its
	// unanswered requests with it; it is started again after Fault.Hold.
	Kill Kind = "kill"
	// Term is SIGTERM: the node hands its partitions off on its way out
	// (--shutdown-handoff-timeout), drains its WAL and exits; it is started
	// again Fault.Hold after its exit.
	Term Kind = "term"
	// Stop is SIGSTOP held for Fault.Hold, past the cluster's dead timeout,
	// then SIGCONT: the node is judged dead while its process, its data
	// and its connections are all still there.
	Stop Kind = "stop"
	// Cut severs the node's connections to NATS and refuses new ones for
	// Fault.Hold, past the dead timeout, then lets it reconnect: the run's
	// proxy in front of NATS does it, the node's process lives on, so the
	// node is cut off the cluster's messaging while its Raft, its HTTP and
	// its leases are all still there.
	Cut Kind = "cut"
	// Leader is a kill of whichever node leads the metadata shard when it
	// is thrown (its narad_raft_leader{shard="1"} is 1), started again as
	// after a kill: the schedule draws the kind, the run names the node.
	Leader Kind = "leader"
	// NATSKill is SIGKILL of one server of a 3-server NATS cluster (-nats
	// 3), started again on its port after Fault.Hold: the nodes it served
	// move to the others of their URL lists, and the routes heal.
	NATSKill Kind = "natskill"
	// Decommission (-nodes 4) decommissions the node through the admin
	// API, waits until it left the members (its partitions moved off),
	// then, Fault.Hold later, starts a fresh node (next id, new data
	// directory, --join) on its HTTP port and waits until the moves onto
	// it settled: the cluster is four again, rebalanced twice.
	Decommission Kind = "decommission"
	// Disk makes the node's storage fail every fsync, or every write
	// (Fault.Op, drawn), for Fault.Hold, then turns it off, through
	// narad serve's --debug-faults routes (POST /debug/faults/disk). A node
	// that stops itself on the error is started again on its data.
	Disk Kind = "disk"
	// Clock steps the node's injected clock by Fault.StepMs (either way,
	// one to three visibility timeouts) for Fault.Hold, then steps it back
	// (POST /debug/faults/clock): leases and the dead timeout measured on
	// one node jump while the others' do not.
	Clock Kind = "clock"
	// RaftCut (-netns) drops every packet between the node and every
	// other node, both ways, for Fault.Hold, past the dead timeout, then
	// heals: the node's Raft is cut off the others while it still reaches
	// NATS and its clients (a partition with both sides alive; the nodes
	// run in network namespaces of their own, see bench/proc's netns.go).
	RaftCut Kind = "raftcut"
	// RaftCutOneWay (-netns) drops the node's packets to every other node
	// for Fault.Hold, theirs to it still arriving. Over TCP a connection
	// needs both ways, so what differs from RaftCut is what is still
	// delivered: the others' packets reach the node, its answers do not.
	RaftCutOneWay Kind = "raftcut1"
	// LeaderPause is SIGSTOP of whichever node leads the metadata shard
	// when it is thrown, held for Fault.Hold past the dead timeout, then
	// SIGCONT: the leader freezes with its leases and its view of the
	// cluster, and wakes into one that moved on without it.
	LeaderPause Kind = "leaderpause"
	// DiskFull (-loop-disks, each node's data on a file system of its
	// own) fills the node's disk to its last block for Fault.Hold, then
	// frees it: every write that needs a block fails with ENOSPC, the
	// metastore's as well as the partitions'. A node that stops itself
	// on it is started again on its data once the disk has room.
	DiskFull Kind = "diskfull"
	// Upgrade (-upgrade-from, never drawn) is one step of a rolling
	// upgrade: SIGTERM (the node hands its partitions off), the node
	// started again on its data with the run's own narad, ready, and every
	// move settled; after the last node's, the cluster version finalized.
	Upgrade Kind = "upgrade"
)

// UpgradeSchedule is the faults of a rolling upgrade of nodes nodes: each
// node in turn, gap after the one before is back.
func UpgradeSchedule(nodes int, gap time.Duration) []Fault {
	var out []Fault
	for i := range nodes {
		out = append(out, Fault{At: time.Duration(i+1) * gap, Gap: gap, Kind: Upgrade, Node: i, Hold: 500 * time.Millisecond})
	}
	return out
}

// kinds is every Kind, in the order the report lists them.
var kinds = []Kind{Kill, Term, Stop, Cut, Leader, NATSKill, Decommission, Disk, Clock, RaftCut, RaftCutOneWay, LeaderPause, DiskFull}

// The disk faults a Disk draws between (Fault.Op).
const (
	failFsync = "fsync"
	failWrite = "write"
)

// validKinds is -faults' default: every kind the run's flags can throw,
// in the order of kinds. A natskill needs three NATS servers, a
// decommission four nodes, a Raft cut the nodes in namespaces (-netns), a
// full disk their loop disks (-loop-disks).
func validKinds(nodes, nats int, netns, loopDisks bool) []Kind {
	var out []Kind
	for _, k := range kinds {
		if (k == NATSKill && nats != 3) || (k == Decommission && nodes != 4) || (needsNetns(k) && !netns) || (k == DiskFull && !loopDisks) {
			continue
		}
		out = append(out, k)
	}
	return out
}

// impairs reports whether kind k leaves its node's process alive and is
// put on and taken off from outside it: the kinds -overlap throws two of
// at once.
func impairs(k Kind) bool {
	return k == Stop || k == Cut || k == RaftCut || k == RaftCutOneWay || k == DiskFull
}

// needsNetns reports whether kind k cuts traffic between nodes, which
// only their network namespaces allow.
func needsNetns(k Kind) bool { return k == RaftCut || k == RaftCutOneWay }

// parseKinds reads -faults: a comma list of kinds, each at most once.
func parseKinds(list string) ([]Kind, error) {
	var out []Kind
	for _, s := range strings.Split(list, ",") {
		k := Kind(strings.TrimSpace(s))
		known := false
		for _, want := range kinds {
			known = known || k == want
		}
		if !known {
			return nil, fmt.Errorf("-faults: %q is none of %s: %w", s, strings.Join(kindNames(), ", "), errConfig)
		}
		for _, seen := range out {
			if seen == k {
				return nil, fmt.Errorf("-faults: %s twice: %w", k, errConfig)
			}
		}
		out = append(out, k)
	}
	return out, nil
}

// parseGap reads -gap: one duration ("3s") or a range ("2s-5s").
func parseGap(s string) (lo, hi time.Duration, err error) {
	a, b, isRange := strings.Cut(s, "-")
	if lo, err = time.ParseDuration(strings.TrimSpace(a)); err != nil {
		return 0, 0, fmt.Errorf("-gap %q: %w", s, errConfig)
	}
	hi = lo
	if isRange {
		if hi, err = time.ParseDuration(strings.TrimSpace(b)); err != nil {
			return 0, 0, fmt.Errorf("-gap %q: %w", s, errConfig)
		}
	}
	if lo <= 0 || hi < lo {
		return 0, 0, fmt.Errorf("-gap %q: want a positive duration or a range low-high: %w", s, errConfig)
	}
	return lo, hi, nil
}

// Plan is what a schedule is drawn for, besides its seed.
type Plan struct {
	// Duration is how long faults are thrown: a fault is planned only to
	// start before it.
	Duration time.Duration
	// GapMin and GapMax bound the pause before each fault, drawn between
	// them: the first one's from the start, any other's from the moment
	// the node of the fault before it answers /readyz again.
	GapMin, GapMax time.Duration
	// Nodes is how many nodes there are to fault, n1..nN.
	Nodes int
	// NATS is how many NATS servers there are, nats1..natsN for a
	// natskill.
	NATS int
	// Visibility is the topic's visibility timeout, the unit of a Clock's
	// step.
	Visibility time.Duration
	// Kinds are the faults to throw, at least one.
	Kinds []Kind
	// DeadTimeout is the nodes' --dead-timeout, which a Stop is held past.
	DeadTimeout time.Duration
	// Heartbeat is the nodes' --heartbeat-interval: a Stop is held a
	// heartbeat longer still, since the last heartbeat before the stop
	// starts the dead timeout.
	Heartbeat time.Duration
	// Overlap gives each fault of a kind that impairs a second such kind
	// of Kinds (Fault.With), on the same node, thrown with it.
	Overlap bool
}

// Fault is one fault of a schedule.
type Fault struct {
	// At is when the fault is planned, from the start of the faults. The
	// run throws it at At, or Gap after the node of the fault before it is
	// ready again when that comes later: a planned time assumes each fault
	// takes its kind's estimate (planned), which a loaded machine exceeds.
	At   time.Duration `json:"at_ns"`
	Gap  time.Duration `json:"gap_ns"`
	Kind Kind          `json:"kind"`
	// Node is the index of the node faulted (0 for n1); -1 for a leader,
	// whose node the run finds when it throws it; for a natskill, the
	// index of the NATS server (0 for nats1).
	Node int `json:"node"`
	// Hold is how long the node stays down before it is started again
	// (kill: from the SIGKILL; term: from its exit), or stopped (stop).
	Hold time.Duration `json:"hold_ns"`
	// Op is what a Disk makes fail: failFsync or failWrite.
	Op string `json:"op,omitempty"`
	// StepMs is a Clock's step, in milliseconds, either way.
	StepMs int64 `json:"step_ms,omitempty"`
	// With (-overlap) is a second kind that impairs, put on the same node
	// with Kind and taken off with it after Hold: a node stopped and cut
	// off NATS at once, say, or cut off both NATS and Raft (isolated while
	// it lives), or with its disk full while cut. "" for a fault alone.
	With Kind `json:"with,omitempty"`
}

// NodeID is the faulted node's id, n1..nN, or what the run resolves.
func (f Fault) NodeID() string {
	switch {
	case f.Node < 0:
		return "?"
	case f.Kind == NATSKill:
		return fmt.Sprintf("nats%d", f.Node+1)
	}
	return fmt.Sprintf("n%d", f.Node+1)
}

func (f Fault) String() string {
	return fmt.Sprintf("%7s  %-12s %-5s hold %s%s", seconds(f.At), f.Kind, f.NodeID(), seconds(f.Hold), f.detail())
}

// detail is what a Disk or a Clock does besides its hold, "" for the
// others.
func (f Fault) detail() string {
	if f.With != "" {
		return ", with " + string(f.With)
	}
	switch f.Kind {
	case Disk:
		return ", fail " + f.Op
	case Clock:
		return fmt.Sprintf(", step %+.1f s", float64(f.StepMs)/1000)
	}
	return ""
}

// The planning estimates of how long each kind keeps its node from /readyz
// besides its Hold: a restart's exec to /readyz, and a term's hand-off and
// drain before its exit, on this machine with a small topic. They only
// space the planned times; the run waits for the real thing.
const (
	restartEstimate = 2 * time.Second
	handOffEstimate = 2 * time.Second
	resumeEstimate  = time.Second
	// natsRestartEstimate is a NATS server's restart until every node
	// relays through its proxies again.
	natsRestartEstimate = time.Second
	// rebalanceEstimate is the moves of a decommission, or of a join,
	// with a small topic.
	rebalanceEstimate = 5 * time.Second
)

// planned is how long fault f is estimated to take, from its signal until
// its node is ready again.
func planned(f Fault) time.Duration {
	switch f.Kind {
	case Term:
		return handOffEstimate + f.Hold + restartEstimate
	case Stop, Cut, Disk, Clock, RaftCut, RaftCutOneWay, LeaderPause, DiskFull:
		return f.Hold + resumeEstimate
	case NATSKill:
		return f.Hold + natsRestartEstimate
	case Decommission:
		return 2*rebalanceEstimate + f.Hold + restartEstimate
	default:
		return f.Hold + restartEstimate
	}
}

// seedStream is the PCG's second word; the seed is the first.
const seedStream = 0x6e61726164 // "narad"

// Schedule draws the faults of one run: a pure function of seed and p, so a
// seed replays its schedule. Kinds come in shuffled rounds (each round is
// every kind of p.Kinds once, in an order drawn from the seed), so every
// kind appears once in any len(p.Kinds) faults in a row; the node of each
// is drawn alone. Holds are drawn per kind: a kill keeps its node down 0.5 s
// to a second past the dead timeout (marked dead or not), a term 0.5 to 2 s
// after its exit, and a stop or a cut holds its node 1 to 3 s past the dead
// timeout and a heartbeat. A kind draws only what it needs, after the node,
// so a schedule of some kinds draws the same whatever other kinds exist.
func Schedule(seed uint64, p Plan) []Fault {
	r := rand.New(rand.NewPCG(seed, seedStream))
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
	}
	var out []Fault
	var round []Kind
	var t time.Duration
	for {
		gap := between(p.GapMin, p.GapMax)
		t += gap
		if t >= p.Duration {
			return out
		}
		if len(round) == 0 {
			round = append(round, p.Kinds...)
			r.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		}
		f := Fault{At: t, Gap: gap, Kind: round[0], Node: r.IntN(p.Nodes)}
		round = round[1:]
		if f.Kind == Leader || f.Kind == LeaderPause {
			// Drawn all the same, so the draws after it do not
			// depend on the kind.
			f.Node = -1
		}
		switch f.Kind {
		case Kill, Leader:
			f.Hold = between(500*time.Millisecond, p.DeadTimeout+time.Second)
		case Term:
			f.Hold = between(500*time.Millisecond, 2*time.Second)
		case Stop, Cut, RaftCut, RaftCutOneWay, LeaderPause:
			f.Hold = p.DeadTimeout + p.Heartbeat + between(time.Second, 3*time.Second)
		case NATSKill:
			f.Node = r.IntN(p.NATS)
			f.Hold = between(time.Second, p.DeadTimeout+2*time.Second)
		case Decommission:
			f.Hold = between(500*time.Millisecond, 2*time.Second)
		case Disk:
			f.Op = []string{failFsync, failWrite}[r.IntN(2)]
			f.Hold = between(time.Second, p.DeadTimeout+2*time.Second)
		case DiskFull:
			f.Hold = between(time.Second, p.DeadTimeout+2*time.Second)
		case Clock:
			f.StepMs = between(p.Visibility, 3*p.Visibility).Milliseconds()
			if r.IntN(2) == 0 {
				f.StepMs = -f.StepMs
			}
			f.Hold = between(time.Second, 5*time.Second)
		}
		if p.Overlap && impairs(f.Kind) {
			var with []Kind
			for _, k := range p.Kinds {
				// Two Raft cuts of one node are one cut.
				bothRaft := (k == RaftCut || k == RaftCutOneWay) && (f.Kind == RaftCut || f.Kind == RaftCutOneWay)
				if impairs(k) && k != f.Kind && !bothRaft {
					with = append(with, k)
				}
			}
			if len(with) > 0 {
				f.With = with[r.IntN(len(with))]
			}
		}
		// Whole milliseconds print and replay alike.
		f.Hold = f.Hold.Truncate(time.Millisecond)
		out = append(out, f)
		t += planned(f)
	}
}

// seconds prints d as seconds with one decimal, "12.3 s".
func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

package decommission

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// replica is a metastore replica of three live voters, n1 to n3, and a
// live non-voter, n4; reads through the leader fail with down.
type replica struct {
	members map[string]messages.Member
	down    error
	version int
}

func newReplica() *replica {
	r := &replica{members: map[string]messages.Member{}, version: messages.ClusterVersionNewest}
	for i, id := range []string{"n1", "n2", "n3", "n4"} {
		r.members[id] = messages.Member{ID: id, ReplicaID: uint64(i + 1), Status: messages.MemberAlive}
	}
	return r
}

func (r *replica) OwnedBy(string) []messages.Assignment { return nil }
func (r *replica) Member(id string) (messages.Member, bool) {
	m, ok := r.members[id]
	return m, ok
}
func (r *replica) LeaderMembers(context.Context) ([]messages.Member, error) {
	var out []messages.Member
	for _, m := range r.members {
		out = append(out, m)
	}
	return out, r.down
}
func (r *replica) RaftMembership(context.Context, uint64) (metastore.RaftMembership, error) {
	return metastore.RaftMembership{Voters: map[uint64]string{1: "a", 2: "b", 3: "c"}, NonVoters: map[uint64]string{4: "d"}}, r.down
}
func (r *replica) SetDraining(_ context.Context, id string, draining bool) error {
	m, ok := r.members[id]
	if !ok {
		return metastore.ErrNotFound
	}
	m.Draining = draining
	r.members[id] = m
	return nil
}

func (r *replica) ClusterVersion() int { return r.version }
func (r *replica) ForgetMember(_ context.Context, id string) (messages.Member, error) {
	m := r.members[id]
	if m.Status != messages.MemberDead {
		return m, metastore.ErrRefused
	}
	m.Lost, m.Draining = true, true
	r.members[id] = m
	return m, nil
}

func drain(r *replica, backlog, producing int64) *Drain {
	return New(Deps{NodeID: "n1", Replica: r, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		WALBacklog: func() int64 { return backlog }, Producing: func() int64 { return producing }})
}

// A dry run judges without marking; a decommission marks the member
// draining, and a cancel clears the flag. An unknown member is not found,
// and a leader that does not answer makes the verb unavailable.
func TestDecommissionMarksDrainingUnlessADryRunAndSaysWhatIsMissing(t *testing.T) {
	r := newReplica()
	d := drain(r, 0, 0)
	if v, err := d.Decommission(t.Context(), "n4", true); err != nil || v.Refusal != "" || r.members["n4"].Draining {
		t.Fatalf("a dry run: got %+v, %v, draining %v; want no refusal and no flag", v, err, r.members["n4"].Draining)
	}
	if _, err := d.Decommission(t.Context(), "n4", false); err != nil || !r.members["n4"].Draining {
		t.Fatalf("a decommission: got %v, draining %v; want the flag set", err, r.members["n4"].Draining)
	}
	if err := d.CancelDecommission(t.Context(), "n4"); err != nil || r.members["n4"].Draining {
		t.Fatalf("a cancel: got %v, draining %v; want the flag cleared", err, r.members["n4"].Draining)
	}
	if _, err := d.Decommission(t.Context(), "n9", false); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("an unknown member: got %v, want ErrNotFound", err)
	}
	if err := d.CancelDecommission(t.Context(), "n9"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("a cancel of an unknown member: got %v, want ErrNotFound", err)
	}
	r.down = metastore.ErrUnavailable
	if _, err := d.Decommission(t.Context(), "n4", false); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("no leader: got %v, want ErrUnavailable", err)
	}
}

// Rule D6: the drain service says whether this node refuses produce, and
// counts as its backlog both the records its WAL holds and the produce
// calls admitted but not answered.
func TestRuleD6TheDrainStatusCountsTheWALAndTheProducesInFlight(t *testing.T) {
	r := newReplica()
	if got := drain(r, 4, 2).Status(); got.Refusing || got.Backlog != 6 {
		t.Fatalf("a node not draining: got %+v, want not refusing, backlog 6", got)
	}
	r.members["n1"] = messages.Member{ID: "n1", ReplicaID: 1, Status: messages.MemberAlive, Draining: true}
	if d := drain(r, 0, 0); !d.Draining() || d.Status().Backlog != 0 || !d.Status().Refusing {
		t.Fatalf("a drained node: got %+v, want refusing with nothing left", d.Status())
	}
}

// Rule D8: a decommission that could never complete (a voter whose removal
// would leave too few, with no non-voter to promote) is refused up front, and nothing is marked.
func TestRuleD8ADecommissionThatCouldNeverCompleteIsRefusedUpFront(t *testing.T) {
	r := newReplica()
	delete(r.members, "n4") // no non-voter to promote in n3's place
	v, err := drain(r, 0, 0).Decommission(t.Context(), "n3", false)
	if err != nil || v.Refusal == "" || r.members["n3"].Draining {
		t.Fatalf("a voter of three: got %+v, %v, draining %v; want a refusal and no flag", v, err, r.members["n3"].Draining)
	}
}

// A member whose disk is lost is forgotten only when it is dead, the
// cluster reads the floors its partitions are re-created at, someone can
// take them, and the caller accepted that its records are gone; a dry run
// says what would happen and marks nothing. A voter whose removal needs a
// node to join is still forgotten (its partitions come back now), and the
// verdict says what its removal waits for.
func TestForgetOnlyADeadMemberWithTheLossAccepted(t *testing.T) {
	r := newReplica()
	d := drain(r, 0, 0)
	if v, err := d.Forget(t.Context(), "n3", false, true); err != nil || v.Refusal == "" || r.members["n3"].Lost {
		t.Fatalf("forget a live member: got %+v, %v, lost %v; want a refusal and nothing marked", v, err, r.members["n3"].Lost)
	}
	n3 := r.members["n3"]
	n3.Status = messages.MemberDead
	r.members["n3"] = n3
	r.version = messages.ClusterVersionBoundedSchemas
	if v, err := d.Forget(t.Context(), "n3", false, true); err != nil || !strings.Contains(v.Refusal, "finalize") || r.members["n3"].Lost {
		t.Fatalf("forget below cluster version 4: got %+v, %v; want a refusal that says to finalize", v, err)
	}
	r.version = messages.ClusterVersionLostDisk
	v, err := d.Forget(t.Context(), "n3", true, false)
	if err != nil || v.Refusal != "" || r.members["n3"].Lost {
		t.Fatalf("a dry run: got %+v, %v, lost %v; want no refusal and nothing marked", v, err, r.members["n3"].Lost)
	}
	if _, err := d.Forget(t.Context(), "n3", false, false); !errors.Is(err, errs.ErrInvalid) || r.members["n3"].Lost {
		t.Fatalf("without accepting the loss: got %v, lost %v; want ErrInvalid and nothing marked", err, r.members["n3"].Lost)
	}
	delete(r.members, "n4") // no non-voter to take n3's vote
	v, err = d.Forget(t.Context(), "n3", false, true)
	if err != nil || v.Refusal != "" || !r.members["n3"].Lost || !r.members["n3"].Draining || !strings.Contains(v.Removal, "too few voters") {
		t.Fatalf("forget: got %+v, %v, member %+v; want it lost and draining, its removal waiting for a voter", v, err, r.members["n3"])
	}
	if _, err := d.Forget(t.Context(), "n9", false, true); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("an unknown member: got %v, want ErrNotFound", err)
	}
	for id, m := range r.members {
		if id != "n3" {
			m.Status = messages.MemberDead
			r.members[id] = m
		}
	}
	if v := ForgetRefusal(r.members["n3"], []messages.Member{r.members["n1"], r.members["n2"], r.members["n3"]}, messages.ClusterVersionLostDisk); !strings.Contains(v, "no other live member") {
		t.Fatalf("nobody to take its partitions: got %q, want a refusal saying so", v)
	}
}

package metastore

import (
	"context"
	"fmt"

	"github.com/naradmq/narad/messages"
)

// ---- members (metadata shard) ----
//
// Every node registers at start (PutMember) and then proposes a Heartbeat
// every membership.Config.HeartbeatInterval. Only the metadata leader
// changes a status (SetMemberStatus), from the stamps of its
// membership.Tracker. Errors follow the package's rules: ErrUnavailable is
// an unknown outcome, ErrInvalid was not proposed, ErrNotFound names an
// unknown member.

// PutMember registers m, or registers it again, and returns the record
// after the registration (see messages.PutMember: alive, Leaving cleared,
// Draining kept). ErrInvalid without an ID, a replica id or with an unknown
// role; ErrExists when another member holds the replica id. A registration
// is idempotent enough to retry after ErrUnavailable (a second one only
// bumps Heartbeats and Registered).
func (s *Store) PutMember(ctx context.Context, m messages.Member) (messages.Member, error) {
	op := "put member " + m.ID
	if m.ID == "" || m.ReplicaID == 0 || (m.Role != "" && !validRole(m.Role)) {
		return messages.Member{}, fmt.Errorf("metastore: %s with replica id %d and role %q: %w", op, m.ReplicaID, m.Role, ErrInvalid)
	}
	r, err := s.proposeMeta(ctx, op, messages.MetaCommand{PutMember: &messages.PutMember{Member: m}})
	if err != nil {
		return messages.Member{}, err
	}
	if r.Code == messages.ResultExists && r.Member != nil {
		return messages.Member{}, fmt.Errorf("metastore: %s: replica id %d is member %s's: %w", op, m.ReplicaID, r.Member.ID, ErrExists)
	}
	return memberOf(r, op)
}

// Heartbeat bumps the member's heartbeat counter, and says again which
// cluster version this binary reads. ErrNotFound when id is not a member
// (register again).
func (s *Store) Heartbeat(ctx context.Context, id string) error {
	_, err := s.updateMember(ctx, "heartbeat of "+id, messages.MetaCommand{Heartbeat: &messages.Heartbeat{ID: id, Reads: messages.ClusterVersionNewest}})
	return err
}

// SetClusterVersion moves the cluster version up to v (see
// messages.SetClusterVersion). ErrRefused, with the reason, when a member
// does not read v yet or the cluster is at v or above; ErrInvalid below
// the base.
func (s *Store) SetClusterVersion(ctx context.Context, v int) error {
	op := fmt.Sprintf("set cluster version %d", v)
	r, err := s.proposeMeta(ctx, op, messages.MetaCommand{SetClusterVersion: &messages.SetClusterVersion{Version: v}})
	if err != nil {
		return err
	}
	switch r.Code {
	case messages.ResultOK:
		return nil
	case messages.ResultInvalid:
		return fmt.Errorf("metastore: %s: %s: %w", op, r.Reason, ErrInvalid)
	default:
		return fmt.Errorf("metastore: %s: %s: %w", op, r.Reason, ErrRefused)
	}
}

// SetMemberStatus sets the member's status to status ("alive" or "dead")
// if it is still ifStatus ("" for any status). A refused compare-and-set
// is a result (ResultRefused with the current record, ResultNotFound), not
// an error; an error means the outcome is unknown, except ErrInvalid (an
// unknown status), which was not proposed.
func (s *Store) SetMemberStatus(ctx context.Context, id, status, ifStatus string) (messages.MetaResult, error) {
	return s.SetMemberStatusIf(ctx, messages.SetMemberStatus{ID: id, Status: status, IfStatus: ifStatus})
}

// SetMemberStatusIf is SetMemberStatus with every guard of the command,
// IfHeartbeats included: the form membership.Transition.Command builds.
func (s *Store) SetMemberStatusIf(ctx context.Context, c messages.SetMemberStatus) (messages.MetaResult, error) {
	if !validStatus(c.Status) || (c.IfStatus != "" && !validStatus(c.IfStatus)) {
		return messages.MetaResult{}, fmt.Errorf("metastore: set status of member %s to %q if %q: %w", c.ID, c.Status, c.IfStatus, ErrInvalid)
	}
	return s.proposeMeta(ctx, fmt.Sprintf("set status of member %s to %s", c.ID, c.Status), messages.MetaCommand{SetMemberStatus: &c})
}

// SetDraining sets or clears the member's decommission flag (rule D1).
func (s *Store) SetDraining(ctx context.Context, id string, draining bool) error {
	_, err := s.updateMember(ctx, fmt.Sprintf("set draining of member %s to %t", id, draining),
		messages.MetaCommand{SetDraining: &messages.SetDraining{ID: id, Draining: draining}})
	return err
}

// ForgetMember marks a dead member lost and draining (see
// messages.ForgetMember): the controller then re-creates its partitions
// empty on live nodes and removes it. ErrNotFound for an unknown member;
// ErrRefused, with the reason, while it is alive.
func (s *Store) ForgetMember(ctx context.Context, id string) (messages.Member, error) {
	op := "forget member " + id
	r, err := s.proposeMeta(ctx, op, messages.MetaCommand{ForgetMember: &messages.ForgetMember{ID: id}})
	if err != nil {
		return messages.Member{}, err
	}
	if r.Code == messages.ResultRefused {
		return messages.Member{}, &RefusedError{Op: op, Reason: r.Reason, kind: ErrRefused}
	}
	return memberOf(r, op)
}

// SetLeaving sets or clears the member's leaving flag (rule B8).
func (s *Store) SetLeaving(ctx context.Context, id string, leaving bool) error {
	_, err := s.updateMember(ctx, fmt.Sprintf("set leaving of member %s to %t", id, leaving),
		messages.MetaCommand{SetLeaving: &messages.SetLeaving{ID: id, Leaving: leaving}})
	return err
}

// SetMemberRole records the member's Raft role ("voter" or "nonvoter").
func (s *Store) SetMemberRole(ctx context.Context, id, role string) error {
	op := fmt.Sprintf("set role of member %s to %q", id, role)
	if !validRole(role) {
		return fmt.Errorf("metastore: %s: %w", op, ErrInvalid)
	}
	_, err := s.updateMember(ctx, op, messages.MetaCommand{SetMemberRole: &messages.SetMemberRole{ID: id, Role: role}})
	return err
}

// RemoveMember deletes the member's record and returns it (ErrNotFound when
// there is none, e.g. a retry after ErrUnavailable that had applied).
func (s *Store) RemoveMember(ctx context.Context, id string) (messages.Member, error) {
	return s.updateMember(ctx, "remove member "+id, messages.MetaCommand{RemoveMember: &messages.RemoveMember{ID: id}})
}

// updateMember proposes a member command that must answer ResultOK.
func (s *Store) updateMember(ctx context.Context, op string, cmd messages.MetaCommand) (messages.Member, error) {
	r, err := s.proposeMeta(ctx, op, cmd)
	if err != nil {
		return messages.Member{}, err
	}
	return memberOf(r, op)
}

func memberOf(r messages.MetaResult, op string) (messages.Member, error) {
	return recordOf(r, op, "member", r.Member)
}

// Member reads a member from this replica (possibly stale: for routing).
func (s *Store) Member(id string) (messages.Member, bool) {
	return metaLookup(s, id, (*metaState).member)
}

// Members lists the members of this replica, sorted by id.
func (s *Store) Members() []messages.Member {
	return metaList(s, (*metaState).memberList)
}

// LeaderMembers lists the members linearizably (a ReadIndex barrier through
// the leader), sorted by id: it reflects every member command that
// completed before the call. The controller plans on it.
func (s *Store) LeaderMembers(ctx context.Context) ([]messages.Member, error) {
	v, err := s.read(ctx, MetaShard, membersQuery{})
	if err != nil {
		return nil, fmt.Errorf("metastore: leader read of members: %w", err)
	}
	return v.([]messages.Member), nil
}

// AllocateReplicaID hands out a Raft replica id for a joining node: one
// never handed out nor registered before, and above every id the shards'
// Raft configurations hold or ever removed (read through the leaders), so
// it is free in Raft too. Each call allocates anew: an id whose answer was
// lost is simply never used.
func (s *Store) AllocateReplicaID(ctx context.Context) (uint64, error) {
	var floor uint64
	for _, shard := range s.Shards() {
		m, err := s.RaftMembership(ctx, shard)
		if err != nil {
			return 0, fmt.Errorf("metastore: allocate a replica id: %w", err)
		}
		for _, ids := range []map[uint64]string{m.Voters, m.NonVoters} {
			for id := range ids {
				floor = max(floor, id+1)
			}
		}
		for id := range m.Removed {
			floor = max(floor, id+1)
		}
	}
	op := "allocate a replica id"
	r, err := s.proposeMeta(ctx, op, messages.MetaCommand{AllocateReplica: &messages.AllocateReplica{Floor: floor}})
	if err != nil {
		return 0, err
	}
	if r.Code != messages.ResultOK {
		return 0, codeError(op, r.Code)
	}
	return r.ReplicaID, nil
}

package metastore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/naradmq/narad/messages"
)

// metaState is the metadata shard's content: topics by name and members by
// node id. apply is a pure function of (state, command, index): no clock,
// no randomness, no I/O, so every replica that applies the same log
// reaches the same state.
// It is not safe for concurrent use; the adapter (fsm.go) locks.
type metaState struct {
	// index is the Raft index of the last command applied.
	index uint64
	// topicsAt is the index of the last command that may have changed a
	// topic record (a create, delete, alter, attach or detach), or of the
	// snapshot the state was loaded from: what Store.TopicsVersion reads,
	// so that a reader following topics skips the heartbeats that move
	// index several times a second. Local like index, not in snapshots.
	// existingAt is the same but for the creates of topics without a
	// parent, which change no record that existed before them.
	topicsAt, existingAt uint64
	topics               map[string]messages.Topic
	// parents holds the parent's name of each current topic by its
	// incarnation ("" when it has none): a planning round asks whether
	// each partition it lists is of a current topic, and a look-up by
	// name was most of a round at 300,000 partitions (issue 50). Derived
	// from topics (setTopic, dropTopic), never snapshotted.
	parents map[uint64]string
	// names are the topic names, sorted, for ordered listings.
	names   []string
	members map[string]messages.Member
	// memberIDs are the member ids, sorted.
	memberIDs []string
	// nextReplica is above every replica id allocated or registered so
	// far: Raft refuses a removed id forever, so an id is never handed out
	// twice (0 until the first allocation or registration).
	nextReplica uint64
	users       map[string]messages.User
	// usernames are the user names, sorted.
	usernames []string
	// clusterVersion gates the formats nodes write (messages.ClusterVersion*);
	// 0 until set, which nodes read as ClusterVersionBase.
	clusterVersion int
}

func newMetaState() *metaState {
	return &metaState{topics: make(map[string]messages.Topic), parents: make(map[uint64]string), members: make(map[string]messages.Member),
		users: make(map[string]messages.User)}
}

// applyEntry decodes and applies one log entry. An entry that does not
// decode, or names no command, applies as ResultInvalid (deterministically:
// every replica sees the same bytes). An entry of a newer CommandVersion is
// an error: this binary must not guess what it means, and Dragonboat stops
// the replica rather than let it diverge.
func (s *metaState) applyEntry(data []byte, index uint64) (messages.MetaResult, error) {
	var cmd messages.MetaCommand
	if err := json.Unmarshal(data, &cmd); err != nil {
		s.index = index
		return messages.MetaResult{Code: messages.ResultInvalid}, nil
	}
	if cmd.Version > messages.CommandVersion {
		return messages.MetaResult{}, fmt.Errorf("metastore: metadata entry %d has command version %d, this binary knows %d", index, cmd.Version, messages.CommandVersion)
	}
	return s.apply(cmd, index), nil
}

// apply applies one command at the given Raft index.
func (s *metaState) apply(cmd messages.MetaCommand, index uint64) messages.MetaResult {
	s.index = index
	if cmd.Version < 1 || countSet(cmd.CreateTopic != nil, cmd.DeleteTopic != nil, cmd.AlterTopic != nil,
		cmd.PutMember != nil, cmd.Heartbeat != nil, cmd.SetMemberStatus != nil, cmd.SetDraining != nil,
		cmd.SetLeaving != nil, cmd.SetMemberRole != nil, cmd.RemoveMember != nil, cmd.AllocateReplica != nil,
		cmd.CreateUser != nil, cmd.DeleteUser != nil, cmd.SetUserGrants != nil, cmd.SetUserPassword != nil,
		cmd.AttachChild != nil, cmd.DetachChild != nil, cmd.SetClusterVersion != nil, cmd.ForgetMember != nil) != 1 {
		return messages.MetaResult{Code: messages.ResultInvalid}
	}
	if cmd.CreateTopic != nil || cmd.DeleteTopic != nil || cmd.AlterTopic != nil || cmd.AttachChild != nil || cmd.DetachChild != nil {
		s.topicsAt = index
		// All but a create without a parent change a record that existed
		// (a child's create links its parent).
		if cmd.CreateTopic == nil || cmd.CreateTopic.Topic.Parent != "" {
			s.existingAt = index
		}
	}
	if cmd.CreateTopic != nil {
		return s.createTopic(cmd.CreateTopic.Topic, index)
	}
	if cmd.AttachChild != nil {
		return s.attachChild(*cmd.AttachChild, index)
	}
	if cmd.DetachChild != nil {
		return s.detachChild(*cmd.DetachChild)
	}
	if cmd.DeleteTopic != nil {
		return s.deleteTopic(*cmd.DeleteTopic)
	}
	if cmd.AlterTopic != nil {
		return s.alterTopic(*cmd.AlterTopic)
	}
	if cmd.PutMember != nil {
		return s.putMember(cmd.PutMember.Member, index)
	}
	if cmd.Heartbeat != nil {
		r := s.updateMember(cmd.Heartbeat.ID, func(m *messages.Member) messages.ResultCode {
			m.Heartbeats++
			if cmd.Heartbeat.Reads > 0 {
				m.Reads = cmd.Heartbeat.Reads
			}
			return messages.ResultOK
		})
		s.versionWhileFresh()
		return r
	}
	if cmd.SetClusterVersion != nil {
		return s.setClusterVersion(cmd.SetClusterVersion.Version)
	}
	if cmd.SetMemberStatus != nil {
		return s.setMemberStatus(*cmd.SetMemberStatus)
	}
	if cmd.ForgetMember != nil {
		r := s.updateMember(cmd.ForgetMember.ID, func(m *messages.Member) messages.ResultCode {
			if m.Status != messages.MemberDead {
				return messages.ResultRefused
			}
			m.Lost, m.Draining = true, true
			return messages.ResultOK
		})
		if r.Code == messages.ResultRefused {
			r.Reason = "the member is alive: only a dead member can be forgotten"
		}
		return r
	}
	if cmd.SetDraining != nil {
		return s.updateMember(cmd.SetDraining.ID, func(m *messages.Member) messages.ResultCode {
			m.Draining = cmd.SetDraining.Draining
			return messages.ResultOK
		})
	}
	if cmd.SetLeaving != nil {
		return s.updateMember(cmd.SetLeaving.ID, func(m *messages.Member) messages.ResultCode {
			m.Leaving = cmd.SetLeaving.Leaving
			return messages.ResultOK
		})
	}
	if cmd.SetMemberRole != nil {
		if !validRole(cmd.SetMemberRole.Role) {
			return messages.MetaResult{Code: messages.ResultInvalid}
		}
		return s.updateMember(cmd.SetMemberRole.ID, func(m *messages.Member) messages.ResultCode {
			m.Role = cmd.SetMemberRole.Role
			return messages.ResultOK
		})
	}
	if cmd.AllocateReplica != nil {
		return s.allocateReplica(*cmd.AllocateReplica)
	}
	if cmd.CreateUser != nil {
		return s.createUser(cmd.CreateUser.User)
	}
	if cmd.DeleteUser != nil {
		return s.deleteUser(cmd.DeleteUser.Username)
	}
	if cmd.SetUserGrants != nil {
		c := cmd.SetUserGrants
		return s.updateUser(c.Username, func(u *messages.User) {
			u.Grants, u.UpdatedAtMs = cloneGrants(c.Grants), c.UpdatedAtMs
		})
	}
	if cmd.SetUserPassword != nil {
		c := cmd.SetUserPassword
		if c.PasswordHash == "" {
			return messages.MetaResult{Code: messages.ResultInvalid}
		}
		return s.updateUser(c.Username, func(u *messages.User) {
			u.PasswordHash, u.UpdatedAtMs = c.PasswordHash, c.UpdatedAtMs
		})
	}
	// Exactly one is set (countSet above): RemoveMember.
	return s.removeMember(cmd.RemoveMember.ID)
}

// allocateReplica hands out the next replica id, at least a.Floor.
func (s *metaState) allocateReplica(a messages.AllocateReplica) messages.MetaResult {
	id := max(s.nextReplica, a.Floor, 1)
	s.nextReplica = id + 1
	return messages.MetaResult{Code: messages.ResultOK, ReplicaID: id}
}

func (s *metaState) createTopic(t messages.Topic, index uint64) messages.MetaResult {
	if t.Name == "" || t.Partitions < 1 || t.RetentionMs < 0 || t.VisibilityTimeoutMs < 0 ||
		t.MaxInFlightPerPartition < 0 || t.MaxAckedAheadPerPartition < 0 {
		return messages.MetaResult{Code: messages.ResultInvalid}
	}
	if old, ok := s.topics[t.Name]; ok {
		return messages.MetaResult{Code: messages.ResultExists, Topic: cloneTopic(&old)}
	}
	t.Incarnation = index
	t.Schemas = compactSchemas(t.Schemas)
	t.Schemas, t.SchemasDropped = s.keepNewestSchemas(t.Schemas, 0)
	// The links are the state machine's to make: a create names a parent
	// and a delay, never children or an epoch.
	delay := t.FanoutDelayMs
	t.Children, t.AttachEpoch, t.FanoutDelayMs = nil, 0, 0
	var parent messages.Topic
	if t.Parent != "" {
		p, ok := s.topics[t.Parent]
		if !ok {
			return refused(refusal{messages.ResultNotFound, "parent topic not found"}, nil)
		}
		t.Parent = ""
		if r := attachRefusal(p, t, delay); r.code != messages.ResultOK {
			return refused(r, nil)
		}
		parent = p
	} else if delay != 0 {
		return refused(refusal{messages.ResultInvalid, "fanout_delay_ms needs parent"}, nil)
	}
	s.names = insertSorted(s.names, t.Name)
	if parent.Name != "" {
		s.link(&parent, &t, delay, index)
	} else {
		s.setTopic(t)
	}
	return messages.MetaResult{Code: messages.ResultOK, Topic: cloneTopic(&t)}
}

func (s *metaState) deleteTopic(d messages.DeleteTopic) messages.MetaResult {
	t, ok := s.topics[d.Name]
	if !ok || (d.Incarnation != 0 && d.Incarnation != t.Incarnation) {
		return messages.MetaResult{Code: messages.ResultNotFound}
	}
	s.unlinkAll(t)
	s.dropTopic(t)
	s.names = deleteSorted(s.names, d.Name)
	return messages.MetaResult{Code: messages.ResultOK, Topic: cloneTopic(&t)}
}

func (s *metaState) alterTopic(a messages.AlterTopic) messages.MetaResult {
	t, ok := s.topics[a.Name]
	if !ok {
		return messages.MetaResult{Code: messages.ResultNotFound}
	}
	negative := func(p *int64) bool { return p != nil && *p < 0 }
	if (a.Partitions != 0 && a.Partitions <= t.Partitions) ||
		negative(a.RetentionMs) || negative(a.MaxInFlightPerPartition) || negative(a.MaxAckedAheadPerPartition) {
		return messages.MetaResult{Code: messages.ResultInvalid, Topic: cloneTopic(&t)}
	}
	if code, why := AlterRefusal(t, a); code != messages.ResultOK {
		return refused(refusal{code, why}, &t)
	}
	if a.Partitions != 0 {
		t.Partitions = a.Partitions
	}
	if a.RetentionMs != nil {
		t.RetentionMs = *a.RetentionMs
	}
	if a.MaxInFlightPerPartition != nil {
		t.MaxInFlightPerPartition = *a.MaxInFlightPerPartition
	}
	if a.MaxAckedAheadPerPartition != nil {
		t.MaxAckedAheadPerPartition = *a.MaxAckedAheadPerPartition
	}
	if len(a.AddSchema) > 0 {
		// Clip first: readers may hold a copy sharing the old backing array.
		t.Schemas = append(slices.Clip(t.Schemas), compactSchema(a.AddSchema))
		t.Schemas, t.SchemasDropped = s.keepNewestSchemas(t.Schemas, t.SchemasDropped)
	}
	s.setTopic(t)
	return messages.MetaResult{Code: messages.ResultOK, Topic: cloneTopic(&t)}
}

// setTopic stores t, and is the only write of a topic record: it keeps the
// parents index with the records.
func (s *metaState) setTopic(t messages.Topic) {
	if old, ok := s.topics[t.Name]; ok && old.Incarnation != t.Incarnation {
		delete(s.parents, old.Incarnation)
	}
	s.topics[t.Name] = t
	s.parents[t.Incarnation] = t.Parent
}

// dropTopic removes t's record and its entry in the parents index.
func (s *metaState) dropTopic(t messages.Topic) {
	delete(s.topics, t.Name)
	delete(s.parents, t.Incarnation)
}

// putMember registers m or registers it again (see messages.PutMember).
func (s *metaState) putMember(m messages.Member, index uint64) messages.MetaResult {
	if m.ID == "" || m.ReplicaID == 0 || (m.Role != "" && !validRole(m.Role)) {
		return messages.MetaResult{Code: messages.ResultInvalid}
	}
	// At most one other member can hold the replica id: this check keeps
	// them unique, so the scan's outcome does not depend on map order.
	for id, other := range s.members {
		if id != m.ID && other.ReplicaID == m.ReplicaID {
			return messages.MetaResult{Code: messages.ResultExists, Member: &other}
		}
	}
	rec, ok := s.members[m.ID]
	if !ok {
		rec = messages.Member{ID: m.ID, Role: messages.RoleVoter}
		s.memberIDs = insertSorted(s.memberIDs, m.ID)
	} else {
		// A registration is a sign of life: the leader's tracker sees the
		// counter move and stamps it.
		rec.Heartbeats++
	}
	rec.ReplicaID, rec.HTTPAddr, rec.RaftAddr = m.ReplicaID, m.HTTPAddr, m.RaftAddr
	// An id passed by hand (--replica-id) is used too: never allocate it.
	s.nextReplica = max(s.nextReplica, m.ReplicaID+1)
	if m.Role != "" {
		rec.Role = m.Role
	}
	rec.Status = messages.MemberAlive
	rec.Leaving = false // rule D1: Draining is kept
	rec.Registered = index
	rec.Reads = m.Reads
	s.members[m.ID] = rec
	s.versionWhileFresh()
	return messages.MetaResult{Code: messages.ResultOK, Member: &rec}
}

// versionWhileFresh sets the cluster version of a cluster that holds no
// data yet (no topic, no user: the first metadata leader seeds admin soon
// after the first election) to the lowest any member reads, so a new
// cluster of new binaries starts at the newest formats without an
// operator's step. A cluster that began before cluster versions always
// holds its admin, so an upgrade never lands here: it stays at 0 (the
// base) until finalized. While fresh the version may move down, when an
// older member registers: nothing has been written yet.
func (s *metaState) versionWhileFresh() {
	if len(s.users) > 0 || len(s.topics) > 0 || len(s.members) == 0 {
		return
	}
	low := messages.ClusterVersionNewest
	for _, m := range s.members {
		low = min(low, m.Reads)
	}
	s.clusterVersion = low
}

// setClusterVersion moves the cluster version up to v if every member
// reads it (see messages.SetClusterVersion).
func (s *metaState) setClusterVersion(v int) messages.MetaResult {
	if v < messages.ClusterVersionBase {
		return messages.MetaResult{Code: messages.ResultInvalid, Reason: fmt.Sprintf("cluster version %d: the lowest is %d", v, messages.ClusterVersionBase)}
	}
	if v <= s.clusterVersion {
		return messages.MetaResult{Code: messages.ResultRefused, Reason: fmt.Sprintf("the cluster is at version %d already; it never moves down", s.clusterVersion)}
	}
	for _, id := range s.memberIDs {
		if m := s.members[id]; m.Reads < v {
			return messages.MetaResult{Code: messages.ResultRefused, Reason: fmt.Sprintf("member %s reads cluster version %d at most; upgrade it first", id, m.Reads)}
		}
	}
	s.clusterVersion = v
	return messages.MetaResult{Code: messages.ResultOK}
}

// setMemberStatus is the leader's compare-and-set of a status.
func (s *metaState) setMemberStatus(c messages.SetMemberStatus) messages.MetaResult {
	if !validStatus(c.Status) || (c.IfStatus != "" && !validStatus(c.IfStatus)) {
		return messages.MetaResult{Code: messages.ResultInvalid}
	}
	return s.updateMember(c.ID, func(m *messages.Member) messages.ResultCode {
		if (c.IfStatus != "" && m.Status != c.IfStatus) || (c.IfHeartbeats != nil && m.Heartbeats != *c.IfHeartbeats) {
			return messages.ResultRefused
		}
		m.Status = c.Status
		return messages.ResultOK
	})
}

// updateMember applies fn to the member's record, and keeps the change
// only when fn answers ResultOK. The result carries the record after.
func (s *metaState) updateMember(id string, fn func(*messages.Member) messages.ResultCode) messages.MetaResult {
	m, ok := s.members[id]
	if !ok {
		return messages.MetaResult{Code: messages.ResultNotFound}
	}
	changed := m
	code := fn(&changed)
	if code == messages.ResultOK {
		s.members[id] = changed
		m = changed
	}
	return messages.MetaResult{Code: code, Member: &m}
}

func (s *metaState) removeMember(id string) messages.MetaResult {
	m, ok := s.members[id]
	if !ok {
		return messages.MetaResult{Code: messages.ResultNotFound}
	}
	delete(s.members, id)
	s.memberIDs = deleteSorted(s.memberIDs, id)
	return messages.MetaResult{Code: messages.ResultOK, Member: &m}
}

func (s *metaState) createUser(u messages.User) messages.MetaResult {
	if u.Username == "" || u.PasswordHash == "" {
		return messages.MetaResult{Code: messages.ResultInvalid}
	}
	if old, ok := s.users[u.Username]; ok {
		return messages.MetaResult{Code: messages.ResultExists, User: cloneUser(old)}
	}
	u.Grants = cloneGrants(u.Grants)
	s.users[u.Username] = u
	s.usernames = insertSorted(s.usernames, u.Username)
	return messages.MetaResult{Code: messages.ResultOK, User: cloneUser(u)}
}

func (s *metaState) deleteUser(name string) messages.MetaResult {
	u, ok := s.users[name]
	if !ok {
		return messages.MetaResult{Code: messages.ResultNotFound}
	}
	delete(s.users, name)
	s.usernames = deleteSorted(s.usernames, name)
	return messages.MetaResult{Code: messages.ResultOK, User: cloneUser(u)}
}

// updateUser applies fn to a copy of the user's record and keeps it.
func (s *metaState) updateUser(name string, fn func(*messages.User)) messages.MetaResult {
	u, ok := s.users[name]
	if !ok {
		return messages.MetaResult{Code: messages.ResultNotFound}
	}
	fn(&u)
	s.users[name] = u
	return messages.MetaResult{Code: messages.ResultOK, User: cloneUser(u)}
}

// user returns a copy of the user's record.
func (s *metaState) user(name string) (messages.User, bool) {
	u, ok := s.users[name]
	if !ok {
		return messages.User{}, false
	}
	return *cloneUser(u), true
}

// userList returns copies of every user, sorted by name.
func (s *metaState) userList() []messages.User {
	out := make([]messages.User, 0, len(s.usernames))
	for _, name := range s.usernames {
		out = append(out, *cloneUser(s.users[name]))
	}
	return out
}

// cloneUser copies u so that a caller never aliases the state's grants.
func cloneUser(u messages.User) *messages.User {
	u.Grants = cloneGrants(u.Grants)
	return &u
}

func cloneGrants(gs []messages.Grant) []messages.Grant {
	if len(gs) == 0 {
		return nil
	}
	out := make([]messages.Grant, len(gs))
	for i, g := range gs {
		out[i] = messages.Grant{Action: g.Action, Patterns: slices.Clone(g.Patterns)}
	}
	return out
}

// member returns the member's record (a Member holds no slices: a copy).
func (s *metaState) member(id string) (messages.Member, bool) {
	m, ok := s.members[id]
	return m, ok
}

// memberList returns every member, sorted by id.
func (s *metaState) memberList() []messages.Member {
	out := make([]messages.Member, 0, len(s.memberIDs))
	for _, id := range s.memberIDs {
		out = append(out, s.members[id])
	}
	return out
}

func validStatus(st string) bool { return st == messages.MemberAlive || st == messages.MemberDead }

func validRole(r string) bool { return r == messages.RoleVoter || r == messages.RoleNonVoter }

// topic returns a copy of the named topic.
func (s *metaState) topic(name string) (messages.Topic, bool) {
	t, ok := s.topics[name]
	if !ok {
		return messages.Topic{}, false
	}
	return *cloneTopic(&t), true
}

// list returns copies of every topic, sorted by name.
func (s *metaState) list() []messages.Topic {
	out := make([]messages.Topic, 0, len(s.names))
	for _, name := range s.names {
		t := s.topics[name]
		out = append(out, *cloneTopic(&t))
	}
	return out
}

// Queries understood by metaState.lookup (through Dragonboat's Lookup).
type (
	topicQuery   struct{ name string }
	topicsQuery  struct{}
	memberQuery  struct{ id string }
	membersQuery struct{}
	userQuery    struct{ name string }
)

// userAnswer is the answer to a userQuery.
type userAnswer struct {
	user  messages.User
	found bool
}

// memberAnswer is the answer to a memberQuery.
type memberAnswer struct {
	member messages.Member
	found  bool
}

// topicAnswer is the answer to a topicQuery.
type topicAnswer struct {
	topic messages.Topic
	found bool
}

func (s *metaState) lookup(q any) (any, error) {
	switch q := q.(type) {
	case topicQuery:
		t, ok := s.topic(q.name)
		return topicAnswer{topic: t, found: ok}, nil
	case topicsQuery:
		return s.list(), nil
	case memberQuery:
		m, ok := s.member(q.id)
		return memberAnswer{member: m, found: ok}, nil
	case membersQuery:
		return s.memberList(), nil
	case userQuery:
		u, ok := s.user(q.name)
		return userAnswer{user: u, found: ok}, nil
	case appliedQuery:
		return s.index, nil
	default:
		return nil, fmt.Errorf("metastore: metadata shard: unknown query %T: %w", q, ErrInvalid)
	}
}

func (s *metaState) appliedIndex() uint64 { return s.index }

// metaSnapshot is the snapshot encoding: JSON of the sorted contents, so
// two replicas with the same state write the same bytes.
// Members is omitted when empty, so a state without members writes the
// bytes it wrote before members existed, and such a snapshot loads.
type metaSnapshot struct {
	Format  int               `json:"format"`
	Index   uint64            `json:"index"`
	Topics  []messages.Topic  `json:"topics"`
	Members []messages.Member `json:"members,omitempty"`
	// NextReplicaID is metaState.nextReplica; omitted while 0, like Members.
	NextReplicaID uint64 `json:"next_replica_id,omitempty"`
	// Users is omitted when empty, like Members.
	Users []messages.User `json:"users,omitempty"`
	// ClusterVersion is metaState.clusterVersion; omitted while 0, so a
	// snapshot of a cluster that never set one reads as before.
	ClusterVersion int `json:"cluster_version,omitempty"`
}

// snapshotFormat is the version of both snapshot encodings.
const snapshotFormat = 1

func (s *metaState) save(w io.Writer) error {
	return json.NewEncoder(w).Encode(metaSnapshot{Format: snapshotFormat, Index: s.index, Topics: s.list(), Members: s.memberList(), NextReplicaID: s.nextReplica, Users: s.userList(), ClusterVersion: s.clusterVersion})
}

func loadMetaState(r io.Reader) (*metaState, error) {
	var snap metaSnapshot
	if err := json.NewDecoder(r).Decode(&snap); err != nil {
		return nil, fmt.Errorf("metastore: decode metadata snapshot: %w", err)
	}
	if snap.Format != snapshotFormat {
		return nil, fmt.Errorf("metastore: metadata snapshot format %d, want %d", snap.Format, snapshotFormat)
	}
	s := newMetaState()
	s.index, s.topicsAt, s.existingAt = snap.Index, snap.Index, snap.Index
	s.nextReplica = snap.NextReplicaID
	s.clusterVersion = snap.ClusterVersion
	var err error
	if s.names, err = indexSnapshot("topic", snap.Topics, topicKey, s.topics); err != nil {
		return nil, err
	}
	for _, t := range s.topics {
		s.parents[t.Incarnation] = t.Parent
	}
	if s.memberIDs, err = indexSnapshot("member", snap.Members, memberKey, s.members); err != nil {
		return nil, err
	}
	if s.usernames, err = indexSnapshot("user", snap.Users, userKey, s.users); err != nil {
		return nil, err
	}
	return s, nil
}

func topicKey(t messages.Topic) string   { return t.Name }
func memberKey(m messages.Member) string { return m.ID }
func userKey(u messages.User) string     { return u.Username }

// indexSnapshot puts a snapshot's list of what (topics, members) into m by
// key and returns the keys sorted, as metaState keeps them for listings.
// A key listed twice is a damaged snapshot: which record would win is
// not for a replica to guess.
func indexSnapshot[T any](what string, list []T, key func(T) string, m map[string]T) ([]string, error) {
	var keys []string
	for _, v := range list {
		k := key(v)
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("metastore: metadata snapshot lists %s %q twice", what, k)
		}
		m[k] = v
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, nil
}

// cloneTopic copies t so that a caller can never alias the state's slices.
// The schema bytes themselves are never mutated, so they are shared.
func cloneTopic(t *messages.Topic) *messages.Topic {
	c := *t
	c.Schemas = slices.Clone(t.Schemas)
	c.Children = slices.Clone(t.Children)
	return &c
}

// compactSchema returns s without insignificant whitespace, so a schema
// reads the same on a replica that applied the log and on one restored from
// a snapshot (encoding/json compacts raw messages when it encodes them).
func compactSchema(s json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, s); err != nil {
		return slices.Clone(s)
	}
	return b.Bytes()
}

// MaxSchemaVersions is how many schema versions a topic's record keeps,
// the newest. Each alter that registers a schema adds one, and a schema
// may be as large as a request body (1 MiB), so without a bound a topic's
// record would grow with every alter, in every replica's memory and
// snapshot. Nothing reads a version but the latest: a produce validates
// against it, and the next alter checks its compatibility with it; the
// older ones are there for an operator reading the metastore, and 8
// covers a deploy's few rollbacks while it bounds a record at 8 MiB of
// schemas. It is a constant, not a node's setting, because every replica
// must apply an alter the same way.
const MaxSchemaVersions = 8

// keepNewestSchemas drops the oldest of schemas past MaxSchemaVersions,
// counting them into dropped, once the cluster version has every replica
// do the same (messages.ClusterVersionBoundedSchemas); the slice it
// returns shares no backing array with the one given when it drops any.
func (s *metaState) keepNewestSchemas(schemas []json.RawMessage, dropped int) ([]json.RawMessage, int) {
	if s.clusterVersion < messages.ClusterVersionBoundedSchemas {
		return schemas, dropped
	}
	if over := len(schemas) - MaxSchemaVersions; over > 0 {
		return slices.Clone(schemas[over:]), dropped + over
	}
	return schemas, dropped
}

func compactSchemas(in []json.RawMessage) []json.RawMessage {
	if len(in) == 0 {
		return nil
	}
	out := make([]json.RawMessage, len(in))
	for i, s := range in {
		out[i] = compactSchema(s)
	}
	return out
}

func countSet(set ...bool) int {
	n := 0
	for _, b := range set {
		if b {
			n++
		}
	}
	return n
}

// insertSorted adds key to the sorted index keys (the names, member ids
// and usernames the lists walk in order); the caller knows it is new.
func insertSorted(keys []string, key string) []string {
	at, _ := slices.BinarySearch(keys, key)
	return slices.Insert(keys, at, key)
}

// deleteSorted takes key out of the sorted index keys, if it is there.
func deleteSorted(keys []string, key string) []string {
	if at, found := slices.BinarySearch(keys, key); found {
		return slices.Delete(keys, at, at+1)
	}
	return keys
}

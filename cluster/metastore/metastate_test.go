package metastore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/naradmq/narad/messages"
)

// Commands for the tables.

func createCmd(name string, partitions int) messages.MetaCommand {
	return messages.MetaCommand{Version: messages.CommandVersion, CreateTopic: &messages.CreateTopic{
		Topic: messages.Topic{Name: name, Partitions: partitions, RetentionMs: 1000, CreatedAt: 42},
	}}
}

func deleteCmd(name string, incarnation uint64) messages.MetaCommand {
	return messages.MetaCommand{Version: messages.CommandVersion, DeleteTopic: &messages.DeleteTopic{Name: name, Incarnation: incarnation}}
}

func alterCmd(a messages.AlterTopic) messages.MetaCommand {
	return messages.MetaCommand{Version: messages.CommandVersion, AlterTopic: &a}
}

// metaStateAfter is a new metaState with setup applied in order, command i
// at index i+1; a command that is not OK fails the test.
func metaStateAfter(t testing.TB, setup []messages.MetaCommand) *metaState {
	t.Helper()
	s := newMetaState()
	for i, c := range setup {
		if r := s.apply(c, uint64(i+1)); r.Code != messages.ResultOK {
			t.Fatalf("setup step %d: got code %d, want OK", i+1, r.Code)
		}
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// topicAt is the record createCmd(name, partitions) makes at index.
func topicAt(name string, partitions int, index uint64) messages.Topic {
	return messages.Topic{Name: name, Incarnation: index, Partitions: partitions, RetentionMs: 1000, CreatedAt: 42}
}

func TestMetaStateApply(t *testing.T) {
	tests := []struct {
		name string
		// setup is applied at indexes 1, 2, ...; the command under test at
		// the next index.
		setup     []messages.MetaCommand
		cmd       messages.MetaCommand
		wantCode  messages.ResultCode
		wantTopic *messages.Topic
		// wantTopics is the whole state afterwards, sorted by name.
		wantTopics []messages.Topic
	}{
		{
			name:       "create on empty takes the entry index as incarnation",
			cmd:        createCmd("orders", 3),
			wantCode:   messages.ResultOK,
			wantTopic:  ptr(topicAt("orders", 3, 1)),
			wantTopics: []messages.Topic{topicAt("orders", 3, 1)},
		},
		{
			name:       "create of a taken name answers exists with the existing record",
			setup:      []messages.MetaCommand{createCmd("orders", 3)},
			cmd:        createCmd("orders", 8),
			wantCode:   messages.ResultExists,
			wantTopic:  ptr(topicAt("orders", 3, 1)),
			wantTopics: []messages.Topic{topicAt("orders", 3, 1)},
		},
		{
			name:       "create without a name is invalid",
			cmd:        createCmd("", 3),
			wantCode:   messages.ResultInvalid,
			wantTopics: []messages.Topic{},
		},
		{
			name: "create with retention 0 (records kept forever) is valid",
			cmd: messages.MetaCommand{Version: messages.CommandVersion, CreateTopic: &messages.CreateTopic{
				Topic: messages.Topic{Name: "orders", Partitions: 1, CreatedAt: 42},
			}},
			wantCode:   messages.ResultOK,
			wantTopic:  &messages.Topic{Name: "orders", Incarnation: 1, Partitions: 1, CreatedAt: 42},
			wantTopics: []messages.Topic{{Name: "orders", Incarnation: 1, Partitions: 1, CreatedAt: 42}},
		},
		{
			name:       "create without partitions is invalid",
			cmd:        createCmd("orders", 0),
			wantCode:   messages.ResultInvalid,
			wantTopics: []messages.Topic{},
		},
		{
			name:       "delete of any incarnation returns the deleted record",
			setup:      []messages.MetaCommand{createCmd("orders", 3), createCmd("audit", 1)},
			cmd:        deleteCmd("orders", 0),
			wantCode:   messages.ResultOK,
			wantTopic:  ptr(topicAt("orders", 3, 1)),
			wantTopics: []messages.Topic{topicAt("audit", 1, 2)},
		},
		{
			name:       "delete of the named incarnation",
			setup:      []messages.MetaCommand{createCmd("orders", 3)},
			cmd:        deleteCmd("orders", 1),
			wantCode:   messages.ResultOK,
			wantTopic:  ptr(topicAt("orders", 3, 1)),
			wantTopics: []messages.Topic{},
		},
		{
			name:       "delete of another incarnation is not found",
			setup:      []messages.MetaCommand{createCmd("orders", 3)},
			cmd:        deleteCmd("orders", 7),
			wantCode:   messages.ResultNotFound,
			wantTopics: []messages.Topic{topicAt("orders", 3, 1)},
		},
		{
			name:       "delete of an absent name is not found",
			cmd:        deleteCmd("orders", 0),
			wantCode:   messages.ResultNotFound,
			wantTopics: []messages.Topic{},
		},
		{
			name:       "a recreated name gets a new incarnation",
			setup:      []messages.MetaCommand{createCmd("orders", 3), deleteCmd("orders", 0)},
			cmd:        createCmd("orders", 5),
			wantCode:   messages.ResultOK,
			wantTopic:  ptr(topicAt("orders", 5, 3)),
			wantTopics: []messages.Topic{topicAt("orders", 5, 3)},
		},
		{
			name:       "alter of an absent name is not found",
			cmd:        alterCmd(messages.AlterTopic{Name: "orders", Partitions: 4}),
			wantCode:   messages.ResultNotFound,
			wantTopics: []messages.Topic{},
		},
		{
			name:     "alter grows partitions and sets only the given settings",
			setup:    []messages.MetaCommand{createCmd("orders", 3)},
			cmd:      alterCmd(messages.AlterTopic{Name: "orders", Partitions: 6, MaxInFlightPerPartition: ptr(int64(100))}),
			wantCode: messages.ResultOK,
			wantTopic: &messages.Topic{Name: "orders", Incarnation: 1, Partitions: 6, RetentionMs: 1000,
				MaxInFlightPerPartition: 100, CreatedAt: 42},
			wantTopics: []messages.Topic{{Name: "orders", Incarnation: 1, Partitions: 6, RetentionMs: 1000,
				MaxInFlightPerPartition: 100, CreatedAt: 42}},
		},
		{
			name:     "alter with zero partitions keeps them and sets retention and acked-ahead",
			setup:    []messages.MetaCommand{createCmd("orders", 3)},
			cmd:      alterCmd(messages.AlterTopic{Name: "orders", RetentionMs: ptr(int64(0)), MaxAckedAheadPerPartition: ptr(int64(9))}),
			wantCode: messages.ResultOK,
			wantTopic: &messages.Topic{Name: "orders", Incarnation: 1, Partitions: 3, RetentionMs: 0,
				MaxAckedAheadPerPartition: 9, CreatedAt: 42},
			wantTopics: []messages.Topic{{Name: "orders", Incarnation: 1, Partitions: 3, RetentionMs: 0,
				MaxAckedAheadPerPartition: 9, CreatedAt: 42}},
		},
		{
			name:       "alter to as many partitions is invalid",
			setup:      []messages.MetaCommand{createCmd("orders", 3)},
			cmd:        alterCmd(messages.AlterTopic{Name: "orders", Partitions: 3, RetentionMs: ptr(int64(5))}),
			wantCode:   messages.ResultInvalid,
			wantTopic:  ptr(topicAt("orders", 3, 1)),
			wantTopics: []messages.Topic{topicAt("orders", 3, 1)},
		},
		{
			name:       "alter to fewer partitions is invalid",
			setup:      []messages.MetaCommand{createCmd("orders", 3)},
			cmd:        alterCmd(messages.AlterTopic{Name: "orders", Partitions: 2}),
			wantCode:   messages.ResultInvalid,
			wantTopic:  ptr(topicAt("orders", 3, 1)),
			wantTopics: []messages.Topic{topicAt("orders", 3, 1)},
		},
		{
			name:       "alter to a negative retention is invalid",
			setup:      []messages.MetaCommand{createCmd("orders", 3)},
			cmd:        alterCmd(messages.AlterTopic{Name: "orders", RetentionMs: ptr(int64(-1))}),
			wantCode:   messages.ResultInvalid,
			wantTopic:  ptr(topicAt("orders", 3, 1)),
			wantTopics: []messages.Topic{topicAt("orders", 3, 1)},
		},
		{
			name: "alter appends a schema, compacted",
			setup: []messages.MetaCommand{createCmd("orders", 3),
				alterCmd(messages.AlterTopic{Name: "orders", AddSchema: json.RawMessage(`{"type":"object"}`)})},
			cmd:      alterCmd(messages.AlterTopic{Name: "orders", AddSchema: json.RawMessage(`{ "type" : "string" }`)}),
			wantCode: messages.ResultOK,
			wantTopic: &messages.Topic{Name: "orders", Incarnation: 1, Partitions: 3, RetentionMs: 1000, CreatedAt: 42,
				Schemas: []json.RawMessage{json.RawMessage(`{"type":"object"}`), json.RawMessage(`{"type":"string"}`)}},
			wantTopics: []messages.Topic{{Name: "orders", Incarnation: 1, Partitions: 3, RetentionMs: 1000, CreatedAt: 42,
				Schemas: []json.RawMessage{json.RawMessage(`{"type":"object"}`), json.RawMessage(`{"type":"string"}`)}}},
		},
		{
			name:       "a command naming nothing is invalid",
			cmd:        messages.MetaCommand{Version: messages.CommandVersion},
			wantCode:   messages.ResultInvalid,
			wantTopics: []messages.Topic{},
		},
		{
			name: "a command naming two things is invalid",
			cmd: messages.MetaCommand{Version: messages.CommandVersion,
				CreateTopic: &messages.CreateTopic{Topic: messages.Topic{Name: "a", Partitions: 1}},
				DeleteTopic: &messages.DeleteTopic{Name: "a"}},
			wantCode:   messages.ResultInvalid,
			wantTopics: []messages.Topic{},
		},
		{
			name:       "a command of version 0 is invalid",
			cmd:        messages.MetaCommand{CreateTopic: &messages.CreateTopic{Topic: messages.Topic{Name: "a", Partitions: 1}}},
			wantCode:   messages.ResultInvalid,
			wantTopics: []messages.Topic{},
		},
		{
			name:     "topics list sorted by name",
			setup:    []messages.MetaCommand{createCmd("m", 1), createCmd("z", 1), createCmd("a", 1)},
			cmd:      deleteCmd("z", 0),
			wantCode: messages.ResultOK, wantTopic: ptr(topicAt("z", 1, 2)),
			wantTopics: []messages.Topic{topicAt("a", 1, 3), topicAt("m", 1, 1)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := metaStateAfter(t, tt.setup)
			index := uint64(len(tt.setup) + 1)
			r := s.apply(tt.cmd, index)
			if r.Code != tt.wantCode {
				t.Errorf("code: got %d, want %d", r.Code, tt.wantCode)
			}
			if !reflect.DeepEqual(r.Topic, tt.wantTopic) {
				t.Errorf("result topic:\n got %+v\nwant %+v", r.Topic, tt.wantTopic)
			}
			if got := s.list(); !reflect.DeepEqual(got, tt.wantTopics) {
				t.Errorf("topics after:\n got %+v\nwant %+v", got, tt.wantTopics)
			}
			if s.appliedIndex() != index {
				t.Errorf("applied index: got %d, want %d", s.appliedIndex(), index)
			}
		})
	}
}

func TestMetaStateApplyEntry(t *testing.T) {
	s := newMetaState()
	r, err := s.applyEntry([]byte("not json"), 1)
	if err != nil || r.Code != messages.ResultInvalid {
		t.Errorf("garbage entry: got (%d, %v), want (ResultInvalid, nil)", r.Code, err)
	}
	if s.appliedIndex() != 1 {
		t.Errorf("applied index after garbage: got %d, want 1", s.appliedIndex())
	}
	newer, _ := json.Marshal(messages.MetaCommand{Version: messages.CommandVersion + 1, CreateTopic: &messages.CreateTopic{Topic: messages.Topic{Name: "a", Partitions: 1}}})
	if _, err := s.applyEntry(newer, 2); err == nil || !strings.Contains(err.Error(), "command version") {
		t.Errorf("newer version: got error %v, want a command version error", err)
	}
	ok, _ := json.Marshal(createCmd("a", 1))
	if r, err := s.applyEntry(ok, 3); err != nil || r.Code != messages.ResultOK || r.Topic.Incarnation != 3 {
		t.Errorf("create entry: got (%+v, %v), want OK with incarnation 3", r, err)
	}
}

func TestMetaStateReadsDoNotAlias(t *testing.T) {
	s := newMetaState()
	s.apply(createCmd("orders", 1), 1)
	s.apply(alterCmd(messages.AlterTopic{Name: "orders", AddSchema: json.RawMessage(`1`)}), 2)
	got, _ := s.topic("orders")
	got.Schemas[0] = json.RawMessage(`2`)
	got.Partitions = 99
	again, _ := s.topic("orders")
	if string(again.Schemas[0]) != "1" || again.Partitions != 1 {
		t.Errorf("state after mutating a read copy: got %+v, want schema 1 and 1 partition", again)
	}
}

// metaHistory is a mixed log used by the determinism and snapshot tests.
func metaHistory() []messages.MetaCommand {
	var h []messages.MetaCommand
	for i := range 30 {
		name := string(rune('a' + i%7))
		switch i % 5 {
		case 0, 1:
			h = append(h, createCmd(name, 1+i%4))
		case 2:
			h = append(h, alterCmd(messages.AlterTopic{Name: name, Partitions: 8 + i, AddSchema: json.RawMessage(`{"i": 1}`)}))
		case 3:
			h = append(h, alterCmd(messages.AlterTopic{Name: name, RetentionMs: ptr(int64(i))}))
		case 4:
			h = append(h, deleteCmd(name, 0))
		}
		// Members, interleaved: registrations, heartbeats, status changes
		// (some refused), flags and removals.
		id := fmt.Sprintf("n%d", i%3)
		switch i / 3 % 6 {
		case 0:
			h = append(h, putMemberCmd(id, uint64(1+i%3), ""))
		case 1:
			h = append(h, heartbeatCmd(id), heartbeatCmd("absent"))
		case 2:
			h = append(h, statusCmd(id, messages.MemberDead, messages.MemberAlive, ptr(uint64(i%2))))
		case 3:
			h = append(h, drainingCmd(id, i%2 == 1), leavingCmd(id, true))
		case 4:
			h = append(h, statusCmd(id, messages.MemberAlive, messages.MemberDead, nil), roleCmd(id, messages.RoleNonVoter))
		case 5:
			if i%3 == 1 {
				h = append(h, removeMemberCmd(id))
			}
		}
	}
	return h
}

func TestMetaStateDeterministicSnapshot(t *testing.T) {
	a, restored := replayTwiceAndRestore(t, newMetaState, func(s *metaState, c messages.MetaCommand, i uint64) any { return s.apply(c, i) }, loadMetaState, metaHistory())
	if !reflect.DeepEqual(restored.list(), a.list()) || restored.appliedIndex() != a.appliedIndex() {
		t.Errorf("restored state: got %d topics at %d, want %d at %d", len(restored.list()), restored.appliedIndex(), len(a.list()), a.appliedIndex())
	}
	if len(a.memberList()) == 0 {
		t.Fatalf("history leaves no members: the test would not cover them")
	}
	if got, want := restored.memberList(), a.memberList(); !reflect.DeepEqual(got, want) {
		t.Errorf("restored members:\n got %+v\nwant %+v", got, want)
	}
	// The member indexes keep working after a restore.
	for _, c := range []messages.MetaCommand{putMemberCmd("n9", 99, ""), removeMemberCmd("n0"), heartbeatCmd("n2")} {
		if ra, rr := a.apply(c, 99), restored.apply(c, 99); !reflect.DeepEqual(ra, rr) {
			t.Errorf("member command after restore: got %+v, want %+v", rr, ra)
		}
	}
	if got, want := restored.memberList(), a.memberList(); !reflect.DeepEqual(got, want) {
		t.Errorf("members after restore and apply:\n got %+v\nwant %+v", got, want)
	}
	// The restored state keeps applying like the original.
	next := createCmd("fresh", 2)
	if ra, rr := a.apply(next, 100), restored.apply(next, 100); !reflect.DeepEqual(ra, rr) {
		t.Errorf("apply after restore: got %+v, want %+v", rr, ra)
	}
}

func TestLoadMetaStateRefusesBadSnapshots(t *testing.T) {
	for _, snap := range []string{
		`garbage`,
		`{"format":2,"index":1,"topics":[]}`,
		`{"format":1,"index":1,"topics":[{"name":"a"},{"name":"a"}]}`,
		`{"format":1,"index":1,"topics":[],"members":[{"id":"n1"},{"id":"n1"}]}`,
	} {
		if _, err := loadMetaState(strings.NewReader(snap)); err == nil {
			t.Errorf("loadMetaState(%s): got nil error, want one", snap)
		}
	}
}

func TestMetaStateLookup(t *testing.T) {
	s := newMetaState()
	s.apply(createCmd("b", 1), 1)
	s.apply(createCmd("a", 1), 2)
	s.apply(putMemberCmd("n2", 2, ""), 3)
	s.apply(putMemberCmd("n1", 1, ""), 4)
	tests := []struct {
		query any
		want  any
	}{
		{topicQuery{name: "a"}, topicAnswer{topic: topicAt("a", 1, 2), found: true}},
		{topicQuery{name: "zz"}, topicAnswer{}},
		{topicsQuery{}, []messages.Topic{topicAt("a", 1, 2), topicAt("b", 1, 1)}},
		{memberQuery{id: "n1"}, memberAnswer{member: memberAt("n1", 1, 4), found: true}},
		{memberQuery{id: "n9"}, memberAnswer{}},
		{membersQuery{}, []messages.Member{memberAt("n1", 1, 4), memberAt("n2", 2, 3)}},
		{appliedQuery{}, uint64(4)},
	}
	for _, tt := range tests {
		got, err := s.lookup(tt.query)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("lookup(%#v): got (%+v, %v), want (%+v, nil)", tt.query, got, err, tt.want)
		}
	}
	if _, err := s.lookup(assignmentQuery{}); err == nil {
		t.Errorf("lookup of an assignment query on the metadata shard: got nil error, want one")
	}
}

// Member commands for the tables.

func metaCmd(c messages.MetaCommand) messages.MetaCommand {
	c.Version = messages.CommandVersion
	return c
}

func putMemberCmd(id string, replica uint64, role string) messages.MetaCommand {
	return metaCmd(messages.MetaCommand{PutMember: &messages.PutMember{Member: messages.Member{
		ID: id, ReplicaID: replica, HTTPAddr: "http-" + id, RaftAddr: "raft-" + id, Role: role,
	}}})
}

func heartbeatCmd(id string) messages.MetaCommand {
	return metaCmd(messages.MetaCommand{Heartbeat: &messages.Heartbeat{ID: id}})
}

func statusCmd(id, status, ifStatus string, ifHeartbeats *uint64) messages.MetaCommand {
	return metaCmd(messages.MetaCommand{SetMemberStatus: &messages.SetMemberStatus{
		ID: id, Status: status, IfStatus: ifStatus, IfHeartbeats: ifHeartbeats,
	}})
}

func drainingCmd(id string, on bool) messages.MetaCommand {
	return metaCmd(messages.MetaCommand{SetDraining: &messages.SetDraining{ID: id, Draining: on}})
}

func leavingCmd(id string, on bool) messages.MetaCommand {
	return metaCmd(messages.MetaCommand{SetLeaving: &messages.SetLeaving{ID: id, Leaving: on}})
}

func roleCmd(id, role string) messages.MetaCommand {
	return metaCmd(messages.MetaCommand{SetMemberRole: &messages.SetMemberRole{ID: id, Role: role}})
}

func removeMemberCmd(id string) messages.MetaCommand {
	return metaCmd(messages.MetaCommand{RemoveMember: &messages.RemoveMember{ID: id}})
}

// memberAt is the record putMemberCmd(id, replica, "") makes at index on a
// fresh id, edited by the options.
func memberAt(id string, replica, index uint64, edit ...func(*messages.Member)) messages.Member {
	m := messages.Member{ID: id, ReplicaID: replica, HTTPAddr: "http-" + id, RaftAddr: "raft-" + id,
		Status: messages.MemberAlive, Role: messages.RoleVoter, Registered: index}
	for _, e := range edit {
		e(&m)
	}
	return m
}

func withHeartbeats(n uint64) func(*messages.Member) {
	return func(m *messages.Member) { m.Heartbeats = n }
}
func withStatus(s string) func(*messages.Member) {
	return func(m *messages.Member) { m.Status = s }
}
func withDraining(m *messages.Member) { m.Draining = true }
func withLeaving(m *messages.Member)  { m.Leaving = true }
func withRole(r string) func(*messages.Member) {
	return func(m *messages.Member) { m.Role = r }
}

func TestMetaStateMembers(t *testing.T) {
	n1 := func(index uint64, edit ...func(*messages.Member)) *messages.Member {
		return ptr(memberAt("n1", 1, index, edit...))
	}
	tests := []struct {
		name string
		// setup is applied at indexes 1, 2, ...; the command under test at
		// the next index. Every setup step must answer OK.
		setup      []messages.MetaCommand
		cmd        messages.MetaCommand
		wantCode   messages.ResultCode
		wantMember *messages.Member
		// wantMembers is the whole membership afterwards, sorted by id.
		wantMembers []messages.Member
	}{
		// PutMember.
		{
			name:        "put registers a new member alive as a voter at the entry index",
			cmd:         putMemberCmd("n1", 1, ""),
			wantCode:    messages.ResultOK,
			wantMember:  n1(1),
			wantMembers: []messages.Member{*n1(1)},
		},
		{
			name:        "put registers a non-voter",
			cmd:         putMemberCmd("n1", 1, messages.RoleNonVoter),
			wantCode:    messages.ResultOK,
			wantMember:  n1(1, withRole(messages.RoleNonVoter)),
			wantMembers: []messages.Member{*n1(1, withRole(messages.RoleNonVoter))},
		},
		{
			name: "put ignores the status, flags and counters it is given",
			cmd: metaCmd(messages.MetaCommand{PutMember: &messages.PutMember{Member: messages.Member{
				ID: "n1", ReplicaID: 1, HTTPAddr: "http-n1", RaftAddr: "raft-n1", Status: messages.MemberDead,
				Draining: true, Leaving: true, Heartbeats: 40, Registered: 99,
			}}}),
			wantCode:    messages.ResultOK,
			wantMember:  n1(1),
			wantMembers: []messages.Member{*n1(1)},
		},
		{
			// rule D1: the drain flag survives a new registration.
			name: "re-registration keeps draining, clears leaving, revives, bumps the counter and updates addresses",
			setup: []messages.MetaCommand{putMemberCmd("n1", 1, ""), drainingCmd("n1", true), leavingCmd("n1", true),
				statusCmd("n1", messages.MemberDead, "", nil)},
			cmd: metaCmd(messages.MetaCommand{PutMember: &messages.PutMember{Member: messages.Member{
				ID: "n1", ReplicaID: 7, HTTPAddr: "http-new", RaftAddr: "raft-new"}}}),
			wantCode: messages.ResultOK,
			wantMember: &messages.Member{ID: "n1", ReplicaID: 7, HTTPAddr: "http-new", RaftAddr: "raft-new",
				Status: messages.MemberAlive, Draining: true, Role: messages.RoleVoter, Heartbeats: 1, Registered: 5},
			wantMembers: []messages.Member{{ID: "n1", ReplicaID: 7, HTTPAddr: "http-new", RaftAddr: "raft-new",
				Status: messages.MemberAlive, Draining: true, Role: messages.RoleVoter, Heartbeats: 1, Registered: 5}},
		},
		{
			name:        "re-registration without a role keeps the role",
			setup:       []messages.MetaCommand{putMemberCmd("n1", 1, messages.RoleNonVoter)},
			cmd:         putMemberCmd("n1", 1, ""),
			wantCode:    messages.ResultOK,
			wantMember:  n1(2, withRole(messages.RoleNonVoter), withHeartbeats(1)),
			wantMembers: []messages.Member{*n1(2, withRole(messages.RoleNonVoter), withHeartbeats(1))},
		},
		{
			name:        "re-registration with a role sets it",
			setup:       []messages.MetaCommand{putMemberCmd("n1", 1, messages.RoleNonVoter)},
			cmd:         putMemberCmd("n1", 1, messages.RoleVoter),
			wantCode:    messages.ResultOK,
			wantMember:  n1(2, withHeartbeats(1)),
			wantMembers: []messages.Member{*n1(2, withHeartbeats(1))},
		},
		{
			name:        "put of another member's replica id answers exists with that member",
			setup:       []messages.MetaCommand{putMemberCmd("n1", 1, "")},
			cmd:         putMemberCmd("n2", 1, ""),
			wantCode:    messages.ResultExists,
			wantMember:  n1(1),
			wantMembers: []messages.Member{*n1(1)},
		},
		{
			name:        "put without an id is invalid",
			cmd:         putMemberCmd("", 1, ""),
			wantCode:    messages.ResultInvalid,
			wantMembers: []messages.Member{},
		},
		{
			name:        "put without a replica id is invalid",
			cmd:         putMemberCmd("n1", 0, ""),
			wantCode:    messages.ResultInvalid,
			wantMembers: []messages.Member{},
		},
		{
			name:        "put with an unknown role is invalid",
			cmd:         putMemberCmd("n1", 1, "observer"),
			wantCode:    messages.ResultInvalid,
			wantMembers: []messages.Member{},
		},
		{
			name:        "members list sorted by id",
			setup:       []messages.MetaCommand{putMemberCmd("n3", 3, ""), putMemberCmd("n1", 1, "")},
			cmd:         putMemberCmd("n2", 2, ""),
			wantCode:    messages.ResultOK,
			wantMember:  ptr(memberAt("n2", 2, 3)),
			wantMembers: []messages.Member{memberAt("n1", 1, 2), memberAt("n2", 2, 3), memberAt("n3", 3, 1)},
		},
		// Heartbeat.
		{
			name:        "heartbeat bumps the counter only",
			setup:       []messages.MetaCommand{putMemberCmd("n1", 1, ""), statusCmd("n1", messages.MemberDead, "", nil), heartbeatCmd("n1")},
			cmd:         heartbeatCmd("n1"),
			wantCode:    messages.ResultOK,
			wantMember:  n1(1, withHeartbeats(2), withStatus(messages.MemberDead)),
			wantMembers: []messages.Member{*n1(1, withHeartbeats(2), withStatus(messages.MemberDead))},
		},
		{
			name:        "heartbeat of an unknown member is not found",
			setup:       []messages.MetaCommand{putMemberCmd("n1", 1, "")},
			cmd:         heartbeatCmd("n2"),
			wantCode:    messages.ResultNotFound,
			wantMembers: []messages.Member{*n1(1)},
		},
		// SetMemberStatus.
		{
			name:        "status compare-and-set marks dead",
			setup:       []messages.MetaCommand{putMemberCmd("n1", 1, "")},
			cmd:         statusCmd("n1", messages.MemberDead, messages.MemberAlive, nil),
			wantCode:    messages.ResultOK,
			wantMember:  n1(1, withStatus(messages.MemberDead)),
			wantMembers: []messages.Member{*n1(1, withStatus(messages.MemberDead))},
		},
		{
			name:        "status compare-and-set marks alive again",
			setup:       []messages.MetaCommand{putMemberCmd("n1", 1, ""), statusCmd("n1", messages.MemberDead, "", nil)},
			cmd:         statusCmd("n1", messages.MemberAlive, messages.MemberDead, nil),
			wantCode:    messages.ResultOK,
			wantMember:  n1(1),
			wantMembers: []messages.Member{*n1(1)},
		},
		{
			name:        "status with a stale expected status is refused with the current record",
			setup:       []messages.MetaCommand{putMemberCmd("n1", 1, "")},
			cmd:         statusCmd("n1", messages.MemberAlive, messages.MemberDead, nil),
			wantCode:    messages.ResultRefused,
			wantMember:  n1(1),
			wantMembers: []messages.Member{*n1(1)},
		},
		{
			name:        "mark dead after a heartbeat the leader did not see is refused",
			setup:       []messages.MetaCommand{putMemberCmd("n1", 1, ""), heartbeatCmd("n1")},
			cmd:         statusCmd("n1", messages.MemberDead, messages.MemberAlive, ptr(uint64(0))),
			wantCode:    messages.ResultRefused,
			wantMember:  n1(1, withHeartbeats(1)),
			wantMembers: []messages.Member{*n1(1, withHeartbeats(1))},
		},
		{
			name:        "mark dead at the counter the leader saw",
			setup:       []messages.MetaCommand{putMemberCmd("n1", 1, ""), heartbeatCmd("n1")},
			cmd:         statusCmd("n1", messages.MemberDead, messages.MemberAlive, ptr(uint64(1))),
			wantCode:    messages.ResultOK,
			wantMember:  n1(1, withHeartbeats(1), withStatus(messages.MemberDead)),
			wantMembers: []messages.Member{*n1(1, withHeartbeats(1), withStatus(messages.MemberDead))},
		},
		{
			name:        "status without an expected status sets it unconditionally",
			setup:       []messages.MetaCommand{putMemberCmd("n1", 1, "")},
			cmd:         statusCmd("n1", messages.MemberDead, "", nil),
			wantCode:    messages.ResultOK,
			wantMember:  n1(1, withStatus(messages.MemberDead)),
			wantMembers: []messages.Member{*n1(1, withStatus(messages.MemberDead))},
		},
		{
			name:        "status of an unknown member is not found",
			cmd:         statusCmd("n1", messages.MemberDead, messages.MemberAlive, nil),
			wantCode:    messages.ResultNotFound,
			wantMembers: []messages.Member{},
		},
		{
			name:        "an unknown status is invalid",
			setup:       []messages.MetaCommand{putMemberCmd("n1", 1, "")},
			cmd:         statusCmd("n1", "zombie", "", nil),
			wantCode:    messages.ResultInvalid,
			wantMembers: []messages.Member{*n1(1)},
		},
		{
			name:        "an unknown expected status is invalid",
			setup:       []messages.MetaCommand{putMemberCmd("n1", 1, "")},
			cmd:         statusCmd("n1", messages.MemberDead, "zombie", nil),
			wantCode:    messages.ResultInvalid,
			wantMembers: []messages.Member{*n1(1)},
		},
		// SetDraining, SetLeaving, SetMemberRole.
		{
			name:        "draining set",
			setup:       []messages.MetaCommand{putMemberCmd("n1", 1, "")},
			cmd:         drainingCmd("n1", true),
			wantCode:    messages.ResultOK,
			wantMember:  n1(1, withDraining),
			wantMembers: []messages.Member{*n1(1, withDraining)},
		},
		{
			name:        "draining cleared",
			setup:       []messages.MetaCommand{putMemberCmd("n1", 1, ""), drainingCmd("n1", true)},
			cmd:         drainingCmd("n1", false),
			wantCode:    messages.ResultOK,
			wantMember:  n1(1),
			wantMembers: []messages.Member{*n1(1)},
		},
		{
			name:        "draining of an unknown member is not found",
			cmd:         drainingCmd("n1", true),
			wantCode:    messages.ResultNotFound,
			wantMembers: []messages.Member{},
		},
		{
			name:        "leaving set",
			setup:       []messages.MetaCommand{putMemberCmd("n1", 1, "")},
			cmd:         leavingCmd("n1", true),
			wantCode:    messages.ResultOK,
			wantMember:  n1(1, withLeaving),
			wantMembers: []messages.Member{*n1(1, withLeaving)},
		},
		{
			name:        "leaving cleared",
			setup:       []messages.MetaCommand{putMemberCmd("n1", 1, ""), leavingCmd("n1", true)},
			cmd:         leavingCmd("n1", false),
			wantCode:    messages.ResultOK,
			wantMember:  n1(1),
			wantMembers: []messages.Member{*n1(1)},
		},
		{
			name:        "leaving of an unknown member is not found",
			cmd:         leavingCmd("n1", true),
			wantCode:    messages.ResultNotFound,
			wantMembers: []messages.Member{},
		},
		{
			name:        "role promotes a non-voter",
			setup:       []messages.MetaCommand{putMemberCmd("n1", 1, messages.RoleNonVoter)},
			cmd:         roleCmd("n1", messages.RoleVoter),
			wantCode:    messages.ResultOK,
			wantMember:  n1(1),
			wantMembers: []messages.Member{*n1(1)},
		},
		{
			name:        "an unknown role is invalid",
			setup:       []messages.MetaCommand{putMemberCmd("n1", 1, "")},
			cmd:         roleCmd("n1", "observer"),
			wantCode:    messages.ResultInvalid,
			wantMembers: []messages.Member{*n1(1)},
		},
		{
			name:        "role of an unknown member is not found",
			cmd:         roleCmd("n1", messages.RoleVoter),
			wantCode:    messages.ResultNotFound,
			wantMembers: []messages.Member{},
		},
		// RemoveMember.
		{
			name:        "remove returns the removed record",
			setup:       []messages.MetaCommand{putMemberCmd("n1", 1, ""), putMemberCmd("n2", 2, ""), drainingCmd("n1", true)},
			cmd:         removeMemberCmd("n1"),
			wantCode:    messages.ResultOK,
			wantMember:  n1(1, withDraining),
			wantMembers: []messages.Member{memberAt("n2", 2, 2)},
		},
		{
			name:        "remove of an unknown member is not found",
			setup:       []messages.MetaCommand{putMemberCmd("n1", 1, "")},
			cmd:         removeMemberCmd("n2"),
			wantCode:    messages.ResultNotFound,
			wantMembers: []messages.Member{*n1(1)},
		},
		{
			name:        "a removed member registers afresh, not draining",
			setup:       []messages.MetaCommand{putMemberCmd("n1", 1, ""), drainingCmd("n1", true), removeMemberCmd("n1")},
			cmd:         putMemberCmd("n1", 1, ""),
			wantCode:    messages.ResultOK,
			wantMember:  n1(4),
			wantMembers: []messages.Member{*n1(4)},
		},
		{
			name: "a command naming a topic and a member is invalid",
			cmd: metaCmd(messages.MetaCommand{CreateTopic: &messages.CreateTopic{Topic: messages.Topic{Name: "a", Partitions: 1}},
				Heartbeat: &messages.Heartbeat{ID: "n1"}}),
			wantCode:    messages.ResultInvalid,
			wantMembers: []messages.Member{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := metaStateAfter(t, tt.setup)
			index := uint64(len(tt.setup) + 1)
			r := s.apply(tt.cmd, index)
			if r.Code != tt.wantCode {
				t.Errorf("code: got %d, want %d", r.Code, tt.wantCode)
			}
			if !reflect.DeepEqual(r.Member, tt.wantMember) {
				t.Errorf("result member:\n got %+v\nwant %+v", r.Member, tt.wantMember)
			}
			if r.Topic != nil {
				t.Errorf("result topic: got %+v, want none", r.Topic)
			}
			if got := s.memberList(); !reflect.DeepEqual(got, tt.wantMembers) {
				t.Errorf("members after:\n got %+v\nwant %+v", got, tt.wantMembers)
			}
			if s.appliedIndex() != index {
				t.Errorf("applied index: got %d, want %d", s.appliedIndex(), index)
			}
		})
	}
}

func TestMetaStateMemberReadsDoNotAlias(t *testing.T) {
	s := newMetaState()
	r := s.apply(putMemberCmd("n1", 1, ""), 1)
	r.Member.Draining = true
	list := s.memberList()
	list[0].Status = messages.MemberDead
	if got, _ := s.member("n1"); got != memberAt("n1", 1, 1) {
		t.Errorf("member after mutating a result and a listing: got %+v, want %+v", got, memberAt("n1", 1, 1))
	}
}

// A snapshot written before members existed has no "members" key; it must
// load, and a state without members must write the same bytes as then.
func TestMetaSnapshotWithoutMembers(t *testing.T) {
	old := `{"format":1,"index":3,"topics":[{"name":"a","incarnation":1,"partitions":1,"retention_ms":1000,"visibility_timeout_ms":0,"max_in_flight_per_partition":0,"max_acked_ahead_per_partition":0,"created_at":42}]}` + "\n"
	s, err := loadMetaState(strings.NewReader(old))
	if err != nil {
		t.Fatalf("load of a snapshot without members: %v", err)
	}
	if got := s.memberList(); len(got) != 0 {
		t.Errorf("members: got %+v, want none", got)
	}
	var b bytes.Buffer
	if err := s.save(&b); err != nil {
		t.Fatal(err)
	}
	if b.String() != old {
		t.Errorf("snapshot without members:\n got %s\nwant %s", b.String(), old)
	}
	if r := s.apply(putMemberCmd("n1", 1, ""), 4); r.Code != messages.ResultOK {
		t.Errorf("put member after loading: got code %d, want OK", r.Code)
	}
}

// The topics version moves with each command that may change a topic
// record and with a restore, and with nothing else: the partitions
// supervisor looks for new topics when Any moves and makes a whole pass
// over a node's partitions when Existing moves. The heartbeats that move
// the metadata shard a few times a second must not move either, and a
// create of a topic without a parent must not move Existing.
func TestTheTopicsVersionMovesOnlyWithTopicRecords(t *testing.T) {
	s := newMetaState()
	child := createCmd("replay", 1)
	child.Version = messages.FanoutCommandVersion
	child.CreateTopic.Topic.Parent = "orders"
	for i, step := range []struct {
		cmd             messages.MetaCommand
		moves, existing bool
	}{
		{putMemberCmd("n1", 1, ""), false, false},
		{createCmd("orders", 1), true, false},
		{createCmd("audit", 1), true, false},
		{heartbeatCmd("n1"), false, false},
		{createUserCmd("alice", "h"), false, false},
		{alterCmd(messages.AlterTopic{Name: "orders", RetentionMs: ptr(int64(1))}), true, true},
		{attachCmd("orders", "audit", 0), true, true},
		{heartbeatCmd("n1"), false, false},
		{detachCmd("orders", "audit"), true, true},
		{child, true, true},
		{deleteCmd("audit", 0), true, true},
		{putMemberCmd("n2", 2, ""), false, false},
	} {
		before, index := s.topicsAt, uint64(i+1)
		existing := s.existingAt
		if r := s.apply(step.cmd, index); r.Code != messages.ResultOK {
			t.Fatalf("step %d: got result %+v, want OK", i, r)
		}
		if moved := s.topicsAt != before; moved != step.moves || moved && s.topicsAt != index {
			t.Fatalf("step %d: topics version %d -> %d at index %d; want moved %v, to the index", i, before, s.topicsAt, index, step.moves)
		}
		if moved := s.existingAt != existing; moved != step.existing || moved && s.existingAt != index {
			t.Fatalf("step %d: existing topics version %d -> %d at index %d; want moved %v, to the index", i, existing, s.existingAt, index, step.existing)
		}
	}
	restored := savedAndLoaded(t, s)
	if restored.topicsAt != s.index || restored.existingAt != s.index {
		t.Fatalf("restored: topics versions %d and %d, want the snapshot's index %d for both (anything may have changed)", restored.topicsAt, restored.existingAt, s.index)
	}
}

// The parents index (a planning round's check of each partition) names
// every current topic's incarnation with its parent, and nothing else,
// through creates, links, deletes, a recreate and a restore.
func TestTheParentsIndexFollowsTheTopicRecords(t *testing.T) {
	s := newMetaState()
	check := func(step string, s *metaState) {
		t.Helper()
		if len(s.parents) != len(s.topics) {
			t.Fatalf("%s: %d entries in the parents index, want one per topic, %d", step, len(s.parents), len(s.topics))
		}
		for _, tp := range s.topics {
			if parent, ok := s.parents[tp.Incarnation]; !ok || parent != tp.Parent {
				t.Fatalf("%s: topic %s (incarnation %d): index has %q (%v), want %q", step, tp.Name, tp.Incarnation, parent, ok, tp.Parent)
			}
		}
	}
	child := createCmd("replay", 1)
	child.Version = messages.FanoutCommandVersion
	child.CreateTopic.Topic.Parent = "orders"
	for i, step := range []struct {
		name string
		cmd  messages.MetaCommand
	}{
		{"create orders", createCmd("orders", 1)},
		{"create audit", createCmd("audit", 1)},
		{"attach audit", attachCmd("orders", "audit", 0)},
		{"create replay under orders", child},
		{"detach audit", detachCmd("orders", "audit")},
		{"alter orders", alterCmd(messages.AlterTopic{Name: "orders", RetentionMs: ptr(int64(1))})},
		{"delete audit", deleteCmd("audit", 0)},
		{"recreate audit", createCmd("audit", 2)},
		{"delete orders", deleteCmd("orders", 0)},
	} {
		if r := s.apply(step.cmd, uint64(i+1)); r.Code != messages.ResultOK {
			t.Fatalf("%s: got result %+v, want OK", step.name, r)
		}
		check(step.name, s)
	}
	if _, ok := s.parents[2]; ok {
		t.Fatal("the deleted audit's incarnation 2 is still in the index")
	}
	if parent := s.parents[s.topics["replay"].Incarnation]; parent != "" {
		t.Fatalf("replay after its parent's delete: index has parent %q, want none", parent)
	}
	check("restored", savedAndLoaded(t, s))
}

// savedAndLoaded is s through a snapshot: saved, then loaded as a replica
// restoring it would.
func savedAndLoaded(t *testing.T, s *metaState) *metaState {
	t.Helper()
	var buf bytes.Buffer
	if err := s.save(&buf); err != nil {
		t.Fatal(err)
	}
	loaded, err := loadMetaState(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return loaded
}

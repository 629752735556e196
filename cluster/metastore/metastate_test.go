package metastore

import (
	"bytes"
	"encoding/json"
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
			s := newMetaState()
			for i, c := range tt.setup {
				if r := s.apply(c, uint64(i+1)); r.Code != messages.ResultOK {
					t.Fatalf("setup step %d: got code %d, want OK", i+1, r.Code)
				}
			}
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
	}
	return h
}

func TestMetaStateDeterministicSnapshot(t *testing.T) {
	a, b := newMetaState(), newMetaState()
	for i, c := range metaHistory() {
		ra, rb := a.apply(c, uint64(i+1)), b.apply(c, uint64(i+1))
		if !reflect.DeepEqual(ra, rb) {
			t.Fatalf("entry %d: results differ: %+v vs %+v", i+1, ra, rb)
		}
	}
	var sa, sb bytes.Buffer
	if err := a.save(&sa); err != nil {
		t.Fatal(err)
	}
	if err := b.save(&sb); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sa.Bytes(), sb.Bytes()) {
		t.Fatalf("snapshots differ:\n%s\n%s", sa.Bytes(), sb.Bytes())
	}
	restored, err := loadMetaState(bytes.NewReader(sa.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var sr bytes.Buffer
	if err := restored.save(&sr); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sa.Bytes(), sr.Bytes()) {
		t.Errorf("snapshot of a restored state:\n got %s\nwant %s", sr.Bytes(), sa.Bytes())
	}
	if !reflect.DeepEqual(restored.list(), a.list()) || restored.appliedIndex() != a.appliedIndex() {
		t.Errorf("restored state: got %d topics at %d, want %d at %d", len(restored.list()), restored.appliedIndex(), len(a.list()), a.appliedIndex())
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
	tests := []struct {
		query any
		want  any
	}{
		{topicQuery{name: "a"}, topicAnswer{topic: topicAt("a", 1, 2), found: true}},
		{topicQuery{name: "zz"}, topicAnswer{}},
		{topicsQuery{}, []messages.Topic{topicAt("a", 1, 2), topicAt("b", 1, 1)}},
		{appliedQuery{}, uint64(2)},
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

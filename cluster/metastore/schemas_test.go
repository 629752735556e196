package metastore

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/naradmq/narad/messages"
)

// Issue 48 item 6: a topic's record keeps the newest MaxSchemaVersions
// schemas, however many alters registered one: N+k registrations keep
// the last N in order, the version number still counts all N+k, and a
// snapshot taken and loaded keeps the same. Before the bound every alter
// appended, and the record held all N+k.
func TestIssue48SchemaHistoryKeepsTheNewestVersions(t *testing.T) {
	const extra = 5
	s := newMetaState()
	// A new cluster of members that all trim.
	if r := s.apply(registerReading("n1", 1, messages.ClusterVersionBoundedSchemas), 1); r.Code != messages.ResultOK {
		t.Fatalf("register: got %v, want OK", r.Code)
	}
	create := createCmd("orders", 3)
	create.CreateTopic.Topic.Schemas = []json.RawMessage{json.RawMessage(`{"title":"v1"}`)}
	if r := s.apply(create, 2); r.Code != messages.ResultOK {
		t.Fatalf("create: got %v, want OK", r.Code)
	}
	registered := MaxSchemaVersions + extra
	for v := 2; v <= registered; v++ {
		a := messages.AlterTopic{Name: "orders", AddSchema: json.RawMessage(fmt.Sprintf(`{"title":"v%d"}`, v))}
		if r := s.apply(alterCmd(a), uint64(v+1)); r.Code != messages.ResultOK {
			t.Fatalf("alter %d: got %v, want OK", v, r.Code)
		}
	}
	check := func(what string, got messages.Topic) {
		t.Helper()
		if len(got.Schemas) != MaxSchemaVersions {
			t.Fatalf("%s: got %d schemas, want %d", what, len(got.Schemas), MaxSchemaVersions)
		}
		for i, doc := range got.Schemas {
			want := fmt.Sprintf(`{"title":"v%d"}`, extra+1+i)
			if string(doc) != want {
				t.Errorf("%s: schema %d got %s, want %s", what, i, doc, want)
			}
		}
		if got.SchemasDropped != extra || got.SchemaVersion() != registered {
			t.Errorf("%s: got %d dropped and version %d, want %d and %d", what, got.SchemasDropped, got.SchemaVersion(), extra, registered)
		}
	}
	got, _ := s.topic("orders")
	check("after the alters", got)

	got, _ = savedAndLoaded(t, s).topic("orders")
	check("after a snapshot", got)
}

// Until every member trims (the cluster version), no replica does: a
// replica of an older binary keeps every schema, and the replicas' states
// must stay the same.
func TestSchemaHistoryIsKeptWholeUntilTheClusterVersionBoundsIt(t *testing.T) {
	s := metaStateAfter(t, []messages.MetaCommand{
		registerReading("n1", 1, messages.ClusterVersionBoundedSchemas),
		registerReading("n2", 2, messages.ClusterVersionOrigins),
		createCmd("orders", 3),
	})
	alter := func(v int) {
		t.Helper()
		a := messages.AlterTopic{Name: "orders", AddSchema: json.RawMessage(fmt.Sprintf(`{"title":"v%d"}`, v))}
		if r := s.apply(alterCmd(a), uint64(10+v)); r.Code != messages.ResultOK {
			t.Fatalf("alter %d: got %v, want OK", v, r.Code)
		}
	}
	for v := 1; v <= MaxSchemaVersions+2; v++ {
		alter(v)
	}
	if got, _ := s.topic("orders"); len(got.Schemas) != MaxSchemaVersions+2 {
		t.Fatalf("with a member that keeps them all: got %d schemas, want %d", len(got.Schemas), MaxSchemaVersions+2)
	}
	s.apply(heartbeatReading("n2", messages.ClusterVersionBoundedSchemas), 100)
	if r := s.apply(setVersionCmd(messages.ClusterVersionBoundedSchemas), 101); r.Code != messages.ResultOK {
		t.Fatalf("finalize: got %v %q, want OK", r.Code, r.Reason)
	}
	alter(MaxSchemaVersions + 3)
	if got, _ := s.topic("orders"); len(got.Schemas) != MaxSchemaVersions || got.SchemaVersion() != MaxSchemaVersions+3 {
		t.Errorf("after the finalize: got %d schemas, version %d, want %d and %d", len(got.Schemas), got.SchemaVersion(), MaxSchemaVersions, MaxSchemaVersions+3)
	}
}

package metastore

import (
	"bytes"
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
	create := createCmd("orders", 3)
	create.CreateTopic.Topic.Schemas = []json.RawMessage{json.RawMessage(`{"title":"v1"}`)}
	if r := s.apply(create, 1); r.Code != messages.ResultOK {
		t.Fatalf("create: got %v, want OK", r.Code)
	}
	registered := MaxSchemaVersions + extra
	for v := 2; v <= registered; v++ {
		a := messages.AlterTopic{Name: "orders", AddSchema: json.RawMessage(fmt.Sprintf(`{"title":"v%d"}`, v))}
		if r := s.apply(alterCmd(a), uint64(v)); r.Code != messages.ResultOK {
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

	var snap bytes.Buffer
	if err := s.save(&snap); err != nil {
		t.Fatal(err)
	}
	loaded, err := loadMetaState(&snap)
	if err != nil {
		t.Fatal(err)
	}
	got, _ = loaded.topic("orders")
	check("after a snapshot", got)
}

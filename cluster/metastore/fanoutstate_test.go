package metastore

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/naradmq/narad/messages"
)

func attachCmd(parent, child string, delayMs int64) messages.MetaCommand {
	return messages.MetaCommand{Version: messages.FanoutCommandVersion, AttachChild: &messages.AttachChild{Parent: parent, Child: child, DelayMs: delayMs}}
}

func detachCmd(parent, child string) messages.MetaCommand {
	return messages.MetaCommand{Version: messages.FanoutCommandVersion, DetachChild: &messages.DetachChild{Parent: parent, Child: child}}
}

// fanTopic is a topic for the fan-out tables: retention 2 h, so a delay up
// to 1 h fits it, and the given schemas.
func fanTopic(name string, schemas ...string) messages.MetaCommand {
	t := messages.Topic{Name: name, Partitions: 3, RetentionMs: 7_200_000, CreatedAt: 42}
	for _, s := range schemas {
		t.Schemas = append(t.Schemas, json.RawMessage(s))
	}
	return messages.MetaCommand{Version: messages.CommandVersion, CreateTopic: &messages.CreateTopic{Topic: t}}
}

// childCreate creates name as a child of parent in one entry.
func childCreate(name, parent string, delayMs int64) messages.MetaCommand {
	c := fanTopic(name)
	c.CreateTopic.Topic.Parent, c.CreateTopic.Topic.FanoutDelayMs = parent, delayMs
	return c
}

// run applies cmds at indexes 1, 2, ... and returns the state and the last
// command's result.
func run(t *testing.T, cmds ...messages.MetaCommand) (*metaState, messages.MetaResult) {
	t.Helper()
	s := newMetaState()
	var res messages.MetaResult
	for i, c := range cmds {
		res = s.apply(c, uint64(i+1))
	}
	return s, res
}

func TestFanoutRefusals(t *testing.T) {
	links := func(n int) []messages.MetaCommand {
		cmds := []messages.MetaCommand{fanTopic("p")}
		for i := range n {
			name := "c" + string(rune('a'+i/26)) + string(rune('a'+i%26))
			cmds = append(cmds, fanTopic(name), attachCmd("p", name, 0))
		}
		return cmds
	}
	tests := []struct {
		name     string
		cmds     []messages.MetaCommand
		wantCode messages.ResultCode
		// wantReason is a part of the reason the client reads.
		wantReason string
	}{
		{"parent missing", []messages.MetaCommand{fanTopic("c"), attachCmd("p", "c", 0)}, messages.ResultNotFound, "parent topic not found"},
		{"child missing", []messages.MetaCommand{fanTopic("p"), attachCmd("p", "c", 0)}, messages.ResultNotFound, "child topic not found"},
		{"self attach", []messages.MetaCommand{fanTopic("p"), attachCmd("p", "p", 0)}, messages.ResultInvalid, "its own child"},
		{"negative delay", []messages.MetaCommand{fanTopic("p"), fanTopic("c"), attachCmd("p", "c", -1)}, messages.ResultInvalid, "delay_ms must be between"},
		{"delay the parent's retention cannot buffer", []messages.MetaCommand{fanTopic("p"), fanTopic("c"), attachCmd("p", "c", 3_600_001)}, messages.ResultInvalid, "delay too long"},
		{"duplicate attach", []messages.MetaCommand{fanTopic("p"), fanTopic("c"), attachCmd("p", "c", 0), attachCmd("p", "c", 0)}, messages.ResultConflict, "already attached"},
		{"second parent", []messages.MetaCommand{fanTopic("p"), fanTopic("q"), fanTopic("c"), attachCmd("p", "c", 0), attachCmd("q", "c", 0)}, messages.ResultConflict, "already has parent p"},
		{"child of a child", []messages.MetaCommand{fanTopic("p"), fanTopic("c"), fanTopic("g"), attachCmd("p", "c", 0), attachCmd("c", "g", 0)}, messages.ResultConflict, "is itself a child"},
		{"parent as child", []messages.MetaCommand{fanTopic("p"), fanTopic("c"), fanTopic("q"), attachCmd("p", "c", 0), attachCmd("q", "p", 0)}, messages.ResultConflict, "is a parent"},
		{"child limit", append(links(messages.MaxChildren), fanTopic("extra"), attachCmd("p", "extra", 0)), messages.ResultConflict, "limit of 108"},
		{"child schema the parent does not have", []messages.MetaCommand{fanTopic("p"), fanTopic("c", `{"type":"object"}`), attachCmd("p", "c", 0)}, messages.ResultConflict, "schema mismatch"},
		{"child schema other than the parent's latest", []messages.MetaCommand{fanTopic("p", `{"type":"object"}`, `{"type":"object","properties":{"a":{}}}`), fanTopic("c", `{"type":"object"}`), attachCmd("p", "c", 0)}, messages.ResultConflict, "schema mismatch"},
		{"create under a missing parent", []messages.MetaCommand{childCreate("c", "p", 0)}, messages.ResultNotFound, "parent topic not found"},
		{"create under a child", []messages.MetaCommand{fanTopic("p"), childCreate("c", "p", 0), childCreate("g", "c", 0)}, messages.ResultConflict, "is itself a child"},
		{"create with a delay too long", []messages.MetaCommand{fanTopic("p"), childCreate("c", "p", 3_600_001)}, messages.ResultInvalid, "delay too long"},
		{"create with a delay and no parent", []messages.MetaCommand{func() messages.MetaCommand {
			c := fanTopic("c")
			c.CreateTopic.Topic.FanoutDelayMs = 5
			return c
		}()}, messages.ResultInvalid, "needs parent"},
		{"detach of a child not attached", []messages.MetaCommand{fanTopic("p"), fanTopic("c"), detachCmd("p", "c")}, messages.ResultNotFound, "not attached"},
		{"detach from a missing parent", []messages.MetaCommand{detachCmd("p", "c")}, messages.ResultNotFound, "topic not found"},
		{"alter retention below a delay child's buffering", []messages.MetaCommand{fanTopic("p"), childCreate("c", "p", 3_600_000),
			alterCmd(messages.AlterTopic{Name: "p", RetentionMs: ptr[int64](7_199_999)})}, messages.ResultInvalid, "retention too short for delay child c: retention_ms must be 0 or at least 7200000"},
		{"alter the schema of an attached child", []messages.MetaCommand{fanTopic("p"), childCreate("c", "p", 0),
			alterCmd(messages.AlterTopic{Name: "c", AddSchema: json.RawMessage(`{"type":"object"}`)})}, messages.ResultConflict, "cannot change"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, res := run(t, tt.cmds...)
			if res.Code != tt.wantCode || !strings.Contains(res.Reason, tt.wantReason) {
				t.Fatalf("got code %d reason %q, want code %d reason containing %q", res.Code, res.Reason, tt.wantCode, tt.wantReason)
			}
			// A refusal changes nothing: the same history without the
			// refused command gives the same state.
			before, _ := run(t, tt.cmds[:len(tt.cmds)-1]...)
			if got, want := s.list(), before.list(); !reflect.DeepEqual(got, want) {
				t.Fatalf("refused command changed the state:\ngot  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestFanoutAccepts(t *testing.T) {
	tests := []struct {
		name string
		cmds []messages.MetaCommand
	}{
		{"a delay the parent keeps long enough", []messages.MetaCommand{fanTopic("p"), fanTopic("c"), attachCmd("p", "c", 3_600_000)}},
		{"any delay under a parent that keeps records forever", []messages.MetaCommand{func() messages.MetaCommand {
			c := fanTopic("p")
			c.CreateTopic.Topic.RetentionMs = 0
			return c
		}(), fanTopic("c"), attachCmd("p", "c", 31_536_000_000)}},
		{"a child without a schema under a parent with one", []messages.MetaCommand{fanTopic("p", `{"type":"object"}`), fanTopic("c"), attachCmd("p", "c", 0)}},
		{"a child with the parent's latest schema, spaced differently", []messages.MetaCommand{fanTopic("p", `{"type":"object"}`), fanTopic("c", `{ "type": "object" }`), attachCmd("p", "c", 0)}},
		{"the schema of a parent may change", []messages.MetaCommand{fanTopic("p"), childCreate("c", "p", 0),
			alterCmd(messages.AlterTopic{Name: "p", AddSchema: json.RawMessage(`{"type":"object"}`)})}},
		{"an attached child's retention may change", []messages.MetaCommand{fanTopic("p"), childCreate("c", "p", 0),
			alterCmd(messages.AlterTopic{Name: "c", RetentionMs: ptr[int64](60_000)})}},
		{"the retention of a parent may go down to delay + 1 h", []messages.MetaCommand{fanTopic("p"), childCreate("c", "p", 60_000),
			alterCmd(messages.AlterTopic{Name: "p", RetentionMs: ptr[int64](3_660_000)})}},
		{"the 108th child", func() []messages.MetaCommand {
			cmds := []messages.MetaCommand{fanTopic("p")}
			for i := range messages.MaxChildren {
				name := "c" + string(rune('a'+i/26)) + string(rune('a'+i%26))
				cmds = append(cmds, childCreate(name, "p", 0))
			}
			return cmds
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, res := run(t, tt.cmds...); res.Code != messages.ResultOK {
				t.Fatalf("got code %d reason %q, want OK", res.Code, res.Reason)
			}
		})
	}
}

// topicIn is the named topic of s, failing the test when it is missing.
func topicIn(t *testing.T, s *metaState, name string) messages.Topic {
	t.Helper()
	tp, ok := s.topic(name)
	if !ok {
		t.Fatalf("topic %s missing", name)
	}
	return tp
}

func TestFanoutLinks(t *testing.T) {
	// Indexes: p 1, plain 2, delayed 3 (created as a child: attach epoch 3).
	s, res := run(t, fanTopic("p"), fanTopic("plain"), childCreate("delayed", "p", 60_000), attachCmd("p", "plain", 0))
	if res.Code != messages.ResultOK || res.Topic == nil || res.Topic.Name != "p" {
		t.Fatalf("attach answered %+v, want OK with the parent", res)
	}
	p := topicIn(t, s, "p")
	want := []messages.ChildLink{{Name: "delayed", Incarnation: 3, AttachEpoch: 3, DelayMs: 60_000}, {Name: "plain", Incarnation: 2, AttachEpoch: 4}}
	if !reflect.DeepEqual(p.Children, want) || p.Role() != "parent" {
		t.Fatalf("parent children %+v role %s, want %+v parent", p.Children, p.Role(), want)
	}
	d := topicIn(t, s, "delayed")
	if d.Parent != "p" || d.AttachEpoch != 3 || d.FanoutDelayMs != 60_000 || d.Role() != "child" {
		t.Fatalf("delayed child is %+v, want parent p, epoch 3, delay 60000", d)
	}

	t.Run("re-attach gives a new epoch", func(t *testing.T) {
		s, _ := run(t, fanTopic("p"), fanTopic("c"), attachCmd("p", "c", 0), detachCmd("p", "c"), attachCmd("p", "c", 0))
		if c := topicIn(t, s, "c"); c.AttachEpoch != 5 {
			t.Fatalf("child epoch after re-attach got %d, want 5", c.AttachEpoch)
		}
		if p := topicIn(t, s, "p"); len(p.Children) != 1 || p.Children[0].AttachEpoch != 5 {
			t.Fatalf("parent link after re-attach got %+v, want epoch 5", p.Children)
		}
	})
	t.Run("detach clears both sides", func(t *testing.T) {
		s, res := run(t, fanTopic("p"), fanTopic("c"), attachCmd("p", "c", 0), detachCmd("p", "c"))
		if res.Code != messages.ResultOK {
			t.Fatalf("detach got code %d, want OK", res.Code)
		}
		if p, c := topicIn(t, s, "p"), topicIn(t, s, "c"); p.Children != nil || c.Parent != "" || c.AttachEpoch != 0 || p.Role() != "standalone" || c.Role() != "standalone" {
			t.Fatalf("after detach got parent %+v child %+v, want both standalone", p, c)
		}
	})
	t.Run("deleting a child removes its link from the parent", func(t *testing.T) {
		s, _ := run(t, fanTopic("p"), childCreate("a", "p", 0), childCreate("b", "p", 0), deleteCmd("a", 0))
		if p := topicIn(t, s, "p"); len(p.Children) != 1 || p.Children[0].Name != "b" {
			t.Fatalf("parent children after deleting a got %+v, want only b", p.Children)
		}
	})
	t.Run("deleting a parent detaches every child", func(t *testing.T) {
		s, _ := run(t, fanTopic("p"), childCreate("a", "p", 0), childCreate("b", "p", 60_000), deleteCmd("p", 0))
		for _, name := range []string{"a", "b"} {
			if c := topicIn(t, s, name); c.Parent != "" || c.AttachEpoch != 0 || c.FanoutDelayMs != 0 {
				t.Fatalf("child %s after deleting its parent got %+v, want standalone", name, c)
			}
		}
		// The name is free and the old children can be attached again.
		if _, res := run(t, fanTopic("p"), childCreate("a", "p", 0), deleteCmd("p", 0), fanTopic("p"), attachCmd("p", "a", 0)); res.Code != messages.ResultOK {
			t.Fatalf("attach to a recreated parent got code %d %q, want OK", res.Code, res.Reason)
		}
	})
	t.Run("the links survive a snapshot", func(t *testing.T) {
		var buf strings.Builder
		if err := s.save(&buf); err != nil {
			t.Fatal(err)
		}
		loaded, err := loadMetaState(strings.NewReader(buf.String()))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := loaded.list(), s.list(); !reflect.DeepEqual(got, want) {
			t.Fatalf("after a snapshot got %+v, want %+v", got, want)
		}
	})
	t.Run("reads do not alias the links", func(t *testing.T) {
		p := topicIn(t, s, "p")
		p.Children[0].Name = "changed"
		if again := topicIn(t, s, "p"); again.Children[0].Name != "delayed" {
			t.Fatalf("a read's copy changed the state: got %s, want delayed", again.Children[0].Name)
		}
	})
}

// An old snapshot (no fan-out fields at all) loads as standalone topics.
func TestFanoutOldSnapshotLoads(t *testing.T) {
	old := `{"format":1,"index":7,"topics":[{"name":"orders","incarnation":3,"partitions":3,"retention_ms":0,"visibility_timeout_ms":0,"max_in_flight_per_partition":0,"max_acked_ahead_per_partition":0,"created_at":42}]}`
	s, err := loadMetaState(strings.NewReader(old))
	if err != nil {
		t.Fatal(err)
	}
	if got := topicIn(t, s, "orders"); got.Role() != "standalone" || got.Children != nil {
		t.Fatalf("got %+v, want a standalone topic", got)
	}
}

// The store stamps the fan-out commands with the version that knows them
// and the others with 1, so an older replica stops only at what it cannot
// apply.
func TestCommandVersions(t *testing.T) {
	for _, tt := range []struct {
		cmd  messages.MetaCommand
		want int
	}{
		{fanTopic("p"), 1},
		{childCreate("c", "p", 0), messages.FanoutCommandVersion},
		{attachCmd("p", "c", 0), messages.FanoutCommandVersion},
		{detachCmd("p", "c"), messages.FanoutCommandVersion},
		{deleteCmd("p", 0), 1},
		{messages.MetaCommand{SetClusterVersion: &messages.SetClusterVersion{Version: 2}}, messages.ClusterVersionCommandVersion},
		{messages.MetaCommand{PutMember: &messages.PutMember{Member: messages.Member{ID: "n1", Reads: 2}}}, 1},
		{messages.MetaCommand{Heartbeat: &messages.Heartbeat{ID: "n1", Reads: 2}}, 1},
	} {
		if got := commandVersion(tt.cmd); got != tt.want {
			t.Errorf("version of %+v got %d, want %d", tt.cmd, got, tt.want)
		}
	}
}

// A mixed fan-out log (attaches, refusals, detaches, deletes of parents
// and children, re-creates) replays to the same state and snapshot on two
// replicas, and a restored replica applies the next attach alike.
func TestFanoutDeterministic(t *testing.T) {
	var h []messages.MetaCommand
	names := []string{"p", "q", "a", "b", "c"}
	for i := range 60 {
		x, y := names[i%5], names[(i*3+1)%5]
		switch i % 6 {
		case 0:
			h = append(h, fanTopic(x))
		case 1:
			h = append(h, attachCmd(x, y, int64(i%3)*1000))
		case 2:
			h = append(h, childCreate(y+"x", x, 0))
		case 3:
			h = append(h, detachCmd(x, y))
		case 4:
			h = append(h, deleteCmd(y, 0))
		case 5:
			h = append(h, alterCmd(messages.AlterTopic{Name: x, RetentionMs: ptr[int64](3_600_000)}))
		}
	}
	h = append(h, fanTopic("z"), childCreate("zc", "z", 60_000), fanTopic("zd"), attachCmd("z", "zd", 0))
	a, restored := replayTwiceAndRestore(t, newMetaState, func(s *metaState, c messages.MetaCommand, i uint64) any { return s.apply(c, i) }, loadMetaState, h)
	linked := 0
	for _, tp := range a.list() {
		linked += len(tp.Children)
	}
	if linked == 0 {
		t.Fatal("the history leaves no links: the test would not cover them")
	}
	next := attachCmd("p", "c", 0)
	if ra, rr := a.apply(next, 1000), restored.apply(next, 1000); !reflect.DeepEqual(ra, rr) {
		t.Fatalf("attach after restore: got %+v, want %+v", rr, ra)
	}
}

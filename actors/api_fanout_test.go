package actors

// The fan-out rows of /work/shared/api/CONTRACT.md: §5.1 (role, children,
// parent, attach_epoch, fanout_delay_ms), §6.1 (create with parent), §6.4
// (alter against a delay child), §7 (children) and §8 (409 on a direct
// produce to a delay child), over real HTTP on one node.
//
// Until the fan-out engine runs no owner anchors a link, so these nodes
// wait FanoutAnchorWait 50 ms for it; the wait and the lag arithmetic are
// tested on their own below, with stats filled in by the test.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/naradmq/narad/messages"
)

// The topic record's keys with the fan-out ones, in §5.1's order.
var fanoutRecordKeys = append(slices.Clone(recordKeys), "children", "parent", "attach_epoch", "fanout_delay_ms")

func fanoutNode(t *testing.T, tweak ...func(*Config)) *testNode {
	return ctNode(t, append([]func(*Config){func(c *Config) { c.FanoutAnchorWait = 50 * time.Millisecond }}, tweak...)...)
}

func ctAttach(t *testing.T, tn *testNode, parent, body string) ctResp {
	t.Helper()
	return ctDo(t, tn, "POST", "/v1/topics/"+parent+"/children", []byte(body))
}

// ctTopicRecord reads the topic's record from GET and checks its keys.
func ctTopicRecord(t *testing.T, tn *testNode, name string) messages.TopicDetails {
	t.Helper()
	r := ctDo(t, tn, "GET", "/v1/topics/"+name, nil)
	var d messages.TopicDetails
	ctWantJSON(t, "describe "+name, r, http.StatusOK, &d)
	ctWantKeysIn(t, "describe "+name, r.body, append(slices.Clone(fanoutRecordKeys), "partition_stats"), []string{"role", "partition_stats"})
	return d
}

func ctChildren(t *testing.T, tn *testNode, parent string) (messages.ChildList, []byte) {
	t.Helper()
	r := ctDo(t, tn, "GET", "/v1/topics/"+parent+"/children", nil)
	var l messages.ChildList
	ctWantJSON(t, "children of "+parent, r, http.StatusOK, &l)
	ctWantKeys(t, "children of "+parent, r.body, []string{"parent", "children"})
	return l, r.body
}

func TestContractFanoutAttach(t *testing.T) {
	tn := fanoutNode(t)

	t.Run("AttachAnswersTheParentsRecord", func(t *testing.T) {
		ctCreate(t, tn, `{"name":"ap","partitions":4}`)
		ctCreate(t, tn, `{"name":"ac"}`)
		r := ctAttach(t, tn, "ap", `{"child":"ac"}`)
		var p messages.TopicInfo
		ctWantJSON(t, "attach", r, http.StatusOK, &p)
		ctWantKeys(t, "attach", r.body, append(slices.Clone(recordKeys), "children"))
		if p.Name != "ap" || p.Role != "parent" || !slices.Equal(p.Children, []string{"ac"}) {
			t.Fatalf("attach answered %s, want the parent ap with role parent and children [ac]", r.body)
		}
		c := ctTopicRecord(t, tn, "ac")
		if c.Role != "child" || c.Parent != "ap" || c.FanoutDelayMs != 0 {
			t.Fatalf("child record got role %q parent %q delay %d, want child of ap without a delay", c.Role, c.Parent, c.FanoutDelayMs)
		}
		if _, err := strconv.ParseUint(c.AttachEpoch, 10, 64); err != nil {
			t.Fatalf("attach_epoch got %q, want a decimal string", c.AttachEpoch)
		}
		if got := ctTopicRecord(t, tn, "ap"); got.Role != "parent" || !slices.Equal(got.Children, []string{"ac"}) {
			t.Fatalf("parent record got role %q children %v, want parent [ac]", got.Role, got.Children)
		}
	})

	t.Run("AttachWithADelayShowsItOnTheChild", func(t *testing.T) {
		ctCreate(t, tn, `{"name":"dp"}`)
		ctCreate(t, tn, `{"name":"dc"}`)
		ctWantJSON(t, "attach", ctAttach(t, tn, "dp", `{"child":"dc","delay_ms":60000}`), http.StatusOK, nil)
		r := ctDo(t, tn, "GET", "/v1/topics/dc", nil)
		ctWantKeys(t, "delay child", r.body, append(slices.Clone(recordKeys), "parent", "attach_epoch", "fanout_delay_ms", "partition_stats"))
		if c := ctTopicRecord(t, tn, "dc"); c.FanoutDelayMs != 60000 {
			t.Fatalf("fanout_delay_ms got %d, want 60000", c.FanoutDelayMs)
		}
	})

	t.Run("ReattachGivesANewEpoch", func(t *testing.T) {
		ctCreate(t, tn, `{"name":"rp"}`)
		ctCreate(t, tn, `{"name":"rc"}`)
		ctWantJSON(t, "attach", ctAttach(t, tn, "rp", `{"child":"rc"}`), http.StatusOK, nil)
		first := ctTopicRecord(t, tn, "rc").AttachEpoch
		ctWantEmpty(t, "detach", ctDo(t, tn, "DELETE", "/v1/topics/rp/children/rc", nil), http.StatusNoContent)
		ctWantJSON(t, "attach again", ctAttach(t, tn, "rp", `{"child":"rc"}`), http.StatusOK, nil)
		if again := ctTopicRecord(t, tn, "rc").AttachEpoch; again == first || again == "" {
			t.Fatalf("attach_epoch after a re-attach got %q, want other than %q", again, first)
		}
	})

	t.Run("AttachRefusals", func(t *testing.T) {
		ctCreate(t, tn, `{"name":"xp"}`)
		ctCreate(t, tn, `{"name":"xc"}`)
		ctCreate(t, tn, `{"name":"xq"}`)
		ctCreate(t, tn, `{"name":"xg"}`)
		ctCreate(t, tn, `{"name":"xs","schema":{"type":"object"}}`)
		ctCreate(t, tn, `{"name":"short","retention_ms":3600000}`)
		ctWantJSON(t, "attach xc to xp", ctAttach(t, tn, "xp", `{"child":"xc"}`), http.StatusOK, nil)
		for _, tt := range []struct {
			what, parent, body string
			status             int
			text               string
		}{
			{"missing child", "xp", `{}`, 400, "invalid argument: child required"},
			{"negative delay", "xp", `{"child":"xq","delay_ms":-1}`, 400, "invalid argument: delay_ms must be between..."},
			{"self attach", "xp", `{"child":"xp"}`, 400, "invalid argument: a topic cannot be its own child"},
			{"delay the parent's retention cannot buffer", "short", `{"child":"xq","delay_ms":1}`, 400, "invalid argument: delay too long for the parent's retention..."},
			{"unknown field", "xp", `{"child":"xq","colour":"red"}`, 400, "invalid json: ..."},
			{"two JSON values", "xp", `{"child":"xq"} {}`, 400, "invalid json: ..."},
			{"parent missing", "nosuch", `{"child":"xq"}`, 404, "parent topic not found"},
			{"child missing", "xp", `{"child":"nosuch"}`, 404, "child topic not found"},
			{"duplicate attach", "xp", `{"child":"xc"}`, 409, "child xc is already attached to xp"},
			{"second parent", "xq", `{"child":"xc"}`, 409, "child xc already has parent xp"},
			{"child of a child", "xc", `{"child":"xg"}`, 409, "parent xc is itself a child of xp (no chains)"},
			{"parent as child", "xq", `{"child":"xp"}`, 409, "child xp is a parent and cannot be a child (no chains)"},
			{"schema mismatch", "xp", `{"child":"xs"}`, 409, "schema mismatch..."},
		} {
			ctWantError(t, tt.what, ctAttach(t, tn, tt.parent, tt.body), tt.status, tt.text)
		}
		if got := ctTopicRecord(t, tn, "xp"); !slices.Equal(got.Children, []string{"xc"}) {
			t.Fatalf("after the refusals xp has children %v, want [xc]", got.Children)
		}
	})

	t.Run("AttachBodyPast1MiBIs400", func(t *testing.T) {
		ctCreate(t, tn, `{"name":"bp"}`)
		body := `{"child":"` + strings.Repeat("c", 1<<20) + `"}`
		ctWantError(t, "attach with 1 MiB + 12", ctAttach(t, tn, "bp", body), http.StatusBadRequest, "invalid json: request body too large")
	})

	t.Run("ChildrenListsLinksWithLag", func(t *testing.T) {
		ctCreate(t, tn, `{"name":"lp"}`)
		l, body := ctChildren(t, tn, "lp")
		if l.Parent != "lp" || !strings.Contains(string(body), `"children":[]`) {
			t.Fatalf("children of a topic without any got %s, want parent lp and children []", body)
		}
		ctCreate(t, tn, `{"name":"la"}`)
		ctCreate(t, tn, `{"name":"lb"}`)
		ctWantJSON(t, "attach la", ctAttach(t, tn, "lp", `{"child":"la"}`), http.StatusOK, nil)
		ctWantJSON(t, "attach lb", ctAttach(t, tn, "lp", `{"child":"lb","delay_ms":1000}`), http.StatusOK, nil)
		r := ctDo(t, tn, "GET", "/v1/topics/lp/children", nil)
		var raw struct{ Children []json.RawMessage }
		ctWantJSON(t, "children", r, http.StatusOK, &raw)
		for _, c := range raw.Children {
			ctWantKeys(t, "a child", c, []string{"name", "delay_ms", "lag_messages", "lag_complete"})
		}
		l, _ = ctChildren(t, tn, "lp")
		if len(l.Children) != 2 || l.Children[0].Name != "la" || l.Children[1].Name != "lb" || l.Children[0].DelayMs != 0 || l.Children[1].DelayMs != 1000 {
			t.Fatalf("children got %+v, want la (no delay) then lb (1000 ms), in attach order", l.Children)
		}
		ctWantError(t, "children of a missing parent", ctDo(t, tn, "GET", "/v1/topics/nosuch/children", nil), http.StatusNotFound, errTopicNotFound)
	})

	t.Run("Detach", func(t *testing.T) {
		ctCreate(t, tn, `{"name":"tp"}`)
		ctCreate(t, tn, `{"name":"tc"}`)
		ctWantError(t, "detach of a child not attached", ctDo(t, tn, "DELETE", "/v1/topics/tp/children/tc", nil), http.StatusNotFound, "child tc is not attached to tp")
		ctWantError(t, "detach from a missing parent", ctDo(t, tn, "DELETE", "/v1/topics/nosuch/children/tc", nil), http.StatusNotFound, errTopicNotFound)
		ctWantJSON(t, "attach", ctAttach(t, tn, "tp", `{"child":"tc"}`), http.StatusOK, nil)
		ctWantEmpty(t, "detach", ctDo(t, tn, "DELETE", "/v1/topics/tp/children/tc", nil), http.StatusNoContent)
		for _, name := range []string{"tp", "tc"} {
			if got := ctTopicRecord(t, tn, name); got.Role != "standalone" || got.Parent != "" || got.AttachEpoch != "" || len(got.Children) != 0 {
				t.Fatalf("%s after detach got %+v, want standalone", name, got.TopicInfo)
			}
		}
	})

	// A slow row: 108 topics with their partitions.
	t.Run("ChildLimitIs108", func(t *testing.T) {
		if testing.Short() {
			t.Skip("creates 109 topics")
		}
		ctCreate(t, tn, `{"name":"mp"}`)
		for i := range messages.MaxChildren {
			ctCreate(t, tn, fmt.Sprintf(`{"name":"m%03d","parent":"mp"}`, i))
		}
		ctCreate(t, tn, `{"name":"mextra"}`)
		ctWantError(t, "attach the 109th", ctAttach(t, tn, "mp", `{"child":"mextra"}`), http.StatusConflict, "parent mp has the limit of 108 children")
		ctWantError(t, "create the 109th", ctDo(t, tn, "POST", "/v1/topics", []byte(`{"name":"m108","parent":"mp"}`)), http.StatusConflict, "parent mp has the limit of 108 children")
	})
}

func TestContractFanoutCreateAlterDeleteProduce(t *testing.T) {
	tn := fanoutNode(t)

	t.Run("CreateWithParentAttachesInOneCall", func(t *testing.T) {
		ctCreate(t, tn, `{"name":"cp","partitions":5}`)
		r := ctDo(t, tn, "POST", "/v1/topics", []byte(`{"name":"cc","parent":"cp","fanout_delay_ms":60000}`))
		var c messages.TopicInfo
		ctWantJSON(t, "create under a parent", r, http.StatusCreated, &c)
		ctWantKeys(t, "create under a parent", r.body, append(slices.Clone(recordKeys), "parent", "attach_epoch", "fanout_delay_ms"))
		if c.Role != "child" || c.Parent != "cp" || c.FanoutDelayMs != 60000 || c.AttachEpoch == "" {
			t.Fatalf("create under a parent answered %s, want a child of cp delayed 60000 with an epoch", r.body)
		}
		if c.Partitions != 5 {
			t.Fatalf("partitions got %d, want the parent's 5", c.Partitions)
		}
		if p := ctTopicRecord(t, tn, "cp"); !slices.Equal(p.Children, []string{"cc"}) {
			t.Fatalf("parent children got %v, want [cc]", p.Children)
		}
		r = ctDo(t, tn, "POST", "/v1/topics", []byte(`{"name":"cplain"}`))
		ctWantKeys(t, "plain create", r.body, createKeys) // no role for a plain topic
	})

	t.Run("CreateWithParentRefusals", func(t *testing.T) {
		ctCreate(t, tn, `{"name":"fp","retention_ms":3600000}`)
		ctCreate(t, tn, `{"name":"fc","parent":"fp"}`)
		for _, tt := range []struct {
			what, body string
			status     int
			text       string
		}{
			{"under a child", `{"name":"fg","parent":"fc"}`, 409, "parent fc is itself a child of fp (no chains)"},
			{"schema the parent does not have", `{"name":"fg","parent":"fp","schema":{"type":"object"}}`, 409, "schema mismatch..."},
			{"delay the parent's retention cannot buffer", `{"name":"fg","parent":"fp","fanout_delay_ms":1}`, 400, "invalid argument: delay too long..."},
			{"delay without parent", `{"name":"fg","fanout_delay_ms":5}`, 400, "invalid argument: fanout_delay_ms needs parent"},
			{"own parent", `{"name":"fg","parent":"fg"}`, 400, "invalid argument: a topic cannot be its own parent"},
			{"parent missing", `{"name":"fg","parent":"nosuch"}`, 404, "parent topic not found"},
		} {
			ctWantError(t, tt.what, ctDo(t, tn, "POST", "/v1/topics", []byte(tt.body)), tt.status, tt.text)
		}
		ctWantNoTopic(t, tn, "fg")
	})

	t.Run("AlterAgainstTheLinks", func(t *testing.T) {
		ctCreate(t, tn, `{"name":"rp","retention_ms":7200000}`)
		ctCreate(t, tn, `{"name":"rc","parent":"rp","fanout_delay_ms":3600000}`)
		ctWantError(t, "retention below delay + 1 h", ctDo(t, tn, "PATCH", "/v1/topics/rp", []byte(`{"retention_ms":7199999}`)), http.StatusBadRequest, "invalid argument: retention too short for delay child rc...")
		if got := ctTopicRecord(t, tn, "rp").RetentionMs; got != 7200000 {
			t.Fatalf("retention after the refusal got %d, want 7200000", got)
		}
		ctWantJSON(t, "retention of delay + 1 h", ctDo(t, tn, "PATCH", "/v1/topics/rp", []byte(`{"retention_ms":7200000}`)), http.StatusOK, nil)
		ctWantError(t, "schema of a child", ctDo(t, tn, "PATCH", "/v1/topics/rc", []byte(`{"schema":{"type":"object"}}`)), http.StatusConflict, "the schema of a fan-out child cannot change while it is attached to rp")
		ctWantJSON(t, "schema of the parent", ctDo(t, tn, "PATCH", "/v1/topics/rp", []byte(`{"schema":{"type":"object"}}`)), http.StatusOK, nil)
	})

	t.Run("ProduceToADelayChildIs409", func(t *testing.T) {
		ctCreate(t, tn, `{"name":"pp"}`)
		ctCreate(t, tn, `{"name":"pd","parent":"pp","fanout_delay_ms":1000}`)
		ctCreate(t, tn, `{"name":"pn","parent":"pp"}`)
		ctWantError(t, "produce to the delay child", ctDo(t, tn, "POST", "/v1/topics/pd/produce", []byte("x")), http.StatusConflict, "topic is a fan-out child with a delay: produce to its parent")
		ctProduce(t, tn, "pn", "", []byte("x")) // a child without a delay takes produces
		ctProduce(t, tn, "pp", "", []byte("x"))
	})

	t.Run("DeleteUnlinks", func(t *testing.T) {
		ctCreate(t, tn, `{"name":"dp"}`)
		ctCreate(t, tn, `{"name":"da","parent":"dp"}`)
		ctCreate(t, tn, `{"name":"db","parent":"dp","fanout_delay_ms":1000}`)
		ctWantEmpty(t, "delete a child", ctDo(t, tn, "DELETE", "/v1/topics/da", nil), http.StatusNoContent)
		if p := ctTopicRecord(t, tn, "dp"); !slices.Equal(p.Children, []string{"db"}) {
			t.Fatalf("parent children after deleting da got %v, want [db]", p.Children)
		}
		ctWantEmpty(t, "delete the parent", ctDo(t, tn, "DELETE", "/v1/topics/dp", nil), http.StatusNoContent)
		if c := ctTopicRecord(t, tn, "db"); c.Role != "standalone" || c.Parent != "" || c.FanoutDelayMs != 0 {
			t.Fatalf("child after deleting its parent got %+v, want standalone", c.TopicInfo)
		}
		ctProduce(t, tn, "db", "", []byte("x")) // no longer a delay child
	})

	t.Run("ListShowsRoles", func(t *testing.T) {
		var page messages.TopicPage
		ctWantJSON(t, "list", ctDo(t, tn, "GET", "/v1/topics?limit=1000", nil), http.StatusOK, &page)
		roles := map[string]string{}
		for _, tp := range page.Topics {
			roles[tp.Name] = tp.Role
		}
		if roles["cp"] != "parent" || roles["cc"] != "child" || roles["cplain"] != "standalone" {
			t.Fatalf("list roles got cp=%q cc=%q cplain=%q, want parent, child, standalone", roles["cp"], roles["cc"], roles["cplain"])
		}
	})
}

// §2.1: attach and detach need the parent's owner or an admin; a create
// under a parent needs that too, besides create on the new name.
func TestContractFanoutPermissions(t *testing.T) {
	tn := fanoutNode(t, secured("rootpw"))
	tn.waitForAdmin("rootpw")
	steps := []struct {
		what, user, password, method, path, body string
		want                                     int
	}{
		{"ann", "admin", "rootpw", "POST", "/v1/users", `{"username":"ann","password":"annpw","grants":[{"action":"create","patterns":["a*"]}]}`, 201},
		{"bob", "admin", "rootpw", "POST", "/v1/users", `{"username":"bob","password":"bobpw","grants":[{"action":"create","patterns":["b*"]}]}`, 201},
		{"ann's parent", "ann", "annpw", "POST", "/v1/topics", `{"name":"aparent"}`, 201},
		{"bob's topic", "bob", "bobpw", "POST", "/v1/topics", `{"name":"bchild"}`, 201},
		{"bob attaches to ann's parent", "bob", "bobpw", "POST", "/v1/topics/aparent/children", `{"child":"bchild"}`, 403},
		{"bob creates under ann's parent", "bob", "bobpw", "POST", "/v1/topics", `{"name":"bchild2","parent":"aparent"}`, 403},
		{"ann creates under her parent", "ann", "annpw", "POST", "/v1/topics", `{"name":"achild","parent":"aparent"}`, 201},
		{"bob lists ann's children", "bob", "bobpw", "GET", "/v1/topics/aparent/children", "", 200},
		{"bob detaches from ann's parent", "bob", "bobpw", "DELETE", "/v1/topics/aparent/children/achild", "", 403},
		{"admin attaches bob's topic to ann's parent", "admin", "rootpw", "POST", "/v1/topics/aparent/children", `{"child":"bchild"}`, 200},
		{"ann detaches from her parent", "ann", "annpw", "DELETE", "/v1/topics/aparent/children/bchild", "", 204},
		{"attach to a missing parent passes to 404", "bob", "bobpw", "POST", "/v1/topics/nosuch/children", `{"child":"bchild"}`, 404},
	}
	for _, s := range steps {
		code, body := tn.as(s.user, s.password, s.method, s.path, s.body)
		wantStatus(t, s.what+": "+s.method+" "+s.path, code, body, s.want)
	}
}

// The links through a node that does not lead the metadata shard: a create
// under a parent (through the controller on the leader), an attach and its
// refusals (proposed by that node), and every node's replica showing them.
func TestFanoutLinksOnACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 nodes")
	}
	c := newTestCluster(t, 3, func(_ int, cfg *Config) { cfg.FanoutAnchorWait = 100 * time.Millisecond })
	follower := c.node((c.leader() + 1) % 3)
	other := c.node((c.leader() + 2) % 3)
	want := func(what string, code int, body []byte, status int, text string) {
		t.Helper()
		if code != status || (text != "" && !strings.Contains(string(body), text)) {
			t.Fatalf("%s: got %d %s, want %d with %q", what, code, body, status, text)
		}
	}
	code, body := follower.do("POST", "/v1/topics", []byte(`{"name":"cp","partitions":4}`))
	want("create the parent", code, body, http.StatusCreated, "")
	code, body = follower.do("POST", "/v1/topics", []byte(`{"name":"cc","parent":"cp","fanout_delay_ms":1000}`))
	want("create a child under it", code, body, http.StatusCreated, `"attach_epoch":"`)
	code, body = follower.do("POST", "/v1/topics", []byte(`{"name":"cg","parent":"cc"}`))
	want("create under a child", code, body, http.StatusConflict, "parent cc is itself a child of cp (no chains)")
	code, body = follower.do("POST", "/v1/topics", []byte(`{"name":"ca"}`))
	want("create a plain topic", code, body, http.StatusCreated, "")
	code, body = follower.do("POST", "/v1/topics/cp/children", []byte(`{"child":"ca"}`))
	want("attach", code, body, http.StatusOK, `"children":["cc","ca"]`)
	code, body = follower.do("POST", "/v1/topics/cp/children", []byte(`{"child":"ca"}`))
	want("attach again", code, body, http.StatusConflict, "child ca is already attached to cp")

	var got messages.TopicDetails
	if !c.eventually(func() bool {
		code, body = other.do("GET", "/v1/topics/cc", nil)
		got = messages.TopicDetails{}
		return code == http.StatusOK && json.Unmarshal(body, &got) == nil && got.Parent == "cp"
	}) {
		t.Fatalf("the child on another node: got %d %s, want a child of cp", code, body)
	}
	if got.Partitions != 4 || got.FanoutDelayMs != 1000 || got.Role != "child" {
		t.Fatalf("the child on another node got %+v, want 4 partitions (the parent's), delay 1000, role child", got.TopicInfo)
	}
	code, body = other.do("GET", "/v1/topics/cp/children", nil)
	var l messages.ChildList
	if code != http.StatusOK || json.Unmarshal(body, &l) != nil || len(l.Children) != 2 || l.Children[0].Name != "cc" || l.Children[1].Name != "ca" {
		t.Fatalf("children on another node: got %d %s, want cc then ca", code, body)
	}
	code, body = other.do("DELETE", "/v1/topics/cp", nil)
	want("delete the parent", code, body, http.StatusNoContent, "")
	if !c.eventually(func() bool {
		code, body = follower.do("GET", "/v1/topics/cc", nil)
		return code == http.StatusOK && strings.Contains(string(body), `"role":"standalone"`) && !strings.Contains(string(body), "parent")
	}) {
		t.Fatalf("the child after its parent's delete: got %d %s, want standalone", code, body)
	}
}

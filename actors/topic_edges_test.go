package actors

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// Issue 48 item 6: a topic whose name has the API's longest length (255
// bytes) is created, written and moved to another node, which serves every
// record. The move's staging copy used to be .moves/<topic>-<N>, past the
// file system's 255-byte name limit: the destination could not make it,
// and the move never ended.
func TestIssue48ATopicWithTheLongestNameMovesToAnotherNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	name := strings.Repeat("n", 250) + ".-_9Z"
	if len(name) != 255 {
		t.Fatalf("topic name of %d bytes, want 255", len(name))
	}
	c := moveTestCluster(t, newGate("no-such-topic", 0, false)) // no move is held
	c.node(0).must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"`+name+`","partitions":3}`))
	const records = 20
	for i := range records {
		c.node(i%3).must(http.StatusAccepted, "POST", "/v1/topics/"+name+"/produce?partition=0", fmt.Appendf(nil, `"r%d"`, i))
	}
	dest := c.destinationFor(name, 0)
	c.planMove(name, 0, dest)
	c.waitForOwner(dest, name, 0)
	c.waitFor(fmt.Sprintf("all %d records at the new owner", records), func() bool {
		hwm, ok := partitionHWM(c.node(dest), name, 0)
		return ok && hwm == records
	})
	if stagingExists(c.node(dest), name, 0) {
		t.Fatalf("n%d after the move: a staging copy is left, want it installed", dest+1)
	}
}

// Issue 48 item 6: each numeric setting of a topic has a ceiling. A create
// at the ceiling is 201 with the value; one past it is 400 in the
// contract's error shape, naming the ceiling, and no topic is made; an
// alter is refused or applied the same way. The issue's values (a
// visibility of 10^13 ms, caps of 4,194,304) used to be 201.
func TestIssue48TopicSettingsHaveCeilings(t *testing.T) {
	tn := ctNode(t)
	for i, tc := range []struct {
		field   string
		ceiling int64
		means   string
		issue   int64 // the value the issue found accepted
		alter   bool  // PATCH takes the field
	}{
		{"retention_ms", 3_153_600_000_000, "100 years; 0 keeps records forever", 1 << 62, true},
		{"visibility_timeout_ms", 604_800_000, "7 days", 10_000_000_000_000, false},
		{"max_in_flight_per_partition", 1 << 20, "2^20", 4_194_304, true},
		{"max_acked_ahead_per_partition", 1 << 20, "2^20", 4_194_304, true},
	} {
		refusal := fmt.Sprintf("invalid argument: %s must be between 0 and %d (%s)", tc.field, tc.ceiling, tc.means)
		for _, v := range []int64{tc.ceiling + 1, tc.issue} {
			over := fmt.Sprintf("over-%d", i)
			r := ctDo(t, tn, "POST", "/v1/topics", fmt.Appendf(nil, `{"name":%q,%q:%d}`, over, tc.field, v))
			ctWantError(t, fmt.Sprintf("create with %s %d", tc.field, v), r, http.StatusBadRequest, refusal)
			ctWantNoTopic(t, tn, over)
		}
		at := fmt.Sprintf("at-%d", i)
		created := ctCreate(t, tn, fmt.Sprintf(`{"name":%q,%q:%d}`, at, tc.field, tc.ceiling))
		if got := settingOf(created.TopicInfo, tc.field); got != tc.ceiling {
			t.Errorf("create at the ceiling of %s: got %d, want %d", tc.field, got, tc.ceiling)
		}
		if !tc.alter {
			continue
		}
		r := ctDo(t, tn, "PATCH", "/v1/topics/"+at, fmt.Appendf(nil, `{%q:%d}`, tc.field, tc.ceiling+1))
		ctWantError(t, "alter "+tc.field+" past its ceiling", r, http.StatusBadRequest, refusal)
		ctWantJSON(t, "alter "+tc.field+" below its ceiling", ctDo(t, tn, "PATCH", "/v1/topics/"+at, fmt.Appendf(nil, `{%q:%d}`, tc.field, tc.ceiling/2)), http.StatusOK, nil)
		var altered messages.TopicInfo
		ctWantJSON(t, "alter "+tc.field+" to its ceiling", ctDo(t, tn, "PATCH", "/v1/topics/"+at, fmt.Appendf(nil, `{%q:%d}`, tc.field, tc.ceiling)), http.StatusOK, &altered)
		if got := settingOf(altered, tc.field); got != tc.ceiling {
			t.Errorf("alter to the ceiling of %s: got %d, want %d", tc.field, got, tc.ceiling)
		}
	}
}

// settingOf is the value of a topic record's numeric setting by its JSON
// name.
func settingOf(t messages.TopicInfo, field string) int64 {
	return map[string]int64{"retention_ms": t.RetentionMs, "visibility_timeout_ms": t.VisibilityTimeoutMs,
		"max_in_flight_per_partition": t.MaxInFlightPerPartition, "max_acked_ahead_per_partition": t.MaxAckedAheadPerPartition}[field]
}

// Issue 48 item 6: a topic altered with more schemas than its record keeps
// validates every produce against the schema registered last. Each schema
// adds a property and allows no other, so a body with the newest property
// passes only the newest schema; the node's compiled-schema cache is
// keyed by a version that keeps growing once the oldest are dropped.
func TestIssue48SchemaPatchesPastTheKeptVersionsValidateAgainstTheLatest(t *testing.T) {
	tn := ctNode(t)
	props := func(n int) string {
		var p []string
		for v := 1; v <= n; v++ {
			p = append(p, fmt.Sprintf(`"p%d":{"type":"integer"}`, v))
		}
		return `{"type":"object","additionalProperties":false,"properties":{` + strings.Join(p, ",") + `}}`
	}
	ctCreate(t, tn, `{"name":"schemas","schema":`+props(1)+`}`)
	ctProduce(t, tn, "schemas", "", []byte(`{"p1":1}`))
	for v := 2; v <= metastore.MaxSchemaVersions+3; v++ {
		ctWantJSON(t, fmt.Sprintf("register schema %d", v), ctDo(t, tn, "PATCH", "/v1/topics/schemas", []byte(`{"schema":`+props(v)+`}`)), http.StatusOK, nil)
		ctProduce(t, tn, "schemas", "", fmt.Appendf(nil, `{"p%d":1}`, v))
	}
	kept, _ := tn.n.Store().Topic("schemas")
	if len(kept.Schemas) != metastore.MaxSchemaVersions || kept.SchemaVersion() != metastore.MaxSchemaVersions+3 {
		t.Fatalf("the topic's record: got %d schemas, version %d; want %d, version %d", len(kept.Schemas), kept.SchemaVersion(), metastore.MaxSchemaVersions, metastore.MaxSchemaVersions+3)
	}
}

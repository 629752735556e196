package messages

import (
	"bytes"
	"encoding/json"
	"testing"
)

// encode is how the server writes a body: no HTML escaping, a newline after.
func encode(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("encode %T: %v", v, err)
	}
	return b.String()
}

func int64p(v int64) *int64 { return &v }

// Existing Narad clients decode these bodies: every key, its order and when
// it is left out are pinned here byte for byte, as the contract gives them.
func TestWireBodiesEncodeAsTheContractSays(t *testing.T) {
	plain := TopicInfo{Name: "orders", Partitions: 3, RetentionMs: 604800000, VisibilityTimeoutMs: 30000,
		MaxInFlightPerPartition: 1024, MaxAckedAheadPerPartition: 1024, CreatedAt: 1700000000}
	listed := plain
	listed.Role = "standalone"
	for _, c := range []struct {
		what string
		body any
		want string
	}{
		{"an error", ErrorBody{Error: "topic not found"}, `{"error":"topic not found"}`},
		{"health", HealthBody{Status: "ok"}, `{"status":"ok"}`},

		{"the create answer of a plain topic has no role", plain,
			`{"name":"orders","partitions":3,"retention_ms":604800000,"visibility_timeout_ms":30000,"max_in_flight_per_partition":1024,"max_acked_ahead_per_partition":1024,"created_at":1700000000}`},
		{"a read has a role", listed,
			`{"name":"orders","partitions":3,"retention_ms":604800000,"visibility_timeout_ms":30000,"max_in_flight_per_partition":1024,"max_acked_ahead_per_partition":1024,"created_at":1700000000,"role":"standalone"}`},
		{"fan-out keys follow the role", TopicInfo{Name: "c", Owner: "ann", Role: "child", Parent: "p", AttachEpoch: "e1", FanoutDelayMs: 5},
			`{"name":"c","partitions":0,"retention_ms":0,"visibility_timeout_ms":0,"max_in_flight_per_partition":0,"max_acked_ahead_per_partition":0,"created_at":0,"owner":"ann","role":"child","parent":"p","attach_epoch":"e1","fanout_delay_ms":5}`},
		{"an empty page", TopicPage{Topics: []TopicInfo{}}, `{"topics":[],"next_page_token":""}`},
		{"details before any partition is served", TopicDetails{TopicInfo: TopicInfo{Name: "t", Role: "standalone"}, PartitionStats: []PartitionInfo{}},
			`{"name":"t","partitions":0,"retention_ms":0,"visibility_timeout_ms":0,"max_in_flight_per_partition":0,"max_acked_ahead_per_partition":0,"created_at":0,"role":"standalone","partition_stats":[]}`},
		{"a fresh partition leaves out its segment time", PartitionInfo{Index: 2, Segments: 1, OwnerNode: "n1"},
			`{"index":2,"segments":1,"oldest_offset":0,"next_offset":0,"high_watermark":0,"size_bytes":0,"owner_node":"n1"}`},
		{"a partition's leases, beyond the contract", PartitionInfo{Index: 1, InFlightLeases: 3},
			`{"index":1,"segments":0,"oldest_offset":0,"next_offset":0,"high_watermark":0,"size_bytes":0,"in_flight_leases":3}`},
		{"a partition with data", PartitionInfo{Index: 0, Segments: 2, OldestOffset: 5, NextOffset: 9, HighWatermark: 8, SizeBytes: 512, OldestSegmentAt: 1700000000, OwnerNode: "n2"},
			`{"index":0,"segments":2,"oldest_offset":5,"next_offset":9,"high_watermark":8,"size_bytes":512,"oldest_segment_at":1700000000,"owner_node":"n2"}`},

		{"a queue-mode delivery", MessageInfo{Topic: "t", Partition: 1, Offset: 7, Key: "k", Payload: json.RawMessage(`{"a":"<b>"}`), Timestamp: 1700000000, ReceiptHandle: "1:7:42"},
			`{"topic":"t","partition":1,"offset":7,"key":"k","payload":{"a":"<b>"},"timestamp":1700000000,"receipt_handle":"1:7:42"}`},
		{"a binary replay", MessageInfo{Topic: "t", Payload: json.RawMessage(`"/wAB"`), PayloadEncoding: "base64", Timestamp: 1},
			`{"topic":"t","partition":0,"offset":0,"payload":"/wAB","payload_encoding":"base64","timestamp":1}`},

		{"members", MemberList{Members: []MemberInfo{{ID: "n1", Addr: "127.0.0.1:7942", Status: "alive", OwnedPartitions: 3}}},
			`{"members":[{"id":"n1","addr":"127.0.0.1:7942","status":"alive","draining":false,"owned_partitions":3,"outbound_moves":0}]}`},
		{"a member's quarantine figures, beyond the contract", MemberInfo{ID: "n1", ReclaimedBytes: new(int64(0)), QuarantinedBytes: new(int64(4096))},
			`{"id":"n1","addr":"","status":"","draining":false,"owned_partitions":0,"outbound_moves":0,"reclaimed_bytes":0,"quarantined_bytes":4096}`},
		{"no moves", MoveList{Moves: []MoveInfo{}}, `{"moves":[]}`},
		{"a move as the contract has it", MoveInfo{Topic: "t", Partition: 2, From: "n1", To: "n4"},
			`{"topic":"t","partition":2,"from":"n1","to":"n4"}`},
		{"a move with its sides and progress", MoveInfo{Topic: "t", From: "n1", To: "n4", FromStatus: "dead", ToStatus: "alive", Blocked: []string{"source_dead"},
			Progress: &MoveProgress{Topic: "t", From: "n1", Phase: "copy", Pass: 1, BytesCopied: 10, BytesListed: 20, ElapsedMs: 5}},
			`{"topic":"t","partition":0,"from":"n1","to":"n4","from_status":"dead","to_status":"alive","blocked":["source_dead"],` +
				`"progress":{"topic":"t","partition":0,"from":"n1","phase":"copy","pass":1,"bytes_copied":10,"bytes_listed":20,"elapsed_ms":5}}`},
		{"an abort that worked", AbortMoveReply{Topic: "t", Partition: 2, Owner: "n1", Result: "aborted"},
			`{"topic":"t","partition":2,"owner":"n1","result":"aborted"}`},
		{"an abort refused", AbortMoveReply{Topic: "t", Partition: 2, Owner: "n1", Target: "n5", Result: "refused", Error: "the move now targets n5, not n4"},
			`{"topic":"t","partition":2,"owner":"n1","target":"n5","result":"refused","error":"the move now targets n5, not n4"}`},
		{"a dry run", DecommissionReply{Member: "n2", Verdict: "ok"}, `{"member":"n2","verdict":"ok","owned_partitions":0}`},
	} {
		if got := encode(t, c.body); got != c.want+"\n" {
			t.Errorf("%s:\n got %s want %s", c.what, got, c.want)
		}
	}
}

// A create sends only what its user set: an explicit 0 is sent, because a
// broker following Narad's docs reads retention_ms 0 as "keep forever".
func TestACreateRequestSendsOnlyWhatWasSet(t *testing.T) {
	if got := encode(t, CreateTopicRequest{Name: "t"}); got != `{"name":"t"}`+"\n" {
		t.Fatalf("name only: got %s", got)
	}
	got := encode(t, CreateTopicRequest{Name: "t", Partitions: 6, RetentionMs: int64p(0), Schema: json.RawMessage(`{"type":"object"}`)})
	if want := `{"name":"t","partitions":6,"retention_ms":0,"schema":{"type":"object"}}` + "\n"; got != want {
		t.Fatalf("with an explicit zero: got %s, want %s", got, want)
	}
}

// The server reads absent, null and set fields of a request apart only as
// far as the contract does: nil is "not given", whatever the client sent.
func TestRequestsDecodeAbsentAndNullAsNotGiven(t *testing.T) {
	for _, body := range []string{`{"name":"t"}`, `{"name":"t","retention_ms":null,"fanout_delay_ms":null}`} {
		var c CreateTopicRequest
		if err := json.Unmarshal([]byte(body), &c); err != nil || c.RetentionMs != nil || c.FanoutDelayMs != nil {
			t.Fatalf("create %s: got %+v, %v, want no retention and no delay", body, c, err)
		}
	}
	var c CreateTopicRequest
	if err := json.Unmarshal([]byte(`{"name":"t","retention_ms":0}`), &c); err != nil || c.RetentionMs == nil || *c.RetentionMs != 0 {
		t.Fatalf("create with retention_ms 0: got %+v, %v, want an explicit 0", c, err)
	}
	var a AlterTopicRequest
	if err := json.Unmarshal([]byte(`{"partitions":null,"max_in_flight_per_partition":5}`), &a); err != nil ||
		a.Partitions != nil || a.RetentionMs != nil || a.MaxInFlightPerPartition == nil || *a.MaxInFlightPerPartition != 5 {
		t.Fatalf("alter: got %+v, %v, want only max_in_flight_per_partition, 5", a, err)
	}
}

package messages

import "testing"

// The admin verbs' answers start with the /v1 fields, so a script written
// against GET /v1/cluster/members reads the admin answer too.
func TestAdminBodiesExtendTheV1Ones(t *testing.T) {
	for _, c := range []struct {
		what string
		body any
		want string
	}{
		{"a member", AdminMemberInfo{MemberInfo: MemberInfo{ID: "n2", Addr: "a:1", Status: "alive", Draining: true}, Role: "voter", RaftAddr: "a:2", DecommissionBlocked: "partitions_left"},
			`{"id":"n2","addr":"a:1","status":"alive","draining":true,"owned_partitions":0,"outbound_moves":0,"leaving":false,"role":"voter","raft_addr":"a:2","decommission_blocked":"partitions_left"}`},
		{"a topic", AdminTopicInfo{TopicInfo: TopicInfo{Name: "t", Partitions: 3, Role: "standalone"}, Incarnation: 9, Owners: map[string]int{"n1": 2}, Unplaced: 1},
			`{"name":"t","partitions":3,"retention_ms":0,"visibility_timeout_ms":0,"max_in_flight_per_partition":0,"max_acked_ahead_per_partition":0,"created_at":0,"role":"standalone","incarnation":9,"owners":{"n1":2},"unplaced":1}`},
		{"a status while no shard has a leader", AdminStatus{Cluster: "c", AnsweredBy: "n1", Shards: []ShardStatus{{Shard: 1}}},
			`{"cluster":"c","answered_by":"n1","ready":false,"metadata_leader":"","members":0,"alive":0,"topics":0,"shards":[{"shard":1,"role":""}]}`},
		{"an unconditional abort", AbortMoveRequest{Topic: "t", Partition: 4}, `{"topic":"t","partition":4}`},
		{"a decommission", DecommissionRequest{ID: "n2", DryRun: true}, `{"id":"n2","dry_run":true,"cancel":false}`},
		{"moves with progress", MovesRequest{Detail: true}, `{"detail":true}`},
		{"a join", JoinRequest{NodeID: "n4", ReplicaID: 4, RaftAddr: "a:3"}, `{"node_id":"n4","replica_id":4,"raft_addr":"a:3"}`},
		{"a join asking for a replica id", JoinRequest{NodeID: "n4", RaftAddr: "a:3"}, `{"node_id":"n4","replica_id":0,"raft_addr":"a:3"}`},
		{"a replica id handed out", JoinReply{ReplicaID: 7}, `{"admitted":false,"replica_id":7}`},
		{"an admission", JoinReply{Admitted: true, ReplicaID: 7}, `{"admitted":true,"replica_id":7}`},
	} {
		if got := encode(t, c.body); got != c.want+"\n" {
			t.Errorf("%s:\n got %s want %s", c.what, got, c.want)
		}
	}
}

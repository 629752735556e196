package main

import "testing"

func TestTheMetadataLeaderIsReadFromItsGauge(t *testing.T) {
	metrics := `narad_raft_leader{node="n2",shard="2"} 1
narad_raft_leader{node="n2",shard="1"} 0
narad_raft_term{node="n2",shard="1"} 4
`
	for _, c := range []struct {
		name, metrics, id string
		want              bool
	}{
		{"leads another shard only", metrics, "n2", false},
		{"leads the metadata shard", `narad_raft_leader{node="n2",shard="10"} 0` + "\n" + `narad_raft_leader{node="n2",shard="1"} 1` + "\n", "n2", true},
		{"another node's series", `narad_raft_leader{node="n1",shard="1"} 1`, "n2", false},
		{"no series", "", "n2", false},
	} {
		if got := leadsMeta(c.metrics, c.id); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

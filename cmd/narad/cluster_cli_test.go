package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

func TestClusterMembersAsksTheAdminSubjectAndPrintsATable(t *testing.T) {
	// A stand-in for the nodes' queue group.
	var asked []string
	url := fakeAdminFunc(t, "members", func(body []byte) []byte {
		asked = append(asked, string(body))
		return []byte(`{"members":[{"id":"n1","addr":"10.0.0.1:7942","status":"alive","draining":false,"owned_partitions":12,"outbound_moves":1,"leaving":false,"role":"voter","raft_addr":"10.0.0.1:7952"},{"id":"n2","addr":"10.0.0.2:7942","status":"dead","draining":true,"owned_partitions":0,"outbound_moves":0,"leaving":true,"role":"nonvoter","raft_addr":"10.0.0.2:7952"}]}`)
	})

	var out, errOut bytes.Buffer
	if err := runCluster(context.Background(), []string{"members", "--nats", url, "--cluster", "prod"}, &out, &errOut); err != nil {
		t.Fatalf("cluster members: %v (%s)", err, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("output: got %q, want a header and two members", out.String())
	}
	if f := strings.Fields(lines[1]); strings.Join(f, " ") != "n1 10.0.0.1:7942 alive voter false false 12 1" {
		t.Fatalf("n1 row: got %q", lines[1])
	}
	if f := strings.Fields(lines[2]); strings.Join(f, " ") != "n2 10.0.0.2:7942 dead nonvoter true true 0 0" {
		t.Fatalf("n2 row: got %q", lines[2])
	}
	if len(asked) != 1 || asked[0] != "{}" {
		t.Fatalf("requests: got %q, want one with body {}", asked)
	}
	if err := runCluster(context.Background(), []string{"bogus"}, &out, &errOut); err == nil {
		t.Fatal("an unknown subcommand: got nil, want an error")
	}
}

// fakeAdmin serves one admin verb of cluster "prod" with a fixed answer
// and returns the NATS URL.
func fakeAdmin(t *testing.T, verb, answer string) string {
	t.Helper()
	return fakeAdminFunc(t, verb, func([]byte) []byte { return []byte(answer) })
}

func TestClusterTopicsAndMovesPrintTables(t *testing.T) {
	for _, tc := range []struct {
		verb, answer string
		want         []string // each line's fields, joined by one space
	}{
		{"topics", `{"topics":[{"name":"orders","partitions":6,"retention_ms":3600000,"incarnation":42,"owners":{"n2":3,"n1":2},"unplaced":1}]}`,
			[]string{"NAME PARTITIONS RETENTION INCARNATION OWNERS UNPLACED", "orders 6 1h0m0s 42 n1=2 n2=3 1"}},
		{"moves", `{"moves":[{"topic":"orders","partition":4,"from":"n1","to":"n4"}]}`,
			[]string{"TOPIC PARTITION FROM TO SIDES BLOCKED PROGRESS", "orders 4 n1 n4 - - -"}},
		{"moves", `{"moves":[{"topic":"orders","partition":4,"from":"n1","to":"n4","from_status":"dead","to_status":"alive","blocked":["source_dead"],` +
			`"progress":{"phase":"finalize","pass":3,"bytes_copied":3145728,"bytes_listed":4194304,"frozen_ms":12}}]}`,
			[]string{"TOPIC PARTITION FROM TO SIDES BLOCKED PROGRESS", "orders 4 n1 n4 dead/alive source_dead finalize pass 3, 3.0 MiB of 4.0 MiB, frozen 12ms"}},
		{"moves", `{"moves":[]}`,
			[]string{"no moves: every partition is where the placement wants it"}},
	} {
		t.Run(tc.verb, func(t *testing.T) {
			url := fakeAdmin(t, tc.verb, tc.answer)
			var out, errOut bytes.Buffer
			if err := runCluster(context.Background(), []string{tc.verb, "--nats", url, "--cluster", "prod"}, &out, &errOut); err != nil {
				t.Fatalf("cluster %s: %v (%s)", tc.verb, err, errOut.String())
			}
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				got = append(got, strings.Join(strings.Fields(line), " "))
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("cluster %s: got\n%s\nwant\n%s", tc.verb, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// The abort and decommission subcommands send their arguments as the
// admin verbs' JSON bodies, and a refusal comes back as an error.
func TestClusterAbortAndDecommissionSendTheirArguments(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		verb     string
		wantBody string
		answer   string
		wantErr  string
	}{
		{[]string{"moves", "abort", "orders", "4", "--target", "n4"}, "moves-abort", `{"partition":4,"target":"n4","topic":"orders"}`,
			`{"topic":"orders","partition":4,"owner":"n1","result":"aborted"}`, ""},
		{[]string{"decommission", "n2", "--dry-run"}, "decommission", `{"cancel":false,"dry_run":true,"id":"n2"}`,
			`{"member":"n2","verdict":"ok","owned_partitions":3}`, ""},
		{[]string{"decommission", "n2", "--cancel"}, "decommission", `{"cancel":true,"dry_run":false,"id":"n2"}`,
			`{"member":"n2","verdict":"cancelled"}`, ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var got string
			url := fakeAdminFunc(t, tc.verb, func(body []byte) []byte { got = string(body); return []byte(tc.answer) })
			var out, errOut bytes.Buffer
			err := runCluster(context.Background(), append(tc.args, "--nats", url, "--cluster", "prod"), &out, &errOut)
			if err != nil {
				t.Fatalf("got %v (%s), want the answer printed", err, errOut.String())
			}
			if !sameJSON(got, tc.wantBody) {
				t.Fatalf("body: got %s, want %s", got, tc.wantBody)
			}
			if !strings.Contains(out.String(), `"`+strings.Split(tc.answer, `"`)[1]+`"`) {
				t.Fatalf("output: got %q, want the answer", out.String())
			}
		})
	}
	if err := runCluster(context.Background(), []string{"moves", "abort", "orders"}, io.Discard, io.Discard); err == nil {
		t.Fatal("abort without a partition: got nil, want an error")
	}
	if err := runCluster(context.Background(), []string{"moves", "abort", "orders", "x"}, io.Discard, io.Discard); err == nil {
		t.Fatal("abort of partition x: got nil, want an error")
	}
}

// sameJSON reports whether two JSON texts hold the same value: key order
// means nothing to the nodes that decode a request.
func sameJSON(a, b string) bool {
	var va, vb any
	return json.Unmarshal([]byte(a), &va) == nil && json.Unmarshal([]byte(b), &vb) == nil && reflect.DeepEqual(va, vb)
}

// fakeAdminFunc is fakeAdmin answering with answer(body).
func fakeAdminFunc(t *testing.T, verb string, answer func([]byte) []byte) string {
	t.Helper()
	s, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: natsserver.RANDOM_PORT, NoSigs: true, NoLog: true,
		MaxPayload: natsMaxPayloadBytes})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats did not start")
	}
	t.Cleanup(s.Shutdown)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if _, err := nc.QueueSubscribe("narad.prod.admin."+verb, "admin", func(m *nats.Msg) { m.Respond(answer(m.Data)) }); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	return s.ClientURL()
}

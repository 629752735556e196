package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
)

// fakeAdminReplies serves admin verbs of cluster "prod": answer gives the
// body and, when status is not empty, the error status a node would set.
func fakeAdminReplies(t *testing.T, answer func(verb string, body []byte) (data []byte, status string), verbs ...string) string {
	t.Helper()
	s := testnet.StartNATS(t, &natsserver.Options{MaxPayload: natsMaxPayloadBytes})
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	for _, verb := range verbs {
		if _, err := nc.QueueSubscribe("narad.prod.admin."+verb, "admin", func(m *nats.Msg) {
			data, status := answer(verb, m.Data)
			out := &nats.Msg{Data: data, Header: nats.Header{}}
			if status != "" {
				out.Header.Set(messages.HeaderStatus, status)
			}
			m.RespondMsg(out)
		}); err != nil {
			t.Fatal(err)
		}
	}
	nc.Flush()
	return s.ClientURL()
}

// fields is each line of out with its fields joined by one space.
func fields(out string) []string {
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		got = append(got, strings.Join(strings.Fields(line), " "))
	}
	return got
}

const twoNodesListing = `{"nodes":[` +
	`{"node":"n1","copies":[],"total_copies":0,"total_bytes":0,"reclaimed_bytes":0},` +
	`{"node":"n2","copies":[` +
	`{"path":".stale/orders@3","kind":"stale_topic","topic":"orders","partition":-1,"incarnation":3,"bytes":3145728,"modified_ms":1,"age_ms":7200000},` +
	`{"path":"topics/orders/0.quarantine","kind":"partition","topic":"orders","partition":0,"bytes":124,"modified_ms":1,"age_ms":90400}],` +
	`"total_copies":3,"total_bytes":3146852,"orphan_topic_dirs":["topics/x"],"reclaimed_bytes":10}]}`

func TestClusterQuarantineListsEachNodesCopiesWithTotals(t *testing.T) {
	var asked []string
	url := fakeAdminReplies(t, func(_ string, body []byte) ([]byte, string) {
		asked = append(asked, string(body))
		return []byte(twoNodesListing), ""
	}, "quarantine")
	var out, errOut bytes.Buffer
	if err := runCluster(context.Background(), []string{"quarantine", "--nats", url, "--cluster", "prod"}, &out, &errOut); err != nil {
		t.Fatalf("cluster quarantine: %v (%s)", err, errOut.String())
	}
	want := []string{
		"NODE PATH KIND BYTES AGE",
		"n2 .stale/orders@3 stale_topic 3.0 MiB 2h0m0s",
		"n2 topics/orders/0.quarantine partition 124 B 1m30s",
		"n2: 2 of its 3 copies listed",
		"n2: topic directories without an incarnation marker: topics/x",
		"total: 3 copies, 3.0 MiB, on 2 nodes",
	}
	if got := fields(out.String()); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("output: got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	out.Reset()
	if err := runCluster(context.Background(), []string{"quarantine", "--node", "n2", "--nats", url, "--cluster", "prod"}, &out, &errOut); err != nil {
		t.Fatalf("cluster quarantine --node n2: %v", err)
	}
	if len(asked) != 2 || asked[0] != "{}" || !sameJSON(asked[1], `{"node":"n2"}`) {
		t.Fatalf("requests: got %q, want {} then n2's", asked)
	}
}

// A listing that lacks a member says so and exits non-zero: its totals
// leave that member out.
func TestClusterQuarantineWithoutAMembersListingIsAnError(t *testing.T) {
	url := fakeAdminReplies(t, func(string, []byte) ([]byte, string) {
		return []byte(`{"nodes":[{"node":"n1","copies":[],"total_copies":0,"total_bytes":0,"reclaimed_bytes":0}],"errors":{"n3":"no answer in time"}}`), ""
	}, "quarantine")
	var out bytes.Buffer
	err := runCluster(context.Background(), []string{"quarantine", "--nats", url, "--cluster", "prod"}, &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "n3 (no answer in time)") {
		t.Fatalf("got %v, want an error naming n3", err)
	}
	if !strings.Contains(out.String(), "total: 0 copies, 0 B, on 1 nodes") {
		t.Fatalf("output: got %q, want the totals of the nodes that answered", out.String())
	}
}

func TestClusterQuarantineReleaseSendsItsArgumentsAndSaysWhatItRemoved(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		wantBody string
		answer   string
		want     string
	}{
		{[]string{"--node", "n2", "--path", "topics/orders/0.quarantine", "--dry-run"},
			`{"node":"n2","path":"topics/orders/0.quarantine","dry_run":true}`,
			`{"node":"n2","path":"topics/orders/0.quarantine","kind":"partition","bytes":2048,"dry_run":true,"released":false}`,
			"dry run: would remove topics/orders/0.quarantine on n2 (partition, 2.0 KiB); nothing removed"},
		{[]string{"--node", "n2", "--path", "topics/orders/0.quarantine"},
			`{"node":"n2","path":"topics/orders/0.quarantine","dry_run":false}`,
			`{"node":"n2","path":"topics/orders/0.quarantine","kind":"partition","bytes":2048,"dry_run":false,"released":true}`,
			"removed topics/orders/0.quarantine on n2 (partition, 2.0 KiB)"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var got string
			url := fakeAdminReplies(t, func(_ string, body []byte) ([]byte, string) { got = string(body); return []byte(tc.answer), "" }, "quarantine-release")
			var out, errOut bytes.Buffer
			args := append([]string{"quarantine", "release"}, tc.args...)
			if err := runCluster(context.Background(), append(args, "--nats", url, "--cluster", "prod"), &out, &errOut); err != nil {
				t.Fatalf("got %v (%s), want the answer printed", err, errOut.String())
			}
			if !sameJSON(got, tc.wantBody) {
				t.Fatalf("body: got %s, want %s", got, tc.wantBody)
			}
			if strings.TrimSpace(out.String()) != tc.want {
				t.Fatalf("output: got %q, want %q", out.String(), tc.want)
			}
		})
	}
}

// Bad input is an error (a non-zero exit) that says what was wrong,
// whether the CLI or the node refuses it.
func TestClusterQuarantineReleaseRefusesBadInput(t *testing.T) {
	url := fakeAdminReplies(t, func(verb string, body []byte) ([]byte, string) {
		if strings.Contains(string(body), `"n9"`) {
			return []byte(`{"status":404,"error":"member n9 not found"}`), "404"
		}
		return []byte(`{"status":400,"error":"\"topics/orders/0\" is not the path of a copy set aside on n2"}`), "400"
	}, "quarantine", "quarantine-release")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"quarantine", "release", "--path", "x"}, "want --node and --path"},
		{[]string{"quarantine", "release", "--node", "n2"}, "want --node and --path"},
		{[]string{"quarantine", "release", "--node", "n9", "--path", "topics/orders/0.quarantine"}, "member n9 not found (status 404)"},
		{[]string{"quarantine", "release", "--node", "n2", "--path", "topics/orders/0"}, "is not the path of a copy set aside on n2 (status 400)"},
		{[]string{"quarantine", "--node", "n9"}, "member n9 not found (status 404)"},
		{[]string{"quarantine", "stray"}, `unexpected argument "stray"`},
		{[]string{"quarantine", "--path", "x"}, "flag provided but not defined: -path"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			err := runCluster(context.Background(), append(tc.args, "--nats", url, "--cluster", "prod"), &out, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			if out.Len() != 0 {
				t.Fatalf("output: got %q, want none", out.String())
			}
		})
	}
}

// --help prints the subcommand's own usage and is flag.ErrHelp, which main
// turns into exit status 0.
func TestClusterQuarantineHelpPrintsItsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"quarantine", "--help"}, "Usage: narad cluster quarantine [--node ID]"},
		{[]string{"quarantine", "release", "--help"}, "Usage: narad cluster quarantine release --node ID --path REL [--dry-run]"},
	} {
		var errOut bytes.Buffer
		err := runCluster(context.Background(), tc.args, io.Discard, &errOut)
		if !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%q: got %v, want flag.ErrHelp", tc.args, err)
		}
		if !strings.HasPrefix(errOut.String(), tc.want) || !strings.Contains(errOut.String(), "-node") {
			t.Errorf("%q: usage: got %q, want it to start with %q and list --node", tc.args, errOut.String(), tc.want)
		}
	}
	// Asked for, the cluster usage goes to standard output, as topics'
	// and users' do.
	var out bytes.Buffer
	runCluster(context.Background(), []string{"--help"}, &out, io.Discard)
	if !strings.Contains(out.String(), "quarantine release --node ID --path REL") {
		t.Errorf("cluster usage: got %q, want the quarantine commands listed", out.String())
	}
}

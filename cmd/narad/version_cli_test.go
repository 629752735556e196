package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/naradmq/narad/messages"
)

func TestClusterVersionPrintsEachMembersAndFinalizesToWhatAllRead(t *testing.T) {
	at := 1
	var finalized []int
	url := fakeAdminReplies(t, func(verb string, body []byte) ([]byte, string) {
		if verb == "version-finalize" {
			var req messages.FinalizeClusterVersion
			if err := json.Unmarshal(body, &req); err != nil {
				return []byte(`{"error":"bad body"}`), "400"
			}
			finalized = append(finalized, req.Version)
			at = req.Version
		}
		out, _ := json.Marshal(messages.ClusterVersionInfo{Version: at, Finalizable: 2, Newest: 2,
			Members: []messages.MemberVersion{{ID: "n1", Reads: 2}, {ID: "n2", Reads: 2}}})
		return out, ""
	}, "version", "version-finalize")

	var out bytes.Buffer
	if err := runCluster(context.Background(), []string{"version", "--nats", url, "--cluster", "prod"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got, want := fields(out.String()), []string{"cluster version 1 (every member reads 2; this narad reads 2)", "MEMBER READS", "n1 2", "n2 2"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("version: got %q, want %q", got, want)
	}
	if len(finalized) != 0 {
		t.Fatalf("a listing finalized %v, want nothing", finalized)
	}
	out.Reset()
	if err := runCluster(context.Background(), []string{"version", "--finalize", "--nats", url, "--cluster", "prod"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if len(finalized) != 1 || finalized[0] != 2 || !strings.HasPrefix(out.String(), "cluster version 2 ") {
		t.Errorf("finalize: sent %v and printed %q, want version 2 sent and shown", finalized, out.String())
	}
	out.Reset()
	if err := runCluster(context.Background(), []string{"version", "--finalize", "--nats", url, "--cluster", "prod"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if len(finalized) != 1 || !strings.HasPrefix(out.String(), "nothing to finalize") {
		t.Errorf("finalize at the top: sent %v and printed %q, want nothing sent", finalized, out.String())
	}
}

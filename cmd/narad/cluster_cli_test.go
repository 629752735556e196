package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
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
	return fakeAdminReplies(t, func(_ string, body []byte) ([]byte, string) { return answer(body), "" }, verb)
}

func TestMoveRatesAndTimeLeft(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	at := func(s float64, done, bytes int64) moveSample {
		return moveSample{at: t0.Add(time.Duration(s * float64(time.Second))), done: done, bytes: bytes}
	}
	for _, tc := range []struct {
		name      string
		window    []moveSample
		remaining int
		bps       float64
		bpsOK     bool
		eta       time.Duration
		etaOK     bool
	}{
		{"no sample", nil, 10, 0, false, 0, false},
		{"one sample: no rate yet", []moveSample{at(0, 5, 100)}, 10, 0, false, 0, false},
		{"copying, nothing done yet", []moveSample{at(0, 5, 0), at(2, 5, 4<<20)}, 10, 2 << 20, true, 0, false},
		{"two done in 2s, 10 left", []moveSample{at(0, 5, 0), at(2, 7, 2<<20)}, 10, 1 << 20, true, 10 * time.Second, true},
		// The byte rate is the last interval's, the done rate the window's.
		{"rate over the window", []moveSample{at(0, 0, 0), at(1, 6, 10), at(2, 6, 30), at(4, 8, 30)}, 6, 0, true, 3 * time.Second, true},
		{"nothing left", []moveSample{at(0, 0, 0), at(1, 4, 10)}, 0, 10, true, 0, true},
		{"nothing left, no rate", []moveSample{at(0, 4, 10)}, 0, 0, false, 0, true},
		{"no time passed", []moveSample{at(1, 0, 0), at(1, 4, 10)}, 3, 0, false, 0, false},
		{"rounded to the second", []moveSample{at(0, 0, 0), at(1, 3, 0)}, 2, 0, true, time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if bps, ok := bytesPerSecond(tc.window); ok != tc.bpsOK || bps != tc.bps {
				t.Errorf("bytesPerSecond: got %v, %v, want %v, %v", bps, ok, tc.bps, tc.bpsOK)
			}
			if eta, ok := timeLeft(tc.window, tc.remaining); ok != tc.etaOK || eta != tc.eta {
				t.Errorf("timeLeft(%d): got %v, %v, want %v, %v", tc.remaining, eta, ok, tc.eta, tc.etaOK)
			}
		})
	}
}

func TestMoveWatchWindowDropsSamplesBeforeACounterReset(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	var w []moveSample
	for i := range etaWindowSamples + 5 {
		w = addSample(w, moveSample{at: t0.Add(time.Duration(i) * time.Second), done: int64(i), bytes: int64(i)})
	}
	if len(w) != etaWindowSamples || w[0].done != 5 {
		t.Fatalf("window of %d: got %d samples from done %d, want %d from done 5", etaWindowSamples+5, len(w), w[0].done, etaWindowSamples)
	}
	// A node restarted: its counters start again from 0.
	w = addSample(w, moveSample{at: t0.Add(time.Hour), done: 3, bytes: 100})
	if len(w) != 1 || w[0].done != 3 {
		t.Fatalf("after a reset: got %d samples from done %d, want only the new one (done 3)", len(w), w[0].done)
	}
	if _, ok := timeLeft(w, 5); ok {
		t.Fatal("timeLeft right after a reset: got a rate, want none")
	}
}

// A watch prints the summary above the rows, and its rates from one
// redraw to the next.
func TestMovesWatchPrintsASummaryLineWithRates(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	answer := func(done, bytes int64, missing string) []byte {
		s := fmt.Sprintf(`{"moves":[{"topic":"orders","partition":4,"from":"n1","to":"n4"},{"topic":"orders","partition":5,"from":"n1","to":"n4"}],`+
			`"summary":{"done":%d,"in_flight":2,"held":1,"frozen":3,"bytes_copied":%d,"nodes":3%s}}`, done, bytes, missing)
		return []byte(s)
	}
	var mw moveWatch
	for _, tc := range []struct {
		at   time.Duration
		data []byte
		want string
	}{
		{0, answer(10, 0, ""), "done 10, in flight 2, held 1, frozen 3, - MiB/s, eta -"},
		{2 * time.Second, answer(10, 4<<20, ""), "done 10, in flight 2, held 1, frozen 3, 2.0 MiB/s, eta -"},
		{4 * time.Second, answer(14, 6<<20, `,"missing":["n3"]`), "done 14, in flight 2, held 1, frozen 3, 1.0 MiB/s, eta 2s (without n3: no answer)"},
	} {
		mw.now = t0.Add(tc.at)
		var out bytes.Buffer
		if err := printMoves(&out, "narad.prod.admin.moves", tc.data, &mw); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if lines[0] != tc.want {
			t.Errorf("at %v: got %q, want %q", tc.at, lines[0], tc.want)
		}
		if len(lines) != 4 || !strings.HasPrefix(lines[1], "TOPIC") {
			t.Errorf("at %v: got %q, want the summary, the header and two rows", tc.at, lines)
		}
	}
}

func TestClusterMovesAsksForTheSummary(t *testing.T) {
	var asked string
	url := fakeAdminFunc(t, "moves", func(body []byte) []byte {
		asked = string(body)
		return []byte(`{"moves":[],"summary":{"done":7,"in_flight":0,"held":0,"frozen":0,"bytes_copied":0,"nodes":1}}`)
	})
	var out, errOut bytes.Buffer
	if err := runCluster(context.Background(), []string{"moves", "--nats", url, "--cluster", "prod"}, &out, &errOut); err != nil {
		t.Fatalf("cluster moves: %v (%s)", err, errOut.String())
	}
	if !sameJSON(asked, `{"detail":false,"summary":true}`) {
		t.Errorf("request: got %s, want the summary asked for", asked)
	}
	want := "done 7, in flight 0, held 0, frozen 0, - MiB/s, eta 0s\nno moves: every partition is where the placement wants it\n"
	if out.String() != want {
		t.Errorf("output: got %q, want %q", out.String(), want)
	}
}

// An answer that says no exits non-zero though it came without an error
// status: a refused decommission verdict, an abort that left the move or
// could not tell. The answer is still printed.
func TestClusterRefusedAnswersExitNonZero(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		verb    string
		answer  string
		wantErr string // "" for success
	}{
		{[]string{"decommission", "n2", "--dry-run"}, "decommission", `{"member":"n2","verdict":"refused","reason":"last voter"}`, "refused: last voter"},
		{[]string{"decommission", "n2"}, "decommission", `{"member":"n2","verdict":"draining","owned_partitions":3}`, ""},
		{[]string{"moves", "abort", "orders", "4"}, "moves-abort", `{"topic":"orders","partition":4,"owner":"n1","result":"refused","error":"the move targets n5"}`, "refused: the move targets n5"},
		{[]string{"moves", "abort", "orders", "4"}, "moves-abort", `{"topic":"orders","partition":4,"result":"not_found"}`, "not_found"},
		{[]string{"moves", "abort", "orders", "4"}, "moves-abort", `{"topic":"orders","partition":4,"result":"unknown"}`, "unknown"},
		{[]string{"moves", "abort", "orders", "4"}, "moves-abort", `{"topic":"orders","partition":4,"owner":"n1","result":"no_move"}`, ""},
	} {
		t.Run(tc.answer, func(t *testing.T) {
			url := fakeAdmin(t, tc.verb, tc.answer)
			var out bytes.Buffer
			err := runCluster(context.Background(), append(tc.args, "--nats", url, "--cluster", "prod"), &out, io.Discard)
			if tc.wantErr == "" {
				if code := exitCode(err); code != 0 {
					t.Fatalf("exit code: got %d (%v), want 0", code, err)
				}
				return
			}
			if code := exitCode(err); code == 0 || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got exit %d, error %v; want non-zero with %q", code, err, tc.wantErr)
			}
			if !strings.Contains(out.String(), `"orders"`) && !strings.Contains(out.String(), `"n2"`) {
				t.Fatalf("output: got %q, want the answer printed", out.String())
			}
		})
	}
}

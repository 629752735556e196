package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/naradmq/narad/messages"
)

// produce --lines sends each line of its input as a message through the
// batch route, names the lines the broker refused and exits 1 for them;
// consume --batch --ack leases them in batches and acks each batch, and
// every message comes back exactly as its line was, JSON, text or
// spaced JSON alike.
func TestProduceLinesAndConsumeBatchOnANode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	base := securedNode(t)
	as := []string{"--server", base, "--user", "admin", "--password", "rootpw"}
	if _, err := narad(t, append([]string{"topics", "create", "lines", "--partitions", "3"}, as...)...); err != nil {
		t.Fatal(err)
	}
	lines := []string{`{"n":1}`, "plain text", "", `{ "spaced": true }`, `[1,2,3]`}
	for i := range 40 {
		lines = append(lines, `{"i":`+strings.Repeat("1", i%5+1)+`}`)
	}
	input := strings.Join(lines, "\n") + "\n"
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"produce", "lines", "--lines", "--batch", "7"}, as...), strings.NewReader(input), &out, &errOut)
	if err != nil || out.String() != "44 messages accepted\n" {
		t.Fatalf("produce --lines: got %q (%v; stderr %q), want 44 messages accepted", out.String(), err, errOut.String())
	}

	out.Reset()
	err = run(context.Background(), append([]string{"consume", "lines", "--batch", "10", "--count", "100", "--ack", "--wait", "1s"}, as...), strings.NewReader(""), &out, io.Discard)
	if err != nil {
		t.Fatalf("consume --batch: %v", err)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m messages.MessageInfo
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("consume --batch printed %q: %v", l, err)
		}
		body := string(m.Payload)
		var s string
		if json.Unmarshal(m.Payload, &s) == nil {
			body = s // a text body comes back as a JSON string
		}
		got = append(got, body)
	}
	want := map[string]int{}
	for _, l := range lines {
		if l != "" {
			want[l]++
		}
	}
	// JSON comes back compacted (the contract's consume embeds it so).
	want[`{"spaced":true}`] = want[`{ "spaced": true }`]
	delete(want, `{ "spaced": true }`)
	for _, b := range got {
		want[b]--
	}
	for b, n := range want {
		if n != 0 {
			t.Fatalf("consume --batch: %q came back %d times too few (got %q)", b, n, got)
		}
	}
	out.Reset()
	var errOut2 bytes.Buffer
	if err := run(context.Background(), append([]string{"consume", "lines", "--batch", "5", "--wait", "0s"}, as...), strings.NewReader(""), &out, &errOut2); err != nil || errOut2.String() != "no message\n" {
		t.Fatalf("consume --batch after every message was acked: got %q %q (%v), want no message", out.String(), errOut2.String(), err)
	}

	// A line the broker refuses (a schema topic, a line that is not JSON)
	// is named, and fails the command; the others are accepted.
	schema := t.TempDir() + "/schema.json"
	if err := os.WriteFile(schema, []byte(`{"type":"object"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := narad(t, append([]string{"topics", "create", "strict", "--schema", schema}, as...)...); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errOut.Reset()
	err = run(context.Background(), append([]string{"produce", "strict", "--lines"}, as...), strings.NewReader("{\"a\":1}\nnot json\n{\"b\":2}\n"), &out, &errOut)
	if err == nil || out.String() != "2 messages accepted\n" || !strings.Contains(errOut.String(), "line 2: 400 invalid argument") {
		t.Fatalf("produce --lines with a refused line: got %q, stderr %q, %v; want 2 accepted and line 2 named", out.String(), errOut.String(), err)
	}
}

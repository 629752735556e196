package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"testing"
)

// Every command's --help (and -h) exits 0 and prints that command's own
// usage line and flags, not its parent's nor an error.
func TestEveryHelpExitsZeroWithItsOwnUsage(t *testing.T) {
	for _, tc := range []struct {
		args    []string // the command, before --help
		usage   string   // what its usage line names
		hasFlag string   // a flag only this command takes ("" for none)
		notFlag string   // a sibling's flag it must not list ("" for none)
	}{
		{nil, "narad: a queue-first message broker", "", ""},
		{[]string{"dev"}, "narad dev", "-fresh", ""},
		{[]string{"serve"}, "narad serve", "", ""},
		{[]string{"nats"}, "narad nats", "", ""},
		{[]string{"cert"}, "narad cert <command>", "", ""},
		{[]string{"cert", "create-ca"}, "narad cert create-ca", "-ca-key", "-name"},
		{[]string{"cert", "create-node"}, "narad cert create-node", "-name", ""},
		{[]string{"cert", "list"}, "narad cert list", "-dir", "-overwrite"},
		{[]string{"topics"}, "narad topics <command>", "", ""},
		{[]string{"topics", "create"}, "narad topics create", "--partitions", ""},
		{[]string{"topics", "list"}, "narad topics list", "", ""},
		{[]string{"topics", "get"}, "narad topics get", "", ""},
		{[]string{"topics", "delete"}, "narad topics delete", "", ""},
		{[]string{"topics", "attach"}, "narad topics attach", "", ""},
		{[]string{"topics", "children"}, "narad topics children", "", ""},
		{[]string{"topics", "detach"}, "narad topics detach", "", ""},
		{[]string{"produce"}, "narad produce", "--file", ""},
		{[]string{"consume"}, "narad consume", "--ack", ""},
		{[]string{"bench"}, "narad bench", "--concurrency", "--ack"},
		{[]string{"users"}, "narad users <command>", "", ""},
		{[]string{"users", "create"}, "narad users create", "-new-password", "-current-password"},
		{[]string{"users", "list"}, "narad users list", "-server", "-grant"},
		{[]string{"users", "grant"}, "narad users grant", "-grant", "-new-password"},
		{[]string{"users", "passwd"}, "narad users passwd", "-current-password", "-grant"},
		{[]string{"users", "delete"}, "narad users delete", "-server", "-grant"},
		{[]string{"cluster"}, "narad cluster <command>", "-nats", "-dry-run"},
		{[]string{"cluster", "members"}, "narad cluster members", "-nats", "-watch"},
		{[]string{"cluster", "status"}, "narad cluster status", "-nats", "-watch"},
		{[]string{"cluster", "topics"}, "narad cluster topics", "-nats", "-watch"},
		{[]string{"cluster", "moves"}, "narad cluster moves [", "-watch", "-dry-run"},
		{[]string{"cluster", "moves", "abort"}, "narad cluster moves abort", "-target", "-watch"},
		{[]string{"cluster", "decommission"}, "narad cluster decommission", "-dry-run", "-watch"},
		{[]string{"cluster", "quarantine"}, "narad cluster quarantine [", "-node", "-path"},
		{[]string{"cluster", "quarantine", "release"}, "narad cluster quarantine release", "-path", "-watch"},
	} {
		for _, help := range []string{"--help", "-h"} {
			args := append(append([]string(nil), tc.args...), help)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				var out, errOut bytes.Buffer
				err := run(context.Background(), args, strings.NewReader(""), &out, &errOut)
				if code := exitCode(err); code != 0 {
					t.Fatalf("exit code: got %d (%v), want 0", code, err)
				}
				text := out.String() + errOut.String()
				first, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
				if !strings.Contains(first, tc.usage) {
					t.Fatalf("first line: got %q, want it to name %q", first, tc.usage)
				}
				if strings.Contains(text, "unknown subcommand") || strings.Contains(text, "unknown command") {
					t.Fatalf("help: got %q, want no complaint", text)
				}
				if tc.hasFlag != "" && !strings.Contains(text, tc.hasFlag) {
					t.Fatalf("help of %q: want flag %s listed, got none", first, tc.hasFlag)
				}
				if tc.notFlag != "" && strings.Contains(text, tc.notFlag+" ") {
					t.Fatalf("help of %q: got flag %s (another command's), want none", first, tc.notFlag)
				}
			})
		}
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// A refused connection names the likely cause and the address tried, for
// the HTTP commands and the NATS ones alike.
func TestARefusedConnectionAsksWhetherTheBrokerRunsThere(t *testing.T) {
	addr := closedAddr(t)
	for _, args := range [][]string{
		{"topics", "list", "--server", "http://" + addr},
		{"produce", "orders", "hi", "--server", "http://" + addr},
		{"users", "list", "--server", "http://" + addr},
		{"cluster", "members", "--nats", "nats://" + addr},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			err := withConnectionHint(run(context.Background(), args, strings.NewReader(""), io.Discard, io.Discard))
			if err == nil || !strings.Contains(err.Error(), "is narad dev") || !strings.Contains(err.Error(), addr) {
				t.Fatalf("got %v, want it to ask whether narad dev runs at %s", err, addr)
			}
		})
	}
}

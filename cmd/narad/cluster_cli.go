package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/naradmq/narad/cluster/transport"
)

const clusterUsage = `Usage: narad cluster members|status|topics|moves [flags]

Asks the cluster over NATS admin request/reply (narad.<cluster>.admin.<verb>);
any node answers. members, topics and moves print a table (--json for the
answer as it came), status prints JSON.

Flags:
`

// runCluster is `narad cluster members|status|topics|moves`.
func runCluster(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("nats", env("NARAD_NATS", "nats://127.0.0.1:4222"), "NATS URL (NARAD_NATS)")
	cluster := fs.String("cluster", env("NARAD_CLUSTER", "narad"), "cluster name (NARAD_CLUSTER)")
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for an answer")
	fs.Usage = func() {
		fmt.Fprint(stderr, clusterUsage)
		fs.PrintDefaults()
	}
	if len(args) == 0 {
		fs.Usage()
		return errors.New("cluster: want members, status, topics or moves")
	}
	verb := args[0]
	if verb != "members" && verb != "status" && verb != "topics" && verb != "moves" {
		fs.Usage()
		return fmt.Errorf("cluster: unknown subcommand %q", verb)
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	subject, err := transport.AdminSubject(*cluster, verb)
	if err != nil {
		return err
	}
	nc, err := nats.Connect(*url, nats.Timeout(*timeout))
	if err != nil {
		return fmt.Errorf("connect to %s: %w", *url, err)
	}
	defer nc.Close()
	rctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	msg, err := nc.RequestWithContext(rctx, subject, []byte("{}"))
	if err != nil {
		return fmt.Errorf("%s: %w", subject, err)
	}
	if *asJSON || verb == "status" {
		var out bytes.Buffer
		if err := json.Indent(&out, msg.Data, "", "  "); err != nil {
			return fmt.Errorf("%s answered %q: %w", subject, msg.Data, err)
		}
		fmt.Fprintln(stdout, out.String())
		return nil
	}
	switch verb {
	case "topics":
		return printTopics(stdout, subject, msg.Data)
	case "moves":
		return printMoves(stdout, subject, msg.Data)
	}
	var reply struct {
		Members []struct {
			ID              string `json:"id"`
			Addr            string `json:"addr"`
			Status          string `json:"status"`
			Draining        bool   `json:"draining"`
			OwnedPartitions int    `json:"owned_partitions"`
			OutboundMoves   int    `json:"outbound_moves"`
			Leaving         bool   `json:"leaving"`
			Role            string `json:"role"`
		} `json:"members"`
	}
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		return fmt.Errorf("%s answered %q: %w", subject, msg.Data, err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tADDR\tSTATUS\tROLE\tDRAINING\tLEAVING\tPARTITIONS\tMOVES OUT")
	for _, m := range reply.Members {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%v\t%d\t%d\n", m.ID, m.Addr, m.Status, m.Role, m.Draining, m.Leaving, m.OwnedPartitions, m.OutboundMoves)
	}
	return tw.Flush()
}

// printTopics prints the admin "topics" answer as a table.
func printTopics(w io.Writer, subject string, data []byte) error {
	var reply struct {
		Topics []struct {
			Name        string         `json:"name"`
			Partitions  int            `json:"partitions"`
			RetentionMs int64          `json:"retention_ms"`
			Incarnation uint64         `json:"incarnation"`
			Owners      map[string]int `json:"owners"`
			Unplaced    int            `json:"unplaced"`
		} `json:"topics"`
	}
	if err := json.Unmarshal(data, &reply); err != nil {
		return fmt.Errorf("%s answered %q: %w", subject, data, err)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPARTITIONS\tRETENTION\tINCARNATION\tOWNERS\tUNPLACED")
	for _, t := range reply.Topics {
		owners := make([]string, 0, len(t.Owners))
		for _, id := range slices.Sorted(maps.Keys(t.Owners)) {
			owners = append(owners, fmt.Sprintf("%s=%d", id, t.Owners[id]))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%d\n", t.Name, t.Partitions, time.Duration(t.RetentionMs)*time.Millisecond,
			t.Incarnation, strings.Join(owners, " "), t.Unplaced)
	}
	return tw.Flush()
}

// printMoves prints the admin "moves" answer as a table.
func printMoves(w io.Writer, subject string, data []byte) error {
	var reply struct {
		Moves []struct {
			Topic     string `json:"topic"`
			Partition int    `json:"partition"`
			From      string `json:"from"`
			To        string `json:"to"`
		} `json:"moves"`
	}
	if err := json.Unmarshal(data, &reply); err != nil {
		return fmt.Errorf("%s answered %q: %w", subject, data, err)
	}
	if len(reply.Moves) == 0 {
		fmt.Fprintln(w, "no moves: every partition is where the placement wants it")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tFROM\tTO")
	for _, m := range reply.Moves {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", m.Topic, m.Partition, m.From, m.To)
	}
	return tw.Flush()
}

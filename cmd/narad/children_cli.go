package main

import (
	"context"
	"encoding/json"

	"fmt"
	"io"
	"time"

	"github.com/naradmq/narad/messages"
)

// The fan-out commands of `narad topics`: attach, children, detach.

const topicsAttachUsage = `usage: narad topics attach [flags] <parent> <child>

Make <child> a fan-out child of <parent>: every message committed to the
parent from now on is copied to the child, with its key. Prints the
parent's record as JSON.

Flags:
  --server URL       broker URL (default $NARAD_SERVER, else ` + defaultServer + `)
  --user NAME        username for HTTP Basic (default $NARAD_USER)
  --password PW      its password (default $NARAD_PASSWORD)
  --context NAME     saved context to connect with (default $NARAD_CONTEXT; narad ctx)
  --delay DURATION   copy each message once this long has passed since the
                     parent committed it, e.g. 10m (the parent's retention
                     must be at least the delay + 1h)
`

const topicsChildrenUsage = `usage: narad topics children [flags] <parent>

List a parent's fan-out children with their lag (messages committed to the
parent and not yet copied; "partial" when not every partition answered).

Flags:
  --server URL   broker URL (default $NARAD_SERVER, else ` + defaultServer + `)
  --user NAME    username for HTTP Basic (default $NARAD_USER)
  --password PW  its password (default $NARAD_PASSWORD)
  --context NAME saved context to connect with (default $NARAD_CONTEXT; narad ctx)
  --json         print the broker's answer as JSON instead of a table
`

const topicsDetachUsage = `usage: narad topics detach [flags] <parent> <child>

Stop copying <parent>'s messages to <child>. The child keeps what it has.

Flags:
  --server URL   broker URL (default $NARAD_SERVER, else ` + defaultServer + `)
  --user NAME    username for HTTP Basic (default $NARAD_USER)
  --password PW  its password (default $NARAD_PASSWORD)
  --context NAME saved context to connect with (default $NARAD_CONTEXT; narad ctx)
`

func runTopicsAttach(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newCommandFlags("topics attach", topicsAttachUsage, stderr)
	server := serverFlag(fs)
	delay := fs.Duration("delay", 0, "fan-out delay")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageErr(fs, "want a parent and a child, got %d arguments", len(pos))
	}
	var delayMs *int64
	if wasSet(fs)["delay"] {
		ms, err := durationMs("delay", *delay)
		if err != nil {
			return usageErr(fs, "%v", err)
		}
		delayMs = &ms
	}
	c, err := connect(fs, *server)
	if err != nil {
		return err
	}
	rec, err := c.AttachChild(ctx, pos[0], pos[1], delayMs)
	if err != nil {
		return err
	}
	return printIndented(stdout, rec)
}

func runTopicsChildren(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newCommandFlags("topics children", topicsChildrenUsage, stderr)
	server := serverFlag(fs)
	asJSON := fs.Bool("json", false, "JSON output")
	parent, c, err := parseTopicCommand(fs, server, args)
	if err != nil {
		return err
	}
	l, err := c.Children(ctx, parent)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(l)
	}
	return printChildren(stdout, l)
}

func printChildren(w io.Writer, l messages.ChildList) error {
	tw := newTable(w, "CHILD\tDELAY\tLAG")
	for _, ch := range l.Children {
		lag := fmt.Sprint(ch.LagMessages)
		if !ch.LagComplete {
			lag += " (partial)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", ch.Name, time.Duration(ch.DelayMs)*time.Millisecond, lag)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("topics children: write: %w", err)
	}
	return nil
}

func runTopicsDetach(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newCommandFlags("topics detach", topicsDetachUsage, stderr)
	server := serverFlag(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageErr(fs, "want a parent and a child, got %d arguments", len(pos))
	}
	c, err := connect(fs, *server)
	if err != nil {
		return err
	}
	if err := c.DetachChild(ctx, pos[0], pos[1]); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "detached %s from %s\n", pos[1], pos[0])
	return nil
}

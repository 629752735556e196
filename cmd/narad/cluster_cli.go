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
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

const clusterUsage = `Usage: narad cluster <command> [flags]

Commands (over NATS admin request/reply, narad.<cluster>.admin.<verb>; any
node answers):
  members                          members, their role and partitions
  status                           metadata leader, each shard's leader (JSON)
  topics                           topics, owners and unplaced partitions
  moves [--detail] [--watch D]     partitions being moved under a summary line
                                   (done, in flight, held, frozen, MiB/s, eta);
                                   --detail adds each destination's progress,
                                   --watch redraws every D (the rates need two)
  moves abort <topic> <partition> [--target ID]
                                   give up on a move (202 when it is gone)
  decommission <id> [--dry-run] [--cancel]
                                   drain a member and remove it from the cluster
  forget <id> --accept-data-loss [--dry-run]
                                   a dead member whose disk is lost for good:
                                   its partitions start again empty on live
                                   nodes (its records are gone) and it leaves
  version [--finalize]             the cluster version (the formats nodes write)
                                   and what each member reads; --finalize moves
                                   it to the highest every member reads, once
                                   a rolling upgrade is done
  quarantine [--node ID]           the copies each node set aside (may hold the
                                   only copy of some records), with totals
  quarantine release --node ID --path REL [--dry-run]
                                   remove one of them for good

Flags of every command ("narad cluster <command> --help" for its own):
`

// clusterVerbUsage is each verb's own help, by the verb it asks.
var clusterVerbUsage = map[string]string{
	"members": `Usage: narad cluster members [flags]

Lists the members: address, status, role, whether draining or leaving, the
partitions each owns and the moves out of it.

Flags:
`,
	"status": `Usage: narad cluster status [flags]

Prints the metadata leader and each shard's leader, as JSON.

Flags:
`,
	"topics": `Usage: narad cluster topics [flags]

Lists the topics with their owners and the partitions no member holds.

Flags:
`,
	"moves": `Usage: narad cluster moves [--detail] [--watch D] [flags]

Lists the partitions being moved under a summary line (done, in flight,
held, frozen, MiB/s, eta). The rates need two answers, so --watch.
"narad cluster moves abort --help" tells how to give up a move.

Flags:
`,
	"moves-abort": `Usage: narad cluster moves abort <topic> <partition> [--target ID] [flags]

Gives up on the move of one partition; the owner stays. Exits non-zero
unless the move is gone (aborted) or there was none.

Flags:
`,
	"decommission": `Usage: narad cluster decommission <id> [--dry-run] [--cancel] [flags]

Drains a member, then removes it from the cluster. --dry-run only asks
whether it may; a refused verdict exits non-zero with the reason.

Flags:
`,
	"forget": `Usage: narad cluster forget <id> --accept-data-loss [--dry-run] [flags]

For a dead member whose disk is lost for good. Its partitions start again,
empty, on the live members: every record only it held is gone, and a
consumer finds the partitions' offsets jump past everything it saw there.
Then it leaves the Raft configuration, once the voters allow (a 3-voter
cluster needs a new node to join first). Refused for a live member
(decommission it instead). Nothing happens without --accept-data-loss;
--dry-run says what would.

Flags:
`,
	"version": `Usage: narad cluster version [--finalize] [flags]

Shows the cluster version, the formats every node writes, and the newest
each member reads. A rolling upgrade leaves it where it was, so that an
older node can still read everything; once every member runs the new
narad, --finalize moves it to the highest every member reads (refused
while one reads less). It never moves back.

Flags:
`,
}

// clusterFlags are the flags of every cluster command.
type clusterFlags struct {
	url, cluster *string
	auth         *transport.Auth
	asJSON       *bool
	timeout      *time.Duration
}

// newClusterFlags registers the flags every cluster command takes on a
// flag set whose usage is usage followed by its flags.
func newClusterFlags(name, usage string, w io.Writer) (*flag.FlagSet, clusterFlags) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {
		fmt.Fprint(w, usage)
		fs.PrintDefaults()
	}
	contextFlag(fs)
	return fs, clusterFlags{
		url:     fs.String("nats", env("NARAD_NATS", defaultNATS), "NATS URL (NARAD_NATS)"),
		cluster: fs.String("cluster", env("NARAD_CLUSTER", "narad"), "cluster name (NARAD_CLUSTER)"),
		auth:    adminAuthFlags(fs),
		asJSON:  fs.Bool("json", false, "print the answer as JSON"),
		timeout: fs.Duration("timeout", 5*time.Second, "how long to wait for an answer (a node gives a verb at most its --max-admin-timeout, 30s by default)"),
	}
}

// parsedCluster is after a cluster command's flags were parsed: the saved
// context fills --nats and --nats-creds where neither a flag nor a
// variable did.
func parsedCluster(fs *flag.FlagSet) error {
	if err := applyContext(fs); err != nil {
		return fmt.Errorf("%s: %w", fs.Name(), err)
	}
	return nil
}

// defaultNATS is where the cluster commands look for NATS: the port
// narad dev's embedded server listens on unless told otherwise.
const defaultNATS = "nats://127.0.0.1:4222"

func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

// runCluster is `narad cluster ...`. Asked for help, it prints the usage
// and returns an error matching flag.ErrHelp.
func runCluster(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || isHelp(args[0]) {
		w, err := stderr, error(errors.New("cluster: want members, status, topics, moves, decommission, forget, version or quarantine"))
		if len(args) > 0 {
			w, err = stdout, flag.ErrHelp
		}
		fs, _ := newClusterFlags("cluster", clusterUsage, w)
		fs.Usage()
		return err
	}
	verb, rest := args[0], args[1:]
	if verb == "quarantine" {
		return runQuarantine(ctx, rest, stdout, stderr)
	}
	if verb == "moves" && len(rest) > 0 && rest[0] == "abort" {
		verb, rest = "moves-abort", rest[1:]
	}
	usage, ok := clusterVerbUsage[verb]
	if !ok {
		fmt.Fprint(stderr, clusterUsage)
		return fmt.Errorf("cluster: unknown subcommand %q", verb)
	}
	name := "cluster " + strings.Replace(verb, "-", " ", 1)
	fs, cf := newClusterFlags(name, usage, stderr)
	var detail, dryRun, cancelDrain, finalize, acceptLoss *bool
	var watch *time.Duration
	var target *string
	switch verb {
	case "moves":
		detail = fs.Bool("detail", false, "add each destination's progress")
		watch = fs.Duration("watch", 0, "redraw every this long until interrupted (0: once)")
	case "moves-abort":
		target = fs.String("target", "", "only if the move targets this node")
	case "decommission":
		dryRun = fs.Bool("dry-run", false, "report the verdict, change nothing")
		cancelDrain = fs.Bool("cancel", false, "cancel draining")
	case "version":
		finalize = fs.Bool("finalize", false, "move the cluster version to the highest every member reads")
	case "forget":
		dryRun = fs.Bool("dry-run", false, "report the verdict, change nothing")
		acceptLoss = fs.Bool("accept-data-loss", false, "go on although every record only this member held is lost")
	}
	positional, err := parseInterspersed(fs, rest)
	if err != nil {
		return err
	}
	if err := parsedCluster(fs); err != nil {
		return err
	}
	body := []byte("{}")
	switch verb {
	case "members", "status", "topics", "version":
		if len(positional) > 0 {
			return usageErr(fs, "unexpected argument %q", positional[0])
		}
	case "moves":
		if len(positional) > 0 {
			return usageErr(fs, "unexpected argument %q", positional[0])
		}
		body, _ = json.Marshal(messages.MovesRequest{Detail: *detail, Summary: true})
	case "moves-abort":
		if len(positional) != 2 {
			return errors.New("cluster moves abort: want <topic> <partition>")
		}
		p, err := strconv.Atoi(positional[1])
		if err != nil || p < 0 {
			return fmt.Errorf("cluster moves abort: partition %q is not a partition number", positional[1])
		}
		body, _ = json.Marshal(messages.AbortMoveRequest{Topic: positional[0], Partition: p, Target: *target})
	case "decommission":
		if len(positional) != 1 {
			return errors.New("cluster decommission: want <member id>")
		}
		body, _ = json.Marshal(messages.DecommissionRequest{ID: positional[0], DryRun: *dryRun, Cancel: *cancelDrain})
	case "forget":
		if len(positional) != 1 {
			return errors.New("cluster forget: want <member id>")
		}
		if !*dryRun && !*acceptLoss {
			return fmt.Errorf("cluster forget %s: every record only %s held is lost: pass --accept-data-loss to go on, or --dry-run to see what it would do", positional[0], positional[0])
		}
		body, _ = json.Marshal(messages.ForgetRequest{ID: positional[0], DryRun: *dryRun, AcceptDataLoss: *acceptLoss})
	}
	nc, subject, err := dialAdmin(*cf.url, *cf.cluster, verb, *cf.timeout, *cf.auth)
	if err != nil {
		return err
	}
	defer nc.Close()
	if verb == "version" && *finalize {
		return finalizeVersion(ctx, nc, subject, *cf.timeout, *cf.asJSON, stdout)
	}
	var watched moveWatch
	for {
		data, err := adminRequest(ctx, nc, subject, body, *cf.timeout)
		if err != nil {
			return err
		}
		watched.now = time.Now()
		if err := printAnswer(stdout, verb, subject, data, *cf.asJSON, &watched); err != nil {
			return err
		}
		if err := refusal(verb, subject, data); err != nil {
			return err
		}
		if verb != "moves" || *watch <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(*watch):
			fmt.Fprintln(stdout)
		}
	}
}

// refusal is the error of an answer that says no: a refused decommission
// verdict, or an abort that left a move in place or could not tell. The
// answer came back without an error status, yet a script must see that
// nothing happened by the exit code.
func refusal(verb, subject string, data []byte) error {
	switch verb {
	case "decommission":
		r, err := decodeAnswer[messages.DecommissionReply](subject, data)
		if err != nil {
			return err
		}
		if r.Verdict == "refused" {
			return fmt.Errorf("%s: decommission of %s refused: %s", subject, r.Member, r.Reason)
		}
	case "forget":
		r, err := decodeAnswer[messages.ForgetReply](subject, data)
		if err != nil {
			return err
		}
		if r.Verdict == "refused" {
			return fmt.Errorf("%s: forget of %s refused: %s", subject, r.Member, r.Reason)
		}
	case "moves-abort":
		r, err := decodeAnswer[messages.AbortMoveReply](subject, data)
		if err != nil {
			return err
		}
		switch r.Result {
		case "aborted", "no_move":
		default:
			why := r.Error
			if why == "" {
				why = "no reason given"
			}
			return fmt.Errorf("%s: abort of %s/%d %s: %s", subject, r.Topic, r.Partition, r.Result, why)
		}
	}
	return nil
}

// adminRequest sends one admin request and returns the answer's body; an
// error reply (the Narad-Status header) becomes an error naming it.
func adminRequest(ctx context.Context, nc *nats.Conn, subject string, body []byte, timeout time.Duration) ([]byte, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The budget travels with the request, so that a node that asks the
	// other members for its answer gives up on a silent one in time.
	req := &nats.Msg{Subject: subject, Data: body, Header: nats.Header{}}
	req.Header.Set(messages.HeaderTimeoutMs, strconv.FormatInt(timeout.Milliseconds(), 10))
	msg, err := nc.RequestMsgWithContext(rctx, req)
	if err != nil {
		if le := nc.LastError(); errors.Is(le, nats.ErrPermissionViolation) {
			return nil, fmt.Errorf("%s: these NATS credentials may not call it (the mutating verbs need admin.nk): %w", subject, le)
		}
		return nil, fmt.Errorf("%s: %w", subject, err)
	}
	if st := msg.Header.Get(messages.HeaderStatus); st != "" {
		var er messages.ErrorReply
		if json.Unmarshal(msg.Data, &er) == nil && er.Error != "" {
			return nil, fmt.Errorf("%s: %s (status %s)", subject, er.Error, st)
		}
		return nil, fmt.Errorf("%s: status %s: %s", subject, st, msg.Data)
	}
	return msg.Data, nil
}

// printAnswer prints one answer; mw carries a --watch's earlier summaries.
func printAnswer(w io.Writer, verb, subject string, data []byte, asJSON bool, mw *moveWatch) error {
	if asJSON || verb == "status" || verb == "moves-abort" || verb == "decommission" || verb == "forget" {
		var out bytes.Buffer
		if err := json.Indent(&out, data, "", "  "); err != nil {
			return fmt.Errorf("%s answered %q: %w", subject, data, err)
		}
		fmt.Fprintln(w, out.String())
		return nil
	}
	switch verb {
	case "topics":
		return printTopics(w, subject, data)
	case "moves":
		return printMoves(w, subject, data, mw)
	case "version":
		return printVersion(w, subject, data)
	}
	return printMembers(w, subject, data)
}

// finalizeVersion asks the "version" verb what every member reads and,
// when that is above the cluster version, asks "version-finalize" to move
// it there; it prints the listing after (or as it is, when there is
// nothing to move).
func finalizeVersion(ctx context.Context, nc *nats.Conn, subject string, timeout time.Duration, asJSON bool, w io.Writer) error {
	data, err := adminRequest(ctx, nc, subject, []byte("{}"), timeout)
	if err != nil {
		return err
	}
	info, err := decodeAnswer[messages.ClusterVersionInfo](subject, data)
	if err != nil {
		return err
	}
	if info.Finalizable > info.Version {
		body, _ := json.Marshal(messages.FinalizeClusterVersion{Version: info.Finalizable})
		if data, err = adminRequest(ctx, nc, subject+"-finalize", body, timeout); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(w, "nothing to finalize: the cluster is at version %d and some member reads no more\n", info.Version)
	}
	return printAnswer(w, "version", subject, data, asJSON, nil)
}

// printVersion prints the admin "version" answer: the cluster version,
// then each member's.
func printVersion(w io.Writer, subject string, data []byte) error {
	info, err := decodeAnswer[messages.ClusterVersionInfo](subject, data)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "cluster version %d (every member reads %d; this narad reads %d)\n", info.Version, info.Finalizable, info.Newest)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tREADS")
	for _, m := range info.Members {
		fmt.Fprintf(tw, "%s\t%d\n", m.ID, m.Reads)
	}
	return tw.Flush()
}

// printMembers prints the admin "members" answer as a table.
func printMembers(w io.Writer, subject string, data []byte) error {
	reply, err := decodeAnswer[messages.AdminMemberList](subject, data)
	if err != nil {
		return err
	}
	tw := newTable(w, "ID\tADDR\tSTATUS\tROLE\tDRAINING\tLEAVING\tPARTITIONS\tMOVES OUT")
	for _, m := range reply.Members {
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%v\t%v\t%d\t%d", m.ID, m.Addr, m.Status, m.Role, m.Draining, m.Leaving, m.OwnedPartitions, m.OutboundMoves)
		if m.Lost {
			line += "\tforgotten: its disk is lost"
		}
		if m.DecommissionBlocked != "" {
			line += "\tdecommission blocked: " + m.DecommissionBlocked
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// printTopics prints the admin "topics" answer as a table.
func printTopics(w io.Writer, subject string, data []byte) error {
	reply, err := decodeAnswer[messages.AdminTopicList](subject, data)
	if err != nil {
		return err
	}
	tw := newTable(w, "NAME\tPARTITIONS\tRETENTION\tINCARNATION\tOWNERS\tUNPLACED")
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

// printMoves prints the admin "moves" answer as a table, with each
// destination's progress when it came with the answer, under the summary
// line when the node sent one (an older node does not).
func printMoves(w io.Writer, subject string, data []byte, mw *moveWatch) error {
	reply, err := decodeAnswer[messages.MoveList](subject, data)
	if err != nil {
		return err
	}
	if s := reply.Summary; s != nil {
		fmt.Fprintln(w, mw.line(*s))
	}
	if len(reply.Moves) == 0 {
		fmt.Fprintln(w, "no moves: every partition is where the placement wants it")
		return nil
	}
	tw := newTable(w, "TOPIC\tPARTITION\tFROM\tTO\tSIDES\tBLOCKED\tPROGRESS")
	for _, m := range reply.Moves {
		sides := m.FromStatus + "/" + m.ToStatus
		if sides == "/" {
			sides = "-"
		}
		blocked := strings.Join(m.Blocked, ",")
		if blocked == "" {
			blocked = "-"
		}
		progress := "-"
		if p := m.Progress; p != nil {
			progress = fmt.Sprintf("%s pass %d, %s of %s", p.Phase, p.Pass, mib(p.BytesCopied), mib(p.BytesListed))
			if p.FrozenMs > 0 {
				progress += fmt.Sprintf(", frozen %dms", p.FrozenMs)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", m.Topic, m.Partition, m.From, m.To, sides, blocked, progress)
	}
	return tw.Flush()
}

// decodeAnswer decodes an admin answer. One that does not decode is quoted
// in the error: the node may run another version than the CLI.
func decodeAnswer[T any](subject string, data []byte) (T, error) {
	var reply T
	if err := json.Unmarshal(data, &reply); err != nil {
		return reply, fmt.Errorf("%s answered %q: %w", subject, data, err)
	}
	return reply, nil
}

// newTable starts a table of tab-separated columns under header, aligned
// when the caller flushes it; every table the CLI prints looks the same.
func newTable(w io.Writer, header string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	return tw
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// moveSample is one summary of a watch, at the time its answer arrived.
type moveSample struct {
	at          time.Time
	done, bytes int64
}

// etaWindowSamples bounds the summaries a watch keeps to estimate the time
// left: the rate is the recent one (the last dozen redraws), not the
// average since the watch began, and the memory a long watch holds stays
// fixed.
const etaWindowSamples = 12

// moveWatch is what a --watch remembers between redraws: the recent
// samples, oldest first, and now, the time of the answer being printed.
type moveWatch struct {
	now     time.Time
	samples []moveSample
}

// line is the summary line of s, with the rates a watch has seen so far.
func (mw *moveWatch) line(s messages.MoveSummary) string {
	mw.samples = addSample(mw.samples, moveSample{at: mw.now, done: s.Done, bytes: s.BytesCopied})
	out := fmt.Sprintf("done %d, in flight %d, held %d, frozen %d", s.Done, s.InFlight, s.Held, s.Frozen)
	if bps, ok := bytesPerSecond(mw.samples); ok {
		out += fmt.Sprintf(", %s/s", mib(int64(bps)))
	} else {
		out += ", - MiB/s"
	}
	if eta, ok := timeLeft(mw.samples, s.InFlight); ok {
		out += ", eta " + eta.String()
	} else {
		out += ", eta -"
	}
	if len(s.Missing) > 0 {
		out += fmt.Sprintf(" (without %s: no answer)", strings.Join(s.Missing, ","))
	}
	return out
}

// addSample appends cur to the window. Done and bytes are counters summed
// over the nodes: one that fell means a node restarted or went missing,
// so the samples before it say nothing about the rate and are dropped.
func addSample(window []moveSample, cur moveSample) []moveSample {
	if n := len(window); n > 0 && (cur.done < window[n-1].done || cur.bytes < window[n-1].bytes) {
		window = window[:0]
	}
	window = append(window, cur)
	if len(window) > etaWindowSamples {
		window = slices.Delete(window, 0, len(window)-etaWindowSamples)
	}
	return window
}

// bytesPerSecond is the copy rate between the last two samples; false
// before there are two, or when no time passed between them.
func bytesPerSecond(window []moveSample) (float64, bool) {
	n := len(window)
	if n < 2 {
		return 0, false
	}
	prev, cur := window[n-2], window[n-1]
	dt := cur.at.Sub(prev.at).Seconds()
	if dt <= 0 {
		return 0, false
	}
	return float64(cur.bytes-prev.bytes) / dt, true
}

// timeLeft estimates how long the remaining listed moves take at the
// completion rate over the window, rounded to the second. Moves not yet
// planned are unknown, so it is a floor when more will be planned. False
// while no move finished in the window (no rate yet) and some are listed.
func timeLeft(window []moveSample, remaining int) (time.Duration, bool) {
	if remaining == 0 {
		return 0, true
	}
	n := len(window)
	if n < 2 {
		return 0, false
	}
	first, last := window[0], window[n-1]
	dt, done := last.at.Sub(first.at), last.done-first.done
	if dt <= 0 || done <= 0 {
		return 0, false
	}
	perMove := dt / time.Duration(done)
	return (perMove * time.Duration(remaining)).Round(time.Second), true
}

const quarantineUsage = `Usage: narad cluster quarantine [--node ID] [flags]

Lists the copies each member not marked dead set aside instead of deleting
them: a partition copy an install, a handover or the sweep met, a move's
staging copy, a topic directory of another incarnation. Each may hold the
only copy of some records. One row per copy: node, path (relative to the
node's data dir, what a release takes), kind, size, age; then the totals.

Flags:
`

const quarantineReleaseUsage = `Usage: narad cluster quarantine release --node ID --path REL [--dry-run] [flags]

Removes one copy set aside, as "narad cluster quarantine" lists it, from the
node's disk, for good: whatever records only it held are lost. --dry-run
says what would be removed and its size, and removes nothing.

Flags:
`

// runQuarantine is `narad cluster quarantine [release] ...`.
func runQuarantine(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	release := len(args) > 0 && args[0] == "release"
	if release {
		args = args[1:]
	}
	usage, name := quarantineUsage, "cluster quarantine"
	if release {
		usage, name = quarantineReleaseUsage, "cluster quarantine release"
	}
	fs, cf := newClusterFlags(name, usage, stderr)
	node := fs.String("node", "", "the member whose copies to list (all when empty) or release (required)")
	var path *string
	var dryRun *bool
	if release {
		path = fs.String("path", "", "the copy's path as listed (required)")
		dryRun = fs.Bool("dry-run", false, "say what would be removed, remove nothing")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := parsedCluster(fs); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("cluster quarantine: unexpected argument %q", fs.Arg(0))
	}
	verb, body := "quarantine", []byte("{}")
	if release {
		if *node == "" || *path == "" {
			fs.Usage()
			return errors.New("cluster quarantine release: want --node and --path")
		}
		verb = "quarantine-release"
		body, _ = json.Marshal(messages.QuarantineReleaseRequest{Node: *node, Path: *path, DryRun: *dryRun})
	} else if *node != "" {
		body, _ = json.Marshal(messages.QuarantineRequest{Node: *node})
	}
	nc, subject, err := dialAdmin(*cf.url, *cf.cluster, verb, *cf.timeout, *cf.auth)
	if err != nil {
		return err
	}
	defer nc.Close()
	data, err := adminRequest(ctx, nc, subject, body, *cf.timeout)
	if err != nil {
		return err
	}
	if *cf.asJSON {
		return printAnswer(stdout, verb, subject, data, true, nil)
	}
	if release {
		return printRelease(stdout, subject, data)
	}
	return printQuarantine(stdout, subject, data)
}

// printQuarantine prints the "quarantine" answer as a table with totals;
// members that gave no listing are named, and make it an error: the
// totals leave them out.
func printQuarantine(w io.Writer, subject string, data []byte) error {
	reply, err := decodeAnswer[messages.QuarantineList](subject, data)
	if err != nil {
		return err
	}
	var copies int
	var bytes int64
	tw := newTable(w, "NODE\tPATH\tKIND\tBYTES\tAGE")
	for _, n := range reply.Nodes {
		for _, c := range n.Copies {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.Node, c.Path, c.Kind, sizeText(c.Bytes), (time.Duration(c.AgeMs) * time.Millisecond).Round(time.Second))
		}
		copies += n.TotalCopies
		bytes += n.TotalBytes
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range reply.Nodes {
		if len(n.Copies) < n.TotalCopies {
			fmt.Fprintf(w, "%s: %d of its %d copies listed\n", n.Node, len(n.Copies), n.TotalCopies)
		}
		if len(n.OrphanTopicDirs) > 0 {
			fmt.Fprintf(w, "%s: topic directories without an incarnation marker: %s\n", n.Node, strings.Join(n.OrphanTopicDirs, " "))
		}
	}
	fmt.Fprintf(w, "total: %d copies, %s, on %d nodes\n", copies, sizeText(bytes), len(reply.Nodes))
	if len(reply.Errors) == 0 {
		return nil
	}
	var silent []string
	for _, id := range slices.Sorted(maps.Keys(reply.Errors)) {
		silent = append(silent, fmt.Sprintf("%s (%s)", id, reply.Errors[id]))
	}
	return fmt.Errorf("no listing from %s", strings.Join(silent, ", "))
}

// printRelease says what a release removed, or would remove.
func printRelease(w io.Writer, subject string, data []byte) error {
	r, err := decodeAnswer[messages.QuarantineReleaseReply](subject, data)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("%s on %s (%s, %s)", r.Path, r.Node, r.Kind, sizeText(r.Bytes))
	switch {
	case r.DryRun:
		fmt.Fprintf(w, "dry run: would remove %s; nothing removed\n", what)
	case r.Released:
		fmt.Fprintf(w, "removed %s\n", what)
	default:
		return fmt.Errorf("%s: %s not removed", subject, what)
	}
	return nil
}

// sizeText is a byte count as people read it: exact below a KiB.
func sizeText(b int64) string {
	switch {
	case b < 1<<10:
		return fmt.Sprintf("%d B", b)
	case b < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	case b < 1<<30:
		return mib(b)
	}
	return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
}

// adminAuthFlags registers the NATS credential and TLS flags of the
// cluster commands, with the variables serve reads. The mutating verbs
// need the admin seed; the viewer's asks only the read verbs.
func adminAuthFlags(fs *flag.FlagSet) *transport.Auth {
	a := &transport.Auth{}
	fs.StringVar(&a.CredsFile, "nats-creds", env("NARAD_NATS_CREDS", ""), "NATS nkey seed or .creds file: admin.nk, or viewer.nk for the read verbs (NARAD_NATS_CREDS)")
	fs.StringVar(&a.User, "nats-user", env("NARAD_NATS_USER", ""), "NATS user, instead of --nats-creds (NARAD_NATS_USER)")
	fs.StringVar(&a.Password, "nats-password", env("NARAD_NATS_PASSWORD", ""), "NATS password of --nats-user (NARAD_NATS_PASSWORD)")
	fs.StringVar(&a.TLS.CAFile, "nats-tls-ca", env("NARAD_NATS_TLS_CA", ""), "CA file the NATS server's certificate must chain to (NARAD_NATS_TLS_CA)")
	fs.StringVar(&a.TLS.CertFile, "nats-tls-cert", env("NARAD_NATS_TLS_CERT", ""), "client certificate file for NATS (NARAD_NATS_TLS_CERT)")
	fs.StringVar(&a.TLS.KeyFile, "nats-tls-key", env("NARAD_NATS_TLS_KEY", ""), "key file of --nats-tls-cert (NARAD_NATS_TLS_KEY)")
	return a
}

// dialAdmin connects to NATS at url and names the admin subject of verb in
// cluster.
func dialAdmin(url, cluster, verb string, timeout time.Duration, auth transport.Auth) (*nats.Conn, string, error) {
	subject, err := transport.AdminSubject(cluster, verb)
	if err != nil {
		return nil, "", err
	}
	opts, err := auth.Options()
	if err != nil {
		return nil, "", err
	}
	// A refusal of the server (a verb these credentials may not call)
	// is told by adminRequest from LastError, not printed by nats.go.
	nc, err := nats.Connect(url, append(opts, nats.Timeout(timeout),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))...)
	if errors.Is(err, nats.ErrNoServers) {
		return nil, "", fmt.Errorf("connect to %s: %w (is narad dev, or a NATS server, running there? --nats or NARAD_NATS names another)", url, err)
	}
	if err != nil {
		return nil, "", fmt.Errorf("connect to %s: %w", url, err)
	}
	return nc, subject, nil
}

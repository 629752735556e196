package main

// The client commands of the narad binary: topics, produce and consume.
// main.go dispatches to runTopics, runProduce and runConsume with the
// arguments after the command name.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"time"

	"github.com/naradmq/narad/cmd/narad/client"
	"github.com/naradmq/narad/messages"
)

// defaultServer is the broker a CLI command talks to when neither --server
// nor NARAD_SERVER says otherwise.
const defaultServer = "http://127.0.0.1:7942"

// maxMessageBytes is the broker's body cap (contract section 1). The CLI
// refuses a larger body itself rather than reading an endless stdin into
// memory.
const maxMessageBytes = 1 << 20

const (
	// maxRetries bounds consecutive retries of a request the contract says
	// to retry (502, 503, transport errors).
	maxRetries = 5
	// maxListPages bounds the pages `topics list` walks, in case a broker
	// hands out page tokens that never end.
	maxListPages = 100000
)

const topicsUsage = `usage: narad topics <command> [flags] [name]

Commands:
  create <name>   create a topic and print its record as JSON
  alter <name>    change a topic's partitions, retention, caps or schema
  list            list every topic (follows all pages)
  get <name>      print a topic's record and per-partition stats as JSON
  delete <name>   delete a topic and all its messages
  attach <parent> <child>   make child a fan-out child of parent
  children <parent>         list a parent's children with their lag
  detach <parent> <child>   stop the fan-out from parent to child

Run "narad topics <command> -h" for the flags of a command.
`

const topicsCreateUsage = `usage: narad topics create [flags] <name>

Create a topic and print the record the broker answers. A flag that is not
given is left out of the request, so the broker's default applies.

Flags:
  --server URL            broker URL (default $NARAD_SERVER, else ` + defaultServer + `)
  --user NAME             username for HTTP Basic (default $NARAD_USER)
  --password PW           its password (default $NARAD_PASSWORD)
  --context NAME          saved context to connect with (default $NARAD_CONTEXT; narad ctx)
  --partitions N          number of partitions (broker default: 3)
  --retention DURATION    how long messages are kept, e.g. 168h (broker default: 7 days)
  --visibility DURATION   lease of a consumed message before redelivery, e.g. 30s
  --max-in-flight N       reserved-but-unacked messages allowed per partition
  --max-acked-ahead N     out-of-order acks allowed per partition
  --parent NAME           create the topic as a fan-out child of NAME (partitions
                          default to the parent's)
  --delay DURATION        with --parent: copy each message once this long has
                          passed since the parent committed it, e.g. 10m
  --schema FILE           JSON Schema document the message bodies must match
`

const topicsAlterUsage = `usage: narad topics alter [flags] <name>

Change a topic and print the record the broker answers. Only the flags
given are sent; at least one is needed. The broker applies retention, then
the caps, then partitions, then the schema, each on its own: a refusal of a
later one leaves the earlier ones applied. The visibility timeout cannot be
changed after creation.

Flags:
  --server URL            broker URL (default $NARAD_SERVER, else ` + defaultServer + `)
  --user NAME             username for HTTP Basic (default $NARAD_USER)
  --password PW           its password (default $NARAD_PASSWORD)
  --context NAME          saved context to connect with (default $NARAD_CONTEXT; narad ctx)
  --partitions N          grow to N partitions (never fewer)
  --retention DURATION    how long messages are kept, e.g. 168h; 0 is the broker default
  --max-in-flight N       reserved-but-unacked messages allowed per partition; 0 is the default
  --max-acked-ahead N     out-of-order acks allowed per partition; 0 is the default
  --schema FILE           a new JSON Schema version, backward compatible with the last
`

const topicsListUsage = `usage: narad topics list [flags]

List every topic, sorted by name, one per line.

Flags:
  --server URL   broker URL (default $NARAD_SERVER, else ` + defaultServer + `)
  --user NAME    username for HTTP Basic (default $NARAD_USER)
  --password PW  its password (default $NARAD_PASSWORD)
  --context NAME saved context to connect with (default $NARAD_CONTEXT; narad ctx)
  --limit N      topics fetched per request (default 100, broker maximum 1000)
  --json         print each topic record as one JSON line instead of a table
`

const topicsGetUsage = `usage: narad topics get [flags] <name>

Print a topic's record and its partition_stats as JSON.

Flags:
  --server URL   broker URL (default $NARAD_SERVER, else ` + defaultServer + `)
  --user NAME    username for HTTP Basic (default $NARAD_USER)
  --password PW  its password (default $NARAD_PASSWORD)
  --context NAME saved context to connect with (default $NARAD_CONTEXT; narad ctx)
`

const topicsDeleteUsage = `usage: narad topics delete [flags] <name>

Delete a topic, its messages and its in-flight leases.

Flags:
  --server URL   broker URL (default $NARAD_SERVER, else ` + defaultServer + `)
  --user NAME    username for HTTP Basic (default $NARAD_USER)
  --password PW  its password (default $NARAD_PASSWORD)
  --context NAME saved context to connect with (default $NARAD_CONTEXT; narad ctx)
`

const produceUsage = `usage: narad produce [flags] <topic> [body]

Send one message. The body is the body argument, else the contents of
--file, else standard input, sent as is (a trailing newline included); it
must be 1 byte to 1 MiB. Prints nothing on success (the broker answered
202: the message is durable).

With --lines, each line of --file or standard input is a message of its
own (empty lines skipped), sent --batch at a time through the batch route:
one request and one WAL group commit a batch. Prints how many the broker
accepted; each line it refused is named on standard error with why, and
the command then exits 1.

Flags:
  --server URL     broker URL (default $NARAD_SERVER, else ` + defaultServer + `)
  --user NAME      username for HTTP Basic (default $NARAD_USER)
  --password PW    its password (default $NARAD_PASSWORD)
  --context NAME   saved context to connect with (default $NARAD_CONTEXT; narad ctx)
  --key KEY        partition key (default: the broker makes one up)
  --partition N    send to this partition, overriding the key
  --file FILE      read the body from FILE ("-" for standard input)
  --lines          send each line of the input as a message of its own
  --batch N        with --lines: messages per request (default 100, 1 to 1000)
`

const consumeUsage = `usage: narad consume [flags] <topic>

Receive messages and print each one as a JSON line: topic, partition,
offset, key, payload (embedded as JSON when the body is JSON, a string when
it is text, base64 with "payload_encoding":"base64" otherwise), timestamp
(Unix seconds) and receipt_handle.

Without --follow, receives one message (or up to --count) and stops at the
first empty answer; when nothing came at all it says "no message" on
standard error and exits 0. A message received without --ack is redelivered
once its visibility timeout runs out.

Flags:
  --server URL         broker URL (default $NARAD_SERVER, else ` + defaultServer + `)
  --user NAME          username for HTTP Basic (default $NARAD_USER)
  --password PW        its password (default $NARAD_PASSWORD)
  --context NAME       saved context to connect with (default $NARAD_CONTEXT; narad ctx)
  --ack                ack each message after printing it
  --wait DURATION      how long the broker may hold a request open waiting
                       for a message (default 5s; the broker caps it)
  --follow             keep receiving until interrupted (or --count is reached)
  --count N            stop after N messages (default 1, or no limit with --follow)
  --partition N        receive only from partition N
  --offset N           replay: read partition N from offset N onwards, without
                       leasing (needs --partition; no --ack)
  --to N               with --offset: the last offset to read; stops there, or
                       at the partition's end, whichever comes first
  --peek               look without leasing: print the oldest records each
                       partition still holds (or --partition's), up to --count
                       per partition (default 1), acked or not; nothing is
                       leased, so no consumer is held up
  --batch N            lease up to N messages a request through the batch
                       route (1 to 1000), and ack them (--ack) in one request;
                       not with --offset or --peek
`

// serverFlag registers --server, defaulting to $NARAD_SERVER.
func serverFlag(fs *flag.FlagSet) *string {
	def := defaultServer
	if v := os.Getenv("NARAD_SERVER"); v != "" {
		def = v
	}
	fs.String("user", os.Getenv("NARAD_USER"), "username for HTTP Basic")
	fs.String("password", os.Getenv("NARAD_PASSWORD"), "password for HTTP Basic")
	contextFlag(fs)
	return fs.String("server", def, "broker URL")
}

// credentials are the --user and --password that serverFlag registered
// (NARAD_USER, NARAD_PASSWORD by default); no user sends none.
func credentials(fs *flag.FlagSet) (user, password string) {
	if f := fs.Lookup("user"); f != nil {
		user = f.Value.String()
	}
	if f := fs.Lookup("password"); f != nil {
		password = f.Value.String()
	}
	return user, password
}

// newCommandFlags returns a flag set that prints usage to stderr and
// reports errors instead of exiting: main decides the exit status.
func newCommandFlags(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	return fs
}

// parseInterspersed parses flags that may come before, between or after
// positional arguments (narad produce orders --key k body), stopping at
// "--". It returns the positional arguments; an error names the command,
// as every error of a command does.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	// Each round takes at least one argument, so len(args)+1 rounds suffice.
	for range len(args) + 1 {
		if err := fs.Parse(args); err != nil {
			return nil, fmt.Errorf("%s: %w", fs.Name(), err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	return positional, nil
}

// connect returns a client for the broker at server; an error names the
// command.
func connect(fs *flag.FlagSet, server string) (*client.Broker, error) {
	if err := applyContext(fs); err != nil {
		return nil, fmt.Errorf("%s: %w", fs.Name(), err)
	}
	server = fs.Lookup("server").Value.String()
	user, password := credentials(fs)
	c, err := client.New(server, client.Options{User: user, Password: password})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fs.Name(), err)
	}
	return c, nil
}

// parseTopicCommand parses the arguments of a command that takes one topic
// name and nothing else (topics get, topics delete) and connects to the
// --server it was given.
func parseTopicCommand(fs *flag.FlagSet, server *string, args []string) (string, *client.Broker, error) {
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return "", nil, err
	}
	if len(pos) != 1 {
		return "", nil, usageErr(fs, "want one topic name, got %d arguments", len(pos))
	}
	c, err := connect(fs, *server)
	if err != nil {
		return "", nil, err
	}
	return pos[0], c, nil
}

// wasSet reports which flags were given on the command line, so that an
// unset flag can be left out of a request instead of sent as zero.
func wasSet(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// usageErr prints the usage and returns an error saying what was wrong.
func usageErr(fs *flag.FlagSet, format string, args ...any) error {
	fs.Usage()
	return fmt.Errorf("%s: %s", fs.Name(), fmt.Sprintf(format, args...))
}

// runTopics runs `narad topics <create|list|get|delete> ...`. Asked for
// help, it prints the usage and returns an error matching flag.ErrHelp.
func runTopics(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, topicsUsage)
		return errors.New("topics: missing command")
	}
	switch args[0] {
	case "create":
		return runTopicsCreate(ctx, args[1:], stdout, stderr)
	case "alter":
		return runTopicsAlter(ctx, args[1:], stdout, stderr)
	case "list":
		return runTopicsList(ctx, args[1:], stdout, stderr)
	case "get":
		return runTopicsGet(ctx, args[1:], stdout, stderr)
	case "delete":
		return runTopicsDelete(ctx, args[1:], stdout, stderr)
	case "attach":
		return runTopicsAttach(ctx, args[1:], stdout, stderr)
	case "children":
		return runTopicsChildren(ctx, args[1:], stdout, stderr)
	case "detach":
		return runTopicsDetach(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, topicsUsage)
		return flag.ErrHelp
	default:
		fmt.Fprint(stderr, topicsUsage)
		return fmt.Errorf("topics: unknown command %q", args[0])
	}
}

type topicsCreateFlags struct {
	server        *string
	partitions    *int
	retention     *time.Duration
	visibility    *time.Duration
	maxInFlight   *int64
	maxAckedAhead *int64
	schema        *string
	parent        *string
	delay         *time.Duration
}

func newTopicsCreateFlags(stderr io.Writer) (*flag.FlagSet, *topicsCreateFlags) {
	fs := newCommandFlags("topics create", topicsCreateUsage, stderr)
	return fs, &topicsCreateFlags{
		server:        serverFlag(fs),
		partitions:    fs.Int("partitions", 0, "number of partitions"),
		retention:     fs.Duration("retention", 0, "retention"),
		visibility:    fs.Duration("visibility", 0, "visibility timeout"),
		maxInFlight:   fs.Int64("max-in-flight", 0, "max in flight per partition"),
		maxAckedAhead: fs.Int64("max-acked-ahead", 0, "max acked ahead per partition"),
		schema:        fs.String("schema", "", "JSON Schema file"),
		parent:        fs.String("parent", "", "fan-out parent"),
		delay:         fs.Duration("delay", 0, "fan-out delay"),
	}
}

func runTopicsCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, f := newTopicsCreateFlags(stderr)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr(fs, "want one topic name, got %d arguments", len(pos))
	}
	set := wasSet(fs)
	req := messages.CreateTopicRequest{Name: pos[0]}
	if set["partitions"] {
		if *f.partitions <= 0 {
			return usageErr(fs, "--partitions must be positive, got %d", *f.partitions)
		}
		req.Partitions = *f.partitions
	}
	if set["retention"] {
		ms, err := durationMs("retention", *f.retention)
		if err != nil {
			return usageErr(fs, "%v", err)
		}
		req.RetentionMs = &ms
	}
	if set["visibility"] {
		ms, err := durationMs("visibility", *f.visibility)
		if err != nil {
			return usageErr(fs, "%v", err)
		}
		req.VisibilityTimeoutMs = &ms
	}
	if set["max-in-flight"] {
		if *f.maxInFlight < 0 {
			return usageErr(fs, "--max-in-flight must not be negative")
		}
		req.MaxInFlightPerPartition = f.maxInFlight
	}
	if set["max-acked-ahead"] {
		if *f.maxAckedAhead < 0 {
			return usageErr(fs, "--max-acked-ahead must not be negative")
		}
		req.MaxAckedAheadPerPartition = f.maxAckedAhead
	}
	if set["schema"] {
		if req.Schema, err = schemaFile("topics create", *f.schema); err != nil {
			return err
		}
	}
	if set["parent"] {
		req.Parent = *f.parent
	}
	if set["delay"] {
		ms, err := durationMs("delay", *f.delay)
		if err != nil {
			return usageErr(fs, "%v", err)
		}
		req.FanoutDelayMs = &ms
	}

	c, err := connect(fs, *f.server)
	if err != nil {
		return err
	}
	rec, err := c.CreateTopic(ctx, req)
	if err != nil {
		return err
	}
	return printIndented(stdout, rec)
}

func runTopicsAlter(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newCommandFlags("topics alter", topicsAlterUsage, stderr)
	server := serverFlag(fs)
	partitions := fs.Int("partitions", 0, "grow to N partitions")
	retention := fs.Duration("retention", 0, "retention")
	maxInFlight := fs.Int64("max-in-flight", 0, "max in flight per partition")
	maxAckedAhead := fs.Int64("max-acked-ahead", 0, "max acked ahead per partition")
	schema := fs.String("schema", "", "JSON Schema file")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr(fs, "want one topic name, got %d arguments", len(pos))
	}
	set := wasSet(fs)
	var req messages.AlterTopicRequest
	if set["partitions"] {
		if *partitions <= 0 {
			return usageErr(fs, "--partitions must be positive, got %d", *partitions)
		}
		req.Partitions = partitions
	}
	if set["retention"] {
		ms, err := durationMs("retention", *retention)
		if err != nil {
			return usageErr(fs, "%v", err)
		}
		req.RetentionMs = &ms
	}
	if set["max-in-flight"] {
		if *maxInFlight < 0 {
			return usageErr(fs, "--max-in-flight must not be negative")
		}
		req.MaxInFlightPerPartition = maxInFlight
	}
	if set["max-acked-ahead"] {
		if *maxAckedAhead < 0 {
			return usageErr(fs, "--max-acked-ahead must not be negative")
		}
		req.MaxAckedAheadPerPartition = maxAckedAhead
	}
	if set["schema"] {
		if req.Schema, err = schemaFile("topics alter", *schema); err != nil {
			return err
		}
	}
	if req.Partitions == nil && req.RetentionMs == nil && req.MaxInFlightPerPartition == nil && req.MaxAckedAheadPerPartition == nil && req.Schema == nil {
		return usageErr(fs, "nothing to change: give --partitions, --retention, --max-in-flight, --max-acked-ahead or --schema")
	}
	c, err := connect(fs, *server)
	if err != nil {
		return err
	}
	rec, err := c.AlterTopic(ctx, pos[0], req)
	if err != nil {
		return err
	}
	return printIndented(stdout, rec)
}

// schemaFile reads the JSON Schema document at path for cmd. The broker
// wants the document itself, not a string holding it, so it must be JSON
// already.
func schemaFile(cmd, path string) (json.RawMessage, error) {
	doc, err := readBounded(path, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: read schema: %w", cmd, err)
	}
	if !json.Valid(doc) {
		return nil, fmt.Errorf("%s: schema file %s is not valid JSON", cmd, path)
	}
	return doc, nil
}

// durationMs converts a duration flag to the contract's milliseconds,
// refusing what would silently change meaning on the way.
func durationMs(name string, d time.Duration) (int64, error) {
	if d < 0 {
		return 0, fmt.Errorf("--%s must not be negative, got %s", name, d)
	}
	if d%time.Millisecond != 0 {
		return 0, fmt.Errorf("--%s must be a whole number of milliseconds, got %s", name, d)
	}
	return d.Milliseconds(), nil
}

type topicsListFlags struct {
	server *string
	limit  *int
	json   *bool
}

func newTopicsListFlags(stderr io.Writer) (*flag.FlagSet, *topicsListFlags) {
	fs := newCommandFlags("topics list", topicsListUsage, stderr)
	return fs, &topicsListFlags{
		server: serverFlag(fs),
		limit:  fs.Int("limit", 100, "page size"),
		json:   fs.Bool("json", false, "JSON lines output"),
	}
}

func runTopicsList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, f := newTopicsListFlags(stderr)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageErr(fs, "unexpected arguments %q", pos)
	}
	if *f.limit < 1 {
		return usageErr(fs, "--limit must be positive, got %d", *f.limit)
	}
	c, err := connect(fs, *f.server)
	if err != nil {
		return err
	}

	var topics []messages.TopicInfo
	token := ""
	for page := 0; ; page++ {
		if page == maxListPages {
			return fmt.Errorf("topics list: gave up after %d pages", maxListPages)
		}
		p, err := c.ListTopics(ctx, *f.limit, token)
		if err != nil {
			return err
		}
		topics = append(topics, p.Topics...)
		if p.NextPageToken == "" {
			break
		}
		// The token is the last name of the page (keyset paging), so one
		// that does not move would loop forever.
		if p.NextPageToken == token {
			return fmt.Errorf("topics list: broker repeated page token %q", token)
		}
		token = p.NextPageToken
	}

	if *f.json {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		for _, t := range topics {
			if err := enc.Encode(t); err != nil {
				return fmt.Errorf("topics list: write: %w", err)
			}
		}
		return nil
	}
	tw := newTable(stdout, "NAME\tPARTITIONS\tRETENTION\tVISIBILITY\tROLE")
	for _, t := range topics {
		retention := "forever"
		if t.RetentionMs > 0 {
			retention = msString(t.RetentionMs)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", t.Name, t.Partitions, retention, msString(t.VisibilityTimeoutMs), t.Role)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("topics list: write: %w", err)
	}
	return nil
}

// msString shows a millisecond count as a Go duration (168h0m0s).
func msString(ms int64) string {
	return (time.Duration(ms) * time.Millisecond).String()
}

func newTopicsGetFlags(stderr io.Writer) (*flag.FlagSet, *string) {
	fs := newCommandFlags("topics get", topicsGetUsage, stderr)
	return fs, serverFlag(fs)
}

func runTopicsGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, server := newTopicsGetFlags(stderr)
	topic, c, err := parseTopicCommand(fs, server, args)
	if err != nil {
		return err
	}
	d, err := c.GetTopic(ctx, topic)
	if err != nil {
		return err
	}
	return printIndented(stdout, d)
}

func newTopicsDeleteFlags(stderr io.Writer) (*flag.FlagSet, *string) {
	fs := newCommandFlags("topics delete", topicsDeleteUsage, stderr)
	return fs, serverFlag(fs)
}

func runTopicsDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, server := newTopicsDeleteFlags(stderr)
	topic, c, err := parseTopicCommand(fs, server, args)
	if err != nil {
		return err
	}
	if err := c.DeleteTopic(ctx, topic); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "deleted topic %s\n", topic)
	return nil
}

type produceFlags struct {
	server    *string
	key       *string
	partition *int
	file      *string
	lines     *bool
	batch     *int
}

// maxBatch is the most records or handles the CLI puts in one batch
// request: the broker's default bound (actors.Config.MaxBatchRecords).
const maxBatch = 1000

func newProduceFlags(stderr io.Writer) (*flag.FlagSet, *produceFlags) {
	fs := newCommandFlags("produce", produceUsage, stderr)
	return fs, &produceFlags{
		server:    serverFlag(fs),
		key:       fs.String("key", "", "partition key"),
		partition: fs.Int("partition", 0, "partition"),
		file:      fs.String("file", "", "body file"),
		lines:     fs.Bool("lines", false, "a message per line"),
		batch:     fs.Int("batch", 100, "messages per request with --lines"),
	}
}

// runProduce runs `narad produce <topic> [body]`.
func runProduce(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs, f := newProduceFlags(stderr)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return usageErr(fs, "want a topic and at most one body, got %d arguments", len(pos))
	}
	set := wasSet(fs)
	var partition *int
	if set["partition"] {
		if *f.partition < 0 {
			return usageErr(fs, "--partition must not be negative, got %d", *f.partition)
		}
		partition = f.partition
	}

	if *f.lines {
		switch {
		case len(pos) != 1:
			return usageErr(fs, "--lines reads its messages from --file or standard input, not an argument")
		case *f.batch < 1 || *f.batch > maxBatch:
			return usageErr(fs, "--batch must be 1 to %d, got %d", maxBatch, *f.batch)
		}
		c, err := connect(fs, *f.server)
		if err != nil {
			return err
		}
		name := "-"
		if set["file"] {
			name = *f.file
		}
		return produceLines(ctx, c, pos[0], name, stdin, *f.key, partition, *f.batch, stdout, stderr)
	}
	if set["batch"] {
		return usageErr(fs, "--batch goes with --lines")
	}
	var body []byte
	switch {
	case len(pos) == 2 && set["file"]:
		return usageErr(fs, "give the body as an argument or with --file, not both")
	case len(pos) == 2:
		body = []byte(pos[1])
	case set["file"]:
		if body, err = readBounded(*f.file, stdin); err != nil {
			return fmt.Errorf("produce: read body: %w", err)
		}
	default:
		if body, err = readBounded("-", stdin); err != nil {
			return fmt.Errorf("produce: read body: %w", err)
		}
	}
	if len(body) == 0 {
		return errors.New("produce: empty body: a message needs at least 1 byte")
	}
	if len(body) > maxMessageBytes {
		return fmt.Errorf("produce: body is %d bytes, the limit is %d", len(body), maxMessageBytes)
	}

	c, err := connect(fs, *f.server)
	if err != nil {
		return err
	}
	return c.Produce(ctx, pos[0], body, *f.key, partition)
}

// produceLines sends each non-empty line of the file name ("-": stdin) as a
// message, batch at a time, and reports how many the broker accepted; a
// refused line is named on stderr and fails the command once every batch
// was sent. A failed request is retried while retryable, as one message
// would be; a batch retried may store some of its records twice.
func produceLines(ctx context.Context, c *client.Broker, topic, name string, stdin io.Reader, key string, partition *int, batch int, stdout, stderr io.Writer) error {
	var r io.Reader
	if name == "-" {
		if stdin == nil {
			return errors.New("produce: no standard input")
		}
		r = stdin
	} else {
		fh, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("produce: %w", err)
		}
		defer fh.Close()
		r = fh
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxMessageBytes+1)
	var recs []messages.BatchRecord
	var lineOf []int
	accepted, refused, line := 0, 0, 0
	send := func() error {
		if len(recs) == 0 {
			return nil
		}
		var out messages.ProduceBatchResponse
		var err error
		for failures := 0; ; failures++ {
			if out, err = c.ProduceBatch(ctx, topic, recs); err == nil || !client.IsRetryable(err) || failures >= maxRetries {
				break
			}
			fmt.Fprintf(stderr, "narad produce: %v (retry %d of %d)\n", err, failures+1, maxRetries)
			client.Sleep(ctx, backoff(failures+1))
		}
		if err != nil {
			return err
		}
		accepted += out.Accepted
		for i, res := range out.Results {
			if res.Status != http.StatusAccepted {
				refused++
				fmt.Fprintf(stderr, "narad produce: line %d: %d %s\n", lineOf[i], res.Status, res.Error)
			}
		}
		recs, lineOf = recs[:0], lineOf[:0]
		return nil
	}
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		if len(sc.Bytes()) > maxMessageBytes {
			return fmt.Errorf("produce: line %d is %d bytes, the limit is %d", line, len(sc.Bytes()), maxMessageBytes)
		}
		recs = append(recs, client.BatchRecordOf(key, partition, bytes.Clone(sc.Bytes())))
		lineOf = append(lineOf, line)
		if len(recs) == batch {
			if err := send(); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("produce: read %s: %w", name, err)
	}
	if err := send(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d messages accepted\n", accepted)
	if refused > 0 {
		return fmt.Errorf("produce: %d messages refused", refused)
	}
	return nil
}

// readBounded reads a file ("-" is stdin) up to one byte past the message
// cap, so that an oversized input is detected without reading all of it.
func readBounded(name string, stdin io.Reader) ([]byte, error) {
	var r io.Reader
	if name == "-" {
		if stdin == nil {
			return nil, errors.New("no standard input")
		}
		r = stdin
	} else {
		fh, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("open: %w", err)
		}
		defer fh.Close()
		r = fh
	}
	b, err := io.ReadAll(io.LimitReader(r, maxMessageBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(b) > maxMessageBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, maxMessageBytes)
	}
	return b, nil
}

type consumeFlags struct {
	server    *string
	ack       *bool
	wait      *time.Duration
	follow    *bool
	count     *int
	partition *int
	offset    *int64
	to        *int64
	peek      *bool
	batch     *int
}

func newConsumeFlags(stderr io.Writer) (*flag.FlagSet, *consumeFlags) {
	fs := newCommandFlags("consume", consumeUsage, stderr)
	return fs, &consumeFlags{
		server:    serverFlag(fs),
		ack:       fs.Bool("ack", false, "ack after printing"),
		wait:      fs.Duration("wait", 5*time.Second, "long-poll wait"),
		follow:    fs.Bool("follow", false, "keep consuming"),
		count:     fs.Int("count", 0, "stop after N messages"),
		partition: fs.Int("partition", 0, "partition"),
		offset:    fs.Int64("offset", 0, "replay offset"),
		to:        fs.Int64("to", 0, "last replay offset"),
		peek:      fs.Bool("peek", false, "look without leasing"),
		batch:     fs.Int("batch", 0, "messages a request"),
	}
}

// runConsume runs `narad consume <topic>`. With --follow it returns nil
// when ctx is cancelled (the user pressed ^C).
func runConsume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, f := newConsumeFlags(stderr)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr(fs, "want one topic, got %d arguments", len(pos))
	}
	topic := pos[0]
	set := wasSet(fs)
	var opts client.ConsumeOptions
	if *f.wait < 0 {
		return usageErr(fs, "--wait must not be negative, got %s", *f.wait)
	}
	opts.Wait = *f.wait
	if set["partition"] {
		if *f.partition < 0 {
			return usageErr(fs, "--partition must not be negative, got %d", *f.partition)
		}
		opts.Partition = f.partition
	}
	replay := set["offset"]
	if replay {
		switch {
		case !set["partition"]:
			return usageErr(fs, "--offset needs --partition")
		case *f.offset < 0:
			return usageErr(fs, "--offset must not be negative, got %d", *f.offset)
		case *f.ack:
			return usageErr(fs, "--ack does not apply to a replay (--offset): replayed messages are not leased")
		}
		next := *f.offset
		opts.Offset = &next
	}
	if *f.count < 0 {
		return usageErr(fs, "--count must not be negative, got %d", *f.count)
	}
	limit := *f.count
	if limit == 0 && !*f.follow {
		limit = 1
	}
	if set["to"] {
		switch {
		case !replay:
			return usageErr(fs, "--to needs --offset (and --partition)")
		case *f.to < *f.offset:
			return usageErr(fs, "--to %d is before --offset %d", *f.to, *f.offset)
		case *f.follow:
			return usageErr(fs, "--to ends the read; it does not go with --follow")
		}
		if span := *f.to - *f.offset + 1; !set["count"] || int64(limit) > span {
			limit = int(min(span, math.MaxInt32))
		}
	}
	if set["batch"] {
		switch {
		case *f.batch < 1 || *f.batch > maxBatch:
			return usageErr(fs, "--batch must be 1 to %d, got %d", maxBatch, *f.batch)
		case replay || *f.peek:
			return usageErr(fs, "--batch leases messages: it does not go with --offset or --peek")
		}
	}
	if *f.peek {
		switch {
		case replay || *f.ack || *f.follow:
			return usageErr(fs, "--peek reads without leasing from each partition's oldest record: it does not go with --offset, --ack or --follow")
		}
		c, err := connect(fs, *f.server)
		if err != nil {
			return err
		}
		return peek(ctx, c, topic, opts.Partition, limit, stdout, stderr)
	}

	c, err := connect(fs, *f.server)
	if err != nil {
		return err
	}
	cs := consumeSession{c: c, topic: topic, stderr: stderr}
	enc := json.NewEncoder(stdout)
	// Payloads are embedded verbatim; do not rewrite <, > and & in them.
	enc.SetEscapeHTML(false)

	if set["batch"] {
		return cs.batches(ctx, opts, limit, *f.batch, *f.follow, *f.ack, enc)
	}
	printed, failures := 0, 0
	// Bounded by limit when there is one; with --follow and no --count, the
	// loop runs until the user cancels ctx.
	for limit == 0 || printed < limit {
		if ctx.Err() != nil {
			if *f.follow {
				return nil
			}
			return fmt.Errorf("consume: %w", ctx.Err())
		}
		asked := time.Now()
		m, err := c.Consume(ctx, topic, opts)
		if err != nil {
			if *f.follow && ctx.Err() != nil {
				return nil
			}
			if client.IsRetryable(err) && failures < maxRetries {
				failures++
				fmt.Fprintf(stderr, "narad consume: %v (retry %d of %d)\n", err, failures, maxRetries)
				client.Sleep(ctx, backoff(failures))
				continue
			}
			return err
		}
		failures = 0
		if m == nil {
			if !*f.follow {
				if printed == 0 {
					fmt.Fprintln(stderr, "no message")
				}
				return nil
			}
			// A replay ignores wait, and so may a broker under load: when
			// the empty answer came at once, pause instead of asking again
			// in a tight loop.
			if time.Since(asked) < minPoll {
				client.Sleep(ctx, pollInterval(opts.Wait))
			}
			continue
		}
		// Print before acking: a message acked but never shown would be
		// lost to the user.
		if err := enc.Encode(m); err != nil {
			return fmt.Errorf("consume: write: %w", err)
		}
		printed++
		if replay {
			next := m.Offset + 1
			opts.Offset = &next
		}
		if *f.ack {
			if err := cs.ack(ctx, m); err != nil {
				if *f.follow && ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
	}
	return nil
}

// peek prints up to perPartition of the oldest records each partition of
// topic holds (only partition's when it is given), by replay reads: no
// lease is taken, so no consumer is held up. The broker does not say where
// consumers are, so acked records show as well.
func peek(ctx context.Context, c *client.Broker, topic string, partition *int, perPartition int, stdout, stderr io.Writer) error {
	d, err := c.GetTopic(ctx, topic)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	printed := 0
	for _, ps := range d.PartitionStats {
		if partition != nil && ps.Index != *partition {
			continue
		}
		p := ps.Index
		for off := ps.OldestOffset; off < ps.HighWatermark && off < ps.OldestOffset+int64(perPartition); off++ {
			at := off
			m, err := c.Consume(ctx, topic, client.ConsumeOptions{Partition: &p, Offset: &at})
			if client.IsStatus(err, http.StatusGone) {
				continue // retention removed it since the stats were read
			}
			if err != nil {
				return err
			}
			if m == nil {
				break
			}
			if err := enc.Encode(m); err != nil {
				return fmt.Errorf("consume --peek: write: %w", err)
			}
			printed++
		}
	}
	if partition != nil && *partition >= len(d.PartitionStats) {
		return fmt.Errorf("consume --peek: topic %q has no partition %d", topic, *partition)
	}
	if printed == 0 {
		fmt.Fprintln(stderr, "no message")
	}
	return nil
}

// consumeSession holds what acking needs besides the message.
type consumeSession struct {
	c      *client.Broker
	topic  string
	stderr io.Writer
}

// ack acks m, retrying while the broker says to (503: acked-ahead set
// full). A lease that ran out (410) is reported and skipped: the message
// will be delivered again, which at-least-once allows.
func (s consumeSession) ack(ctx context.Context, m *messages.MessageInfo) error {
	if m.ReceiptHandle == "" {
		return fmt.Errorf("ack %s/%d@%d: the broker sent no receipt handle", m.Topic, m.Partition, m.Offset)
	}
	for attempt := 1; ; attempt++ {
		err := s.c.Ack(ctx, s.topic, m.ReceiptHandle)
		switch {
		case err == nil:
			return nil
		case client.IsStatus(err, http.StatusGone):
			fmt.Fprintf(s.stderr, "narad consume: lease of %d@%d ran out before the ack; it will be delivered again: %v\n", m.Partition, m.Offset, err)
			return nil
		case client.IsRetryable(err) && attempt <= maxRetries && ctx.Err() == nil:
			fmt.Fprintf(s.stderr, "narad consume: %v (retry %d of %d)\n", err, attempt, maxRetries)
			client.Sleep(ctx, backoff(attempt))
		default:
			return err
		}
	}
}

// batches is runConsume's loop through the batch routes: up to batch
// messages a request (and no more than limit in all, 0: no limit), printed,
// then acked in one request when ack is set. A handle the ack batch did not
// settle is acked alone (s.ack: retried, or reported when its lease ran
// out). Stops at the first empty answer unless follow.
func (s consumeSession) batches(ctx context.Context, opts client.ConsumeOptions, limit, batch int, follow, ack bool, enc *json.Encoder) error {
	printed, failures := 0, 0
	for limit == 0 || printed < limit {
		if ctx.Err() != nil {
			if follow {
				return nil
			}
			return fmt.Errorf("consume: %w", ctx.Err())
		}
		n := batch
		if limit > 0 {
			n = min(n, limit-printed)
		}
		asked := time.Now()
		ms, err := s.c.ConsumeBatch(ctx, s.topic, opts, n)
		if err != nil {
			if follow && ctx.Err() != nil {
				return nil
			}
			if client.IsRetryable(err) && failures < maxRetries {
				failures++
				fmt.Fprintf(s.stderr, "narad consume: %v (retry %d of %d)\n", err, failures, maxRetries)
				client.Sleep(ctx, backoff(failures))
				continue
			}
			return err
		}
		failures = 0
		if len(ms) == 0 {
			if !follow {
				if printed == 0 {
					fmt.Fprintln(s.stderr, "no message")
				}
				return nil
			}
			if time.Since(asked) < minPoll {
				client.Sleep(ctx, pollInterval(opts.Wait))
			}
			continue
		}
		// Print before acking: a message acked but never shown would be
		// lost to the user.
		for i := range ms {
			if err := enc.Encode(ms[i]); err != nil {
				return fmt.Errorf("consume: write: %w", err)
			}
		}
		printed += len(ms)
		if ack {
			if err := s.ackAll(ctx, ms); err != nil {
				if follow && ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
	}
	return nil
}

// ackAll acks ms in one batch request; each message the batch did not
// settle, or all of them when the request failed, is acked alone.
func (s consumeSession) ackAll(ctx context.Context, ms []messages.MessageInfo) error {
	handles := make([]string, len(ms))
	for i, m := range ms {
		handles[i] = m.ReceiptHandle
	}
	out, err := s.c.AckBatch(ctx, s.topic, handles, "ack")
	for i := range ms {
		if err == nil && out.Results[i].Status == http.StatusNoContent {
			continue
		}
		if aerr := s.ack(ctx, &ms[i]); aerr != nil {
			return aerr
		}
	}
	return nil
}

// backoff doubles from 100 ms per attempt, capped at 2 s: a person waits
// at the terminal, so retries need not be fast.
func backoff(attempt int) time.Duration {
	return client.Backoff(attempt, 100*time.Millisecond, 2*time.Second)
}

// minPoll is the shortest time between two consume requests of a --follow
// loop that keeps getting empty answers.
const minPoll = 100 * time.Millisecond

// pollInterval is the pause after an empty answer that did not wait on the
// broker: the --wait value, kept between minPoll and 1 s.
func pollInterval(wait time.Duration) time.Duration {
	return min(max(wait, minPoll), time.Second)
}

// printIndented prints v as indented JSON, for humans and jq alike.
func printIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

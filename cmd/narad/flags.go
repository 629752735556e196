package main

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/naradmq/narad/actors"
)

// errBadEnv marks a NARAD_* variable whose value does not parse: a typo in
// a deployment must stop the node, not fall back to a default unseen.
var errBadEnv = errors.New("bad environment variable")

// setting is one field of actors.Config that every way of running a node
// takes as a flag and as a NARAD_* variable.
type setting struct {
	flag string // kebab-case
	// env is the variable; empty derives it from the flag
	// (move-tick: NARAD_MOVE_TICK).
	env string
	// fields are the names Config.Validate (and the Validate of the
	// config it embeds) gives the field, so that a refusal names the flag.
	fields []string
	usage  string // says the unit
	// ptr points into the config the flags fill: *time.Duration, *int,
	// *int64, *bool or *string.
	ptr any
	// skipSpellings: a duration for which 0, unlimited, disabled and none
	// all mean 0 (the hand-off timeout, rule B9).
	skipSpellings bool
	// fromEnv turns the variable's value into the flag's syntax; nil when
	// they are the same.
	fromEnv func(string) (string, error)
}

func (s setting) envName() string {
	if s.env != "" {
		return s.env
	}
	return "NARAD_" + strings.ToUpper(strings.ReplaceAll(s.flag, "-", "_"))
}

// settings are the flags of c's fields, in the order --help lists them.
// The move constants of seeds 000 and 003 are all here (issue 12).
func settings(c *actors.Config) []setting {
	return []setting{
		{flag: "max-consume-wait", env: "NARAD_HTTP_MAX_CONSUME_WAIT", fields: []string{"MaxConsumeWait"}, ptr: &c.MaxConsumeWait,
			usage: "cap on a consume's long poll, below the HTTP write timeout"},
		{flag: "http-read-header-timeout", fields: []string{"HTTPReadHeaderTimeout"}, ptr: &c.HTTPReadHeaderTimeout,
			usage: "how long a client may take to send a request's headers (at most 10s)"},
		{flag: "max-http-connections", fields: []string{"MaxHTTPConnections"}, ptr: &c.MaxHTTPConnections,
			usage: "open connections of the client API; one past it is answered 503 with Retry-After"},
		{flag: "max-consume-long-polls", fields: []string{"MaxConsumeLongPolls"}, ptr: &c.MaxConsumeLongPolls,
			usage: "consumes waiting at once; one past it is answered 503 with Retry-After (below --max-http-connections)"},
		{flag: "max-admin-timeout", fields: []string{"MaxAdminTimeout"}, ptr: &c.MaxAdminTimeout,
			usage: "cap on the time a NATS admin request may hold a handler, whatever it asks (1s..10m)"},
		{flag: "topic-default-partitions", fields: []string{"TopicDefaultPartitions"}, ptr: &c.TopicDefaultPartitions,
			usage: "partitions of a topic created without a count"},
		{flag: "topic-default-retention", env: "NARAD_TOPIC_DEFAULT_RETENTION_AGE_MS", fields: []string{"TopicDefaultRetention"}, ptr: &c.TopicDefaultRetention,
			usage: "retention of a topic created with retention_ms 0 (the variable is in ms)", fromEnv: millisToDuration},
		{flag: "security-enabled", fields: []string{"SecurityEnabled"}, ptr: &c.SecurityEnabled,
			usage: "HTTP Basic, users and grants on the client API (true or false); the root user admin is seeded with NARAD_ADMIN_PASSWORD, or a generated one written to admin.password in the data directory (mode 0600)"},
		{flag: "debug-faults", fields: []string{"DebugFaults"}, ptr: &c.DebugFaults,
			usage: "serve /debug/faults (an admin's route) that fails this node's disk writes or fsyncs and steps its injected clock: for fault-injection runs, never production (true or false)"},
		{flag: "shutdown-drain-timeout", fields: []string{"ShutdownDrainTimeout"}, ptr: &c.ShutdownDrainTimeout,
			usage: "how long a stopping node commits what its ingress WAL holds"},
		{flag: "shutdown-handoff-timeout", fields: []string{"ShutdownHandoffTimeout"}, ptr: &c.ShutdownHandoffTimeout, skipSpellings: true,
			usage: "how long a stopping node waits at most for its partitions to move to other nodes before the WAL drain, a `duration`; " +
				`0s, 0, unlimited, disabled and none all skip the hand-off (seed 003 reads "unlimited" as zero, like "disabled")`},

		// The move worker (move.Config: seed 000's constants table).
		{flag: "move-catch-up-stop-bytes", fields: []string{"Move.CatchUpStopBytes", "CatchUpStopBytes"}, ptr: &c.Move.CatchUpStopBytes,
			usage: "pre-copy stops once a pass copies this many bytes or fewer"},
		{flag: "move-max-catch-up-passes", fields: []string{"Move.MaxCatchUpPasses", "MaxCatchUpPasses"}, ptr: &c.Move.MaxCatchUpPasses,
			usage: "pre-copy passes, a count, after which a move freezes anyway"},
		{flag: "move-max-passes-without-progress", fields: []string{"Move.MaxPassesWithoutProgress", "MaxPassesWithoutProgress"}, ptr: &c.Move.MaxPassesWithoutProgress,
			usage: "pre-copy passes in a row that gain nothing, a count, after which a move freezes anyway"},
		{flag: "move-freeze-ttl", fields: []string{"Move.FreezeTTL", "FreezeTTL"}, ptr: &c.Move.FreezeTTL,
			usage: "how long a freeze holds unless re-armed (re-armed every quarter of it)"},
		{flag: "move-repropose-for", fields: []string{"Move.ReproposeFor", "ReproposeFor"}, ptr: &c.Move.ReproposeFor,
			usage: "how long a flip of unknown outcome is proposed again"},
		{flag: "move-unknown-settle", fields: []string{"Move.UnknownSettle", "UnknownSettle"}, ptr: &c.Move.UnknownSettle,
			usage: "how long after the last unknown proposal a leader read proves a flip did not commit"},
		{flag: "move-force-promote-after", fields: []string{"Move.ForcePromoteAfter", "ForcePromoteAfter"}, ptr: &c.Move.ForcePromoteAfter,
			usage: "how long a move's source must be dead before its copy is promoted"},
		{flag: "move-retry-after", fields: []string{"Move.RetryAfter", "RetryAfter"}, ptr: &c.Move.RetryAfter,
			usage: "pause before a move retries a failed step"},

		// Move I/O, the runner and the planner.
		{flag: "move-chunk-bytes", fields: []string{"MoveChunkBytes"}, ptr: &c.MoveChunkBytes,
			usage: "bytes of one chunk read of a copy (4 KiB to 900 KiB: a chunk is one NATS message)"},
		{flag: "move-chunk-window", fields: []string{"Mover.ChunkWindow", "ChunkWindow", "MoveChunkWindow"}, ptr: &c.Mover.ChunkWindow,
			usage: "chunk reads of one move in flight, a count (1 to 64)"},
		{flag: "lease-drain-timeout", fields: []string{"Partition.LeaseDrainTimeout", "LeaseDrainTimeout"}, ptr: &c.Partition.LeaseDrainTimeout,
			usage: "how long a freeze waits for leases out before it reports"},
		{flag: "partition-rest-after", fields: []string{"Partition.RestAfter", "RestAfter"}, ptr: &c.Partition.RestAfter,
			usage: "how long a partition with nothing in flight keeps its actor and open log before it rests (0: never)"},
		{flag: "move-tick", fields: []string{"MoveTick"}, ptr: &c.MoveTick,
			usage: "the move runner's tick"},
		{flag: "move-full-scan-every", fields: []string{"Mover.FullScanEvery", "FullScanEvery", "MoveFullScanEvery"}, ptr: &c.Mover.FullScanEvery,
			usage: "the move runner scans the metastore at least this often, at least --move-tick"},
		{flag: "sweep-every-ticks", fields: []string{"Mover.SweepEveryTicks", "SweepEveryTicks"}, ptr: &c.Mover.SweepEveryTicks,
			usage: "move-runner ticks between two stale-copy sweeps, a count (1 to 100000)"},
		{flag: "max-sweep-copies-per-pass", fields: []string{"Sweep.MaxCopiesPerPass", "MaxCopiesPerPass"}, ptr: &c.Sweep.MaxCopiesPerPass,
			usage: "copies one stale-copy sweep judges, a count (1 to 1000000)"},
		{flag: "sweep-parallel-asks", fields: []string{"Sweep.ParallelAsks", "ParallelAsks"}, ptr: &c.Sweep.ParallelAsks,
			usage: "owners a stale-copy sweep asks at once, a count (1 to 1024)"},
		{flag: "max-in-flight-moves", fields: []string{"MaxInFlightMoves"}, ptr: &c.MaxInFlightMoves,
			usage: "moves the controller keeps in flight, a count (1 to 100000)"},
		{flag: "dead-target-abort-after", fields: []string{"Controller.DeadTargetAbortAfter", "DeadTargetAbortAfter"}, ptr: &c.Controller.DeadTargetAbortAfter,
			usage: "how long a move's destination may be dead before the controller clears the move"},
		{flag: "rebalance-interval", fields: []string{"Controller.RebalanceInterval", "RebalanceInterval"}, ptr: &c.Controller.RebalanceInterval,
			usage: "how often the metadata leader plans moves while nothing moves"},
		{flag: "rebalance-busy-interval", fields: []string{"Controller.RebalanceBusyInterval", "RebalanceBusyInterval"}, ptr: &c.Controller.RebalanceBusyInterval,
			usage: "how often it plans while moves run or a node sheds, at most --rebalance-interval"},
		{flag: "rebalance", fields: []string{"Controller.Rebalance", "Rebalance"}, ptr: &c.Controller.Rebalance,
			usage: "let the controller plan moves (true or false; off, it still clears moves to dead nodes)"},

		// Pacing, flips and the hand-off (seed 003).
		{flag: "freeze-pace-tick", fields: []string{"FreezePaceTick"}, ptr: &c.FreezePaceTick,
			usage: "the freeze pacer's tick, up to 1s"},
		{flag: "max-new-freezes-per-tick", fields: []string{"MaxNewFreezesPerTick"}, ptr: &c.MaxNewFreezesPerTick,
			usage: "new freezes a node arms per --freeze-pace-tick, a count (at most --max-frozen-partitions)"},
		{flag: "max-frozen-partitions", fields: []string{"MaxFrozenPartitions"}, ptr: &c.MaxFrozenPartitions,
			usage: "frozen partitions past which a node arms no new freeze, a count"},
		{flag: "freeze-hold-for", fields: []string{"FreezeHoldFor"}, ptr: &c.FreezeHoldFor,
			usage: "how long a freeze request waits for its turn before it is answered held"},
		{flag: "freeze-turn-keep-for", fields: []string{"FreezeTurnKeepFor"}, ptr: &c.FreezeTurnKeepFor,
			usage: "how long a held move keeps its place in line, at least --move-retry-after"},
		{flag: "flip-batch-window", fields: []string{"Mover.FlipBatchWindow", "FlipBatchWindow"}, ptr: &c.Mover.FlipBatchWindow,
			usage: "how long a flip waits for others to share its Raft entry, up to 1s"},
		{flag: "max-flip-batch", fields: []string{"Mover.MaxFlipBatch", "MaxFlipBatch"}, ptr: &c.Mover.MaxFlipBatch,
			usage: "flips in one Raft entry, a count (1 to 10000)"},
		{flag: "install-batch-window", fields: []string{"Mover.InstallBatchWindow", "InstallBatchWindow"}, ptr: &c.Mover.InstallBatchWindow,
			usage: "how long a move's install waits for others to share its syncs, up to 1s"},
		{flag: "max-install-batch", fields: []string{"Mover.MaxInstallBatch", "MaxInstallBatch"}, ptr: &c.Mover.MaxInstallBatch,
			usage: "installs sharing one set of syncs, a count (1 to 10000)"},

		// Liveness (cluster/membership).
		{flag: "heartbeat-interval", fields: []string{"Membership.HeartbeatInterval", "HeartbeatInterval", "heartbeat interval"}, ptr: &c.Membership.HeartbeatInterval,
			usage: "how often a node heartbeats into the metastore"},
		{flag: "dead-timeout", fields: []string{"Membership.DeadTimeout", "DeadTimeout", "dead timeout"}, ptr: &c.Membership.DeadTimeout,
			usage: "how long without a heartbeat before the leader marks a member dead"},

		// Start.
		{flag: "max-parallel-partition-opens", fields: []string{"MaxParallelPartitionOpens"}, ptr: &c.MaxParallelPartitionOpens,
			usage: "partitions that open their log at once, a count (1 to 1024); the others wait their turn with their requests"},

		// NATS credentials and TLS (cluster/transport.Auth), the client API's TLS.
		{flag: "nats-creds", fields: []string{"NATSAuth.CredsFile", "CredsFile"}, ptr: &c.NATSAuth.CredsFile,
			usage: "NATS nkey seed or .creds file of the node identity (narad nats writes node.nk)"},
		{flag: "nats-user", fields: []string{"NATSAuth.User", "User"}, ptr: &c.NATSAuth.User,
			usage: "NATS user, instead of --nats-creds"},
		{flag: "nats-password", fields: []string{"NATSAuth.Password", "Password"}, ptr: &c.NATSAuth.Password,
			usage: "NATS password of --nats-user (prefer the variable: a flag shows in ps)"},
		{flag: "nats-tls-ca", fields: []string{"NATSAuth.TLS.CAFile", "CAFile"}, ptr: &c.NATSAuth.TLS.CAFile,
			usage: "CA file the NATS server's certificate must chain to (with --nats-tls-cert and --nats-tls-key)"},
		{flag: "nats-tls-cert", fields: []string{"NATSAuth.TLS.CertFile", "CertFile"}, ptr: &c.NATSAuth.TLS.CertFile,
			usage: "certificate file the node presents to NATS"},
		{flag: "nats-tls-key", fields: []string{"NATSAuth.TLS.KeyFile", "KeyFile"}, ptr: &c.NATSAuth.TLS.KeyFile,
			usage: "key file of --nats-tls-cert"},
		{flag: "http-tls-cert", fields: []string{"HTTPTLSCertFile"}, ptr: &c.HTTPTLSCertFile,
			usage: "certificate file: the client API serves HTTPS (with --http-tls-key)"},
		{flag: "http-tls-key", fields: []string{"HTTPTLSKeyFile"}, ptr: &c.HTTPTLSKeyFile,
			usage: "key file of --http-tls-cert"},
	}
}

// strictEnv are variables of serve's own flags that parse as the flag
// does; their flags read them as defaults, and loadEnv refuses a bad one.
var strictEnv = map[string]string{"replica-id": "NARAD_REPLICA_ID",
	"raft-logdb-write-buffer-bytes": "NARAD_RAFT_LOGDB_WRITE_BUFFER_BYTES", "raft-logdb-shards": "NARAD_RAFT_LOGDB_SHARDS",
	"nats-port": "NARAD_NATS_PORT", "insecure-raft": "NARAD_INSECURE_RAFT",
	"memory-limit-bytes": "NARAD_MEMORY_LIMIT_BYTES"}

// nodeFlags are the flags every way of running a node shares.
type nodeFlags struct {
	logLevel string
	// dragonboatLogLevel is the least level of Dragonboat's own lines.
	dragonboatLogLevel string
	// cfg holds what the flags set; apply copies the settings' fields.
	cfg actors.Config
	// printConfig: write the effective config and start nothing.
	printConfig bool
	// memoryLimitBytes is the Go runtime's soft memory limit (memlimit.go):
	// 0 derives it, -1 leaves none.
	memoryLimitBytes int64
}

func (f *nodeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.logLevel, "log-level", env("NARAD_LOG_LEVEL", "info"), "log level: debug, info, warn, error (NARAD_LOG_LEVEL)")
	fs.StringVar(&f.dragonboatLogLevel, "dragonboat-log-level", env("NARAD_DRAGONBOAT_LOG_LEVEL", "warn"),
		"least level of the Raft library's (Dragonboat's) lines, within --log-level: debug, info, warn, error; at info it tells of every shard it starts (NARAD_DRAGONBOAT_LOG_LEVEL)")
	fs.String(configFlag, env("NARAD_CONFIG", ""), "YAML `file` of settings, each key a flag's name (http: \":7942\"); NARAD_* variables and flags override it (NARAD_CONFIG)")
	fs.Int64Var(&f.memoryLimitBytes, "memory-limit-bytes", envInt64("NARAD_MEMORY_LIMIT_BYTES", memoryLimitDerived),
		fmt.Sprintf("the Go runtime's soft memory limit in bytes: past it the collector runs more often instead of letting garbage double the heap; 0 is %.0f%% of the cgroup's memory limit, else of the machine's memory (a GOMEMLIMIT variable wins over 0); -1 sets none; else at least 64 MiB (NARAD_MEMORY_LIMIT_BYTES)", memoryLimitShare*100))
	fs.BoolVar(&f.printConfig, printConfigFlag, false, "write the effective settings (defaults, --config, NARAD_*, flags) as a config file to stdout and exit")
	f.cfg = actors.DefaultConfig()
	for _, s := range settings(&f.cfg) {
		usage := fmt.Sprintf("%s (%s)", s.usage, s.envName())
		switch p := s.ptr.(type) {
		case *time.Duration:
			if s.skipSpellings {
				fs.Var((*handoffTimeout)(p), s.flag, usage)
			} else {
				fs.DurationVar(p, s.flag, *p, usage)
			}
		case *int:
			fs.IntVar(p, s.flag, *p, usage)
		case *int64:
			fs.Int64Var(p, s.flag, *p, usage)
		case *bool:
			fs.BoolVar(p, s.flag, *p, usage)
		case *string:
			fs.StringVar(p, s.flag, *p, usage)
		default:
			panic(fmt.Sprintf("setting %s: unsupported field type %T", s.flag, p))
		}
	}
}

// parse reads the config file (--config or NARAD_CONFIG), the NARAD_*
// variables, then the command line (each wins over the one before), and
// checks the result with Config.Validate so that a bad value fails before
// anything starts.
func (f *nodeFlags) parse(fs *flag.FlagSet, args []string) error {
	if path := configPath(args, os.LookupEnv); path != "" {
		if err := loadConfig(fs, path, os.LookupEnv); err != nil {
			return err
		}
	}
	if err := loadEnv(fs, settings(&f.cfg), os.LookupEnv); err != nil {
		return err
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := checkMemoryLimit(f.memoryLimitBytes); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	return validate(f.cfg, set)
}

// apply copies what the flags set into cfg.
func (f *nodeFlags) apply(cfg *actors.Config) {
	from := settings(&f.cfg)
	for i, s := range settings(cfg) {
		switch p := s.ptr.(type) {
		case *time.Duration:
			*p = *from[i].ptr.(*time.Duration)
		case *int:
			*p = *from[i].ptr.(*int)
		case *int64:
			*p = *from[i].ptr.(*int64)
		case *bool:
			*p = *from[i].ptr.(*bool)
		case *string:
			*p = *from[i].ptr.(*string)
		}
	}
}

// loadEnv sets each flag in fs whose variable is set; an unparsable value
// is an error naming the variable and the value.
func loadEnv(fs *flag.FlagSet, ss []setting, lookup func(string) (string, bool)) error {
	type bound struct{ flag, env string }
	var all []bound
	for _, s := range ss {
		all = append(all, bound{s.flag, s.envName()})
	}
	for _, name := range slices.Sorted(maps.Keys(strictEnv)) {
		all = append(all, bound{name, strictEnv[name]})
	}
	conv := map[string]func(string) (string, error){}
	for _, s := range ss {
		conv[s.flag] = s.fromEnv
	}
	for _, b := range all {
		raw, ok := lookup(b.env)
		fl := fs.Lookup(b.flag)
		if !ok || fl == nil {
			continue
		}
		v := raw
		var err error
		if c := conv[b.flag]; c != nil {
			v, err = c(raw)
		}
		if err == nil {
			err = fs.Set(b.flag, v)
		}
		if err != nil {
			return fmt.Errorf("%w %s=%q (--%s): want %s", errBadEnv, b.env, raw, b.flag, kindOf(fl))
		}
	}
	return nil
}

// kindOf says what a flag's value must look like.
func kindOf(fl *flag.Flag) string {
	switch fl.Value.(type) {
	case *handoffTimeout:
		return "a duration such as 15s, or 0, unlimited, disabled or none"
	}
	switch fl.Value.(flag.Getter).Get().(type) {
	case time.Duration:
		return "a duration such as 1s or 500ms"
	case bool:
		return "true or false"
	case int, int64, uint64:
		return "a whole number"
	}
	return "a value " + fl.Name + " takes"
}

func millisToDuration(s string) (string, error) {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return "", err
	}
	return (time.Duration(ms) * time.Millisecond).String(), nil
}

// handoffTimeout is --shutdown-handoff-timeout (rule B9): a duration, where
// "unlimited" means 0 like "disabled" and "none" (seed 003's reading): the
// node skips the hand-off.
type handoffTimeout time.Duration

func (h *handoffTimeout) String() string {
	if h == nil {
		return "0s"
	}
	return time.Duration(*h).String()
}

func (h *handoffTimeout) Set(s string) error {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "0", "0s", "unlimited", "disabled", "none":
		*h = 0
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration, 0, unlimited, disabled or none", s)
	}
	*h = handoffTimeout(d)
	return nil
}

func (h *handoffTimeout) Get() any { return time.Duration(*h) }

// fieldName is a word of a Validate message that may name a field:
// MoveTick/Mover.FullScanEvery holds two, 1..MaxFrozenPartitions one.
var fieldName = regexp.MustCompile(`[A-Za-z][A-Za-z0-9.]*`)

// validate runs Config.Validate and names the flags of the fields its
// refusal mentions: those of them that were set (by a flag or a variable)
// when there are any, since a refusal may name several fields.
func validate(cfg actors.Config, set map[string]bool) error {
	err := cfg.Validate()
	if err == nil {
		return nil
	}
	msg := err.Error()
	words := fieldName.FindAllString(msg, -1)
	var named, setNamed []string
	for _, s := range settings(&cfg) {
		for _, f := range s.fields {
			hit := slices.Contains(words, f)
			if strings.Contains(f, " ") {
				hit = strings.Contains(msg, f)
			}
			if hit {
				name := "--" + s.flag + " (" + s.envName() + ")"
				named = append(named, name)
				if set[s.flag] {
					setNamed = append(setNamed, name)
				}
				break
			}
		}
	}
	if len(setNamed) > 0 {
		named = setNamed
	}
	if len(named) == 0 {
		return err
	}
	return fmt.Errorf("%w; set by %s", err, strings.Join(named, ", "))
}

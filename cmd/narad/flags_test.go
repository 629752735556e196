package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/naradmq/narad/actors"
)

// parseNode parses args as serve and dev do and returns the config the
// node would start with; no node starts.
func parseNode(t *testing.T, args ...string) (actors.Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var nf nodeFlags
	nf.register(fs)
	if err := nf.parse(fs, args); err != nil {
		return actors.Config{}, err
	}
	cfg := actors.DefaultConfig()
	nf.apply(&cfg)
	return cfg, nil
}

// nodeFlagCases are, for every node flag, a value other than the default
// that Validate accepts, and where it must land.
var nodeFlagCases = []struct {
	flag, env string
	value     string
	envValue  string // "" means value
	get       func(actors.Config) any
	want      any
}{
	{"max-consume-wait", "NARAD_HTTP_MAX_CONSUME_WAIT", "20s", "", func(c actors.Config) any { return c.MaxConsumeWait }, 20 * time.Second},
	{"max-http-connections", "NARAD_MAX_HTTP_CONNECTIONS", "2048", "", func(c actors.Config) any { return c.MaxHTTPConnections }, 2048},
	{"max-consume-long-polls", "NARAD_MAX_CONSUME_LONG_POLLS", "256", "", func(c actors.Config) any { return c.MaxConsumeLongPolls }, 256},
	{"max-admin-timeout", "NARAD_MAX_ADMIN_TIMEOUT", "1m", "", func(c actors.Config) any { return c.MaxAdminTimeout }, time.Minute},
	{"topic-default-partitions", "NARAD_TOPIC_DEFAULT_PARTITIONS", "12", "", func(c actors.Config) any { return c.TopicDefaultPartitions }, 12},
	{"topic-default-retention", "NARAD_TOPIC_DEFAULT_RETENTION_AGE_MS", "2h", "7200000", func(c actors.Config) any { return c.TopicDefaultRetention }, 2 * time.Hour},
	{"security-enabled", "NARAD_SECURITY_ENABLED", "false", "", func(c actors.Config) any { return c.SecurityEnabled }, false},
	{"debug-faults", "NARAD_DEBUG_FAULTS", "true", "", func(c actors.Config) any { return c.DebugFaults }, true},
	{"shutdown-drain-timeout", "NARAD_SHUTDOWN_DRAIN_TIMEOUT", "5s", "", func(c actors.Config) any { return c.ShutdownDrainTimeout }, 5 * time.Second},
	{"shutdown-handoff-timeout", "NARAD_SHUTDOWN_HANDOFF_TIMEOUT", "7s", "", func(c actors.Config) any { return c.ShutdownHandoffTimeout }, 7 * time.Second},
	{"move-catch-up-stop-bytes", "NARAD_MOVE_CATCH_UP_STOP_BYTES", "1048576", "", func(c actors.Config) any { return c.Move.CatchUpStopBytes }, int64(1 << 20)},
	{"move-max-catch-up-passes", "NARAD_MOVE_MAX_CATCH_UP_PASSES", "7", "", func(c actors.Config) any { return c.Move.MaxCatchUpPasses }, 7},
	{"move-max-passes-without-progress", "NARAD_MOVE_MAX_PASSES_WITHOUT_PROGRESS", "2", "", func(c actors.Config) any { return c.Move.MaxPassesWithoutProgress }, 2},
	{"move-freeze-ttl", "NARAD_MOVE_FREEZE_TTL", "10s", "", func(c actors.Config) any { return c.Move.FreezeTTL }, 10 * time.Second},
	{"move-repropose-for", "NARAD_MOVE_REPROPOSE_FOR", "1m", "", func(c actors.Config) any { return c.Move.ReproposeFor }, time.Minute},
	{"move-unknown-settle", "NARAD_MOVE_UNKNOWN_SETTLE", "5s", "", func(c actors.Config) any { return c.Move.UnknownSettle }, 5 * time.Second},
	{"move-force-promote-after", "NARAD_MOVE_FORCE_PROMOTE_AFTER", "3m", "", func(c actors.Config) any { return c.Move.ForcePromoteAfter }, 3 * time.Minute},
	{"move-retry-after", "NARAD_MOVE_RETRY_AFTER", "500ms", "", func(c actors.Config) any { return c.Move.RetryAfter }, 500 * time.Millisecond},
	{"move-chunk-bytes", "NARAD_MOVE_CHUNK_BYTES", "65536", "", func(c actors.Config) any { return c.MoveChunkBytes }, 65536},
	{"move-chunk-window", "NARAD_MOVE_CHUNK_WINDOW", "8", "", func(c actors.Config) any { return c.Mover.ChunkWindow }, 8},
	{"lease-drain-timeout", "NARAD_LEASE_DRAIN_TIMEOUT", "100ms", "", func(c actors.Config) any { return c.Partition.LeaseDrainTimeout }, 100 * time.Millisecond},
	{"partition-rest-after", "NARAD_PARTITION_REST_AFTER", "30s", "", func(c actors.Config) any { return c.Partition.RestAfter }, 30 * time.Second},
	{"move-tick", "NARAD_MOVE_TICK", "2s", "", func(c actors.Config) any { return c.MoveTick }, 2 * time.Second},
	{"move-full-scan-every", "NARAD_MOVE_FULL_SCAN_EVERY", "1m", "", func(c actors.Config) any { return c.Mover.FullScanEvery }, time.Minute},
	{"http-read-header-timeout", "NARAD_HTTP_READ_HEADER_TIMEOUT", "3s", "", func(c actors.Config) any { return c.HTTPReadHeaderTimeout }, 3 * time.Second},
	{"sweep-every-ticks", "NARAD_SWEEP_EVERY_TICKS", "60", "", func(c actors.Config) any { return c.Mover.SweepEveryTicks }, 60},
	{"max-sweep-copies-per-pass", "NARAD_MAX_SWEEP_COPIES_PER_PASS", "100", "", func(c actors.Config) any { return c.Sweep.MaxCopiesPerPass }, 100},
	{"sweep-parallel-asks", "NARAD_SWEEP_PARALLEL_ASKS", "4", "", func(c actors.Config) any { return c.Sweep.ParallelAsks }, 4},
	{"max-in-flight-moves", "NARAD_MAX_IN_FLIGHT_MOVES", "64", "", func(c actors.Config) any { return c.MaxInFlightMoves }, 64},
	{"dead-target-abort-after", "NARAD_DEAD_TARGET_ABORT_AFTER", "5m", "", func(c actors.Config) any { return c.Controller.DeadTargetAbortAfter }, 5 * time.Minute},
	{"rebalance-interval", "NARAD_REBALANCE_INTERVAL", "3s", "", func(c actors.Config) any { return c.Controller.RebalanceInterval }, 3 * time.Second},
	{"rebalance-busy-interval", "NARAD_REBALANCE_BUSY_INTERVAL", "200ms", "", func(c actors.Config) any { return c.Controller.RebalanceBusyInterval }, 200 * time.Millisecond},
	{"max-parallel-partition-opens", "NARAD_MAX_PARALLEL_PARTITION_OPENS", "3", "", func(c actors.Config) any { return c.MaxParallelPartitionOpens }, 3},
	{"rebalance", "NARAD_REBALANCE", "false", "", func(c actors.Config) any { return c.Controller.Rebalance }, false},
	{"freeze-pace-tick", "NARAD_FREEZE_PACE_TICK", "5ms", "", func(c actors.Config) any { return c.FreezePaceTick }, 5 * time.Millisecond},
	{"max-new-freezes-per-tick", "NARAD_MAX_NEW_FREEZES_PER_TICK", "8", "", func(c actors.Config) any { return c.MaxNewFreezesPerTick }, 8},
	{"max-frozen-partitions", "NARAD_MAX_FROZEN_PARTITIONS", "256", "", func(c actors.Config) any { return c.MaxFrozenPartitions }, 256},
	{"freeze-hold-for", "NARAD_FREEZE_HOLD_FOR", "1s", "", func(c actors.Config) any { return c.FreezeHoldFor }, time.Second},
	{"freeze-turn-keep-for", "NARAD_FREEZE_TURN_KEEP_FOR", "4s", "", func(c actors.Config) any { return c.FreezeTurnKeepFor }, 4 * time.Second},
	{"flip-batch-window", "NARAD_FLIP_BATCH_WINDOW", "5ms", "", func(c actors.Config) any { return c.Mover.FlipBatchWindow }, 5 * time.Millisecond},
	{"max-flip-batch", "NARAD_MAX_FLIP_BATCH", "100", "", func(c actors.Config) any { return c.Mover.MaxFlipBatch }, 100},
	{"install-batch-window", "NARAD_INSTALL_BATCH_WINDOW", "5ms", "", func(c actors.Config) any { return c.Mover.InstallBatchWindow }, 5 * time.Millisecond},
	{"max-install-batch", "NARAD_MAX_INSTALL_BATCH", "64", "", func(c actors.Config) any { return c.Mover.MaxInstallBatch }, 64},
	{"heartbeat-interval", "NARAD_HEARTBEAT_INTERVAL", "1s", "", func(c actors.Config) any { return c.Membership.HeartbeatInterval }, time.Second},
	{"dead-timeout", "NARAD_DEAD_TIMEOUT", "45s", "", func(c actors.Config) any { return c.Membership.DeadTimeout }, 45 * time.Second},
	{"nats-creds", "NARAD_NATS_CREDS", "node.nk", "", func(c actors.Config) any { return c.NATSAuth.CredsFile }, "node.nk"},
	{"nats-user", "NARAD_NATS_USER", "n1", "", func(c actors.Config) any { return c.NATSAuth.User }, "n1"},
	{"nats-password", "NARAD_NATS_PASSWORD", "secret", "", func(c actors.Config) any { return c.NATSAuth.Password }, "secret"},
	{"nats-tls-ca", "NARAD_NATS_TLS_CA", "ca.pem", "", func(c actors.Config) any { return c.NATSAuth.TLS.CAFile }, "ca.pem"},
	{"nats-tls-cert", "NARAD_NATS_TLS_CERT", "n1.pem", "", func(c actors.Config) any { return c.NATSAuth.TLS.CertFile }, "n1.pem"},
	{"nats-tls-key", "NARAD_NATS_TLS_KEY", "n1.key", "", func(c actors.Config) any { return c.NATSAuth.TLS.KeyFile }, "n1.key"},
	{"http-tls-cert", "NARAD_HTTP_TLS_CERT", "api.pem", "", func(c actors.Config) any { return c.HTTPTLSCertFile }, "api.pem"},
	{"http-tls-key", "NARAD_HTTP_TLS_KEY", "api.key", "", func(c actors.Config) any { return c.HTTPTLSKeyFile }, "api.key"},
}

// companions are the flags a case's flag is valid only with (Validate
// wants all of a set or none), given beside a value other than the default.
var companions = map[string][]string{
	"nats-password": {"--nats-user=u"},
	"nats-tls-ca":   {"--nats-tls-cert=c", "--nats-tls-key=k"},
	"nats-tls-cert": {"--nats-tls-ca=a", "--nats-tls-key=k"},
	"nats-tls-key":  {"--nats-tls-ca=a", "--nats-tls-cert=c"},
	"http-tls-cert": {"--http-tls-key=k"},
	"http-tls-key":  {"--http-tls-cert=c"},
}

func TestEveryNodeFlagAndVariableReachesItsField(t *testing.T) {
	var covered []string
	for _, tc := range nodeFlagCases {
		covered = append(covered, tc.flag)
		if got := tc.get(actors.DefaultConfig()); got == tc.want {
			t.Fatalf("%s: the case's value %v is the default; it would prove nothing", tc.flag, got)
		}
		t.Run(tc.flag, func(t *testing.T) {
			cfg, err := parseNode(t, append([]string{"--" + tc.flag + "=" + tc.value}, companions[tc.flag]...)...)
			if err != nil {
				t.Fatalf("--%s %s: %v", tc.flag, tc.value, err)
			}
			if got := tc.get(cfg); got != tc.want {
				t.Errorf("--%s %s: got %v, want %v", tc.flag, tc.value, got, tc.want)
			}

			v := tc.envValue
			if v == "" {
				v = tc.value
			}
			t.Setenv(tc.env, v)
			cfg, err = parseNode(t, companions[tc.flag]...)
			if err != nil {
				t.Fatalf("%s=%s: %v", tc.env, v, err)
			}
			if got := tc.get(cfg); got != tc.want {
				t.Errorf("%s=%s: got %v, want %v", tc.env, v, got, tc.want)
			}
			// The command line wins over the variable.
			cfg, err = parseNode(t, "--"+tc.flag+"="+fmt.Sprint(tc.get(actors.DefaultConfig())))
			if err != nil {
				t.Fatalf("%s=%s and the default on the command line: %v", tc.env, v, err)
			}
			if got, want := tc.get(cfg), tc.get(actors.DefaultConfig()); got != want {
				t.Errorf("%s=%s and --%s %v: got %v, want %v", tc.env, v, tc.flag, want, got, want)
			}
		})
	}
	var all []string
	def := actors.DefaultConfig()
	for _, s := range settings(&def) {
		all = append(all, s.flag)
	}
	slices.Sort(all)
	slices.Sort(covered)
	if !slices.Equal(all, covered) {
		t.Errorf("node flags: got %q, the cases cover %q", all, covered)
	}
}

func TestABadVariableIsAnErrorNamingItAndItsValue(t *testing.T) {
	for _, tc := range []struct{ env, value string }{
		{"NARAD_MOVE_TICK", "soon"},
		{"NARAD_MAX_IN_FLIGHT_MOVES", "lots"},
		{"NARAD_MOVE_CATCH_UP_STOP_BYTES", "4MiB"},
		{"NARAD_REBALANCE", "maybe"},
		{"NARAD_TOPIC_DEFAULT_RETENTION_AGE_MS", "1h"},
		{"NARAD_HTTP_MAX_CONSUME_WAIT", "10"},
		{"NARAD_SHUTDOWN_HANDOFF_TIMEOUT", "forever"},
		{"NARAD_REPLICA_ID", "two"},
		{"NARAD_INSECURE_RAFT", "yes"},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			// An unknown flag keeps a node from starting should the
			// variable be let through.
			err := runServe(context.Background(), []string{"--no-such-flag"}, io.Discard, io.Discard)
			if !errors.Is(err, errBadEnv) {
				t.Fatalf("serve with %s=%s: got %v, want %v", tc.env, tc.value, err, errBadEnv)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.env) || !strings.Contains(msg, `"`+tc.value+`"`) {
				t.Errorf("serve with %s=%s: got %q, want the variable and the value named", tc.env, tc.value, msg)
			}
		})
	}
	t.Setenv("NARAD_MOVE_TICK", "soon")
	if err := runDev(context.Background(), []string{"--no-such-flag"}, io.Discard, io.Discard); !errors.Is(err, errBadEnv) {
		t.Errorf("dev with NARAD_MOVE_TICK=soon: got %v, want %v", err, errBadEnv)
	}
}

// rule B9: "0s", "unlimited", "disabled" and "none" all skip the hand-off.
func TestShutdownHandoffTimeoutSpellings(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  time.Duration
		ok    bool
	}{
		{"0s", 0, true},
		{"0", 0, true},
		{"unlimited", 0, true},
		{"disabled", 0, true},
		{"none", 0, true},
		{"Unlimited", 0, true},
		{"15s", 15 * time.Second, true},
		{"2m", 2 * time.Minute, true},
		{"forever", 0, false},
		{"", 0, false},
		{"-1s", 0, false}, // parses, and Validate refuses it
	} {
		for _, how := range []string{"flag", "env"} {
			t.Run(how+" "+tc.value, func(t *testing.T) {
				var cfg actors.Config
				var err error
				if how == "flag" {
					cfg, err = parseNode(t, "--shutdown-handoff-timeout="+tc.value)
				} else {
					t.Setenv("NARAD_SHUTDOWN_HANDOFF_TIMEOUT", tc.value)
					cfg, err = parseNode(t)
				}
				switch {
				case !tc.ok && err == nil:
					t.Errorf("%s %q: got %v, want an error", how, tc.value, cfg.ShutdownHandoffTimeout)
				case tc.ok && err != nil:
					t.Errorf("%s %q: got %v, want %v", how, tc.value, err, tc.want)
				case tc.ok && cfg.ShutdownHandoffTimeout != tc.want:
					t.Errorf("%s %q: got %v, want %v", how, tc.value, cfg.ShutdownHandoffTimeout, tc.want)
				case !tc.ok && !strings.Contains(err.Error(), "shutdown-handoff-timeout") && !strings.Contains(err.Error(), "SHUTDOWN_HANDOFF_TIMEOUT"):
					t.Errorf("%s %q: got %q, want the flag or variable named", how, tc.value, err)
				}
			})
		}
	}
}

func TestHelpListsEveryNodeFlagWithItsVariableAndRealDefault(t *testing.T) {
	def := actors.DefaultConfig()
	for _, cmd := range []string{"serve", "dev"} {
		var out bytes.Buffer
		var err error
		if cmd == "serve" {
			err = runServe(context.Background(), []string{"--help"}, io.Discard, &out)
		} else {
			err = runDev(context.Background(), []string{"--help"}, io.Discard, &out)
		}
		if !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("%s --help: got %v, want %v", cmd, err, flag.ErrHelp)
		}
		lines := strings.Split(out.String(), "\n")
		usageOf := func(name string) string {
			for i, l := range lines {
				if (l == "  -"+name || strings.HasPrefix(l, "  -"+name+" ")) && i+1 < len(lines) {
					return lines[i+1]
				}
			}
			return ""
		}
		for _, tc := range nodeFlagCases {
			u := usageOf(tc.flag)
			if !strings.Contains(u, "("+tc.env+")") {
				t.Errorf("%s --help, -%s: got %q, want it listed with (%s)", cmd, tc.flag, u, tc.env)
			}
			want := fmt.Sprintf("(default %v)", tc.get(def))
			if tc.get(def) == false || tc.get(def) == "" || tc.get(def) == time.Duration(0) {
				want = "" // flag prints no default for a false bool, an empty string or a zero duration
			}
			if !strings.HasSuffix(u, want) {
				t.Errorf("%s --help, -%s: got %q, want it to end in %q", cmd, tc.flag, u, want)
			}
		}
	}
}

func TestAValueValidateRefusesFailsAtParseNamingTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		env, val  string
		wantNamed string
	}{
		{args: []string{"--max-in-flight-moves", "0"}, wantNamed: "--max-in-flight-moves"},
		{args: []string{"--move-chunk-bytes", "1048576"}, wantNamed: "--move-chunk-bytes"},
		{args: []string{"--move-freeze-ttl", "1ms"}, wantNamed: "--move-freeze-ttl"},
		{args: []string{"--move-retry-after", "0s"}, wantNamed: "--move-retry-after"},
		{args: []string{"--move-full-scan-every", "500ms"}, wantNamed: "--move-full-scan-every"},
		{args: []string{"--max-new-freezes-per-tick", "200"}, wantNamed: "--max-new-freezes-per-tick"},
		{args: []string{"--dead-timeout", "3s"}, wantNamed: "--dead-timeout"},
		{args: []string{"--max-consume-wait", "1m"}, wantNamed: "--max-consume-wait"},
		{env: "NARAD_FREEZE_PACE_TICK", val: "2s", wantNamed: "--freeze-pace-tick (NARAD_FREEZE_PACE_TICK)"},
		{env: "NARAD_MOVE_MAX_CATCH_UP_PASSES", val: "0", wantNamed: "--move-max-catch-up-passes"},
		{args: []string{"--max-sweep-copies-per-pass", "0"}, wantNamed: "--max-sweep-copies-per-pass"},
		{env: "NARAD_SWEEP_PARALLEL_ASKS", val: "2000", wantNamed: "--sweep-parallel-asks (NARAD_SWEEP_PARALLEL_ASKS)"},
		{args: []string{"--nats-tls-ca", "ca.pem"}, wantNamed: "--nats-tls-ca"},
		{args: []string{"--nats-password", "p"}, wantNamed: "--nats-password"},
		{args: []string{"--http-tls-key", "api.key"}, wantNamed: "--http-tls-key"},
		{env: "NARAD_NATS_TLS_KEY", val: "n1.key", wantNamed: "--nats-tls-key (NARAD_NATS_TLS_KEY)"},
	} {
		t.Run(strings.Join(tc.args, " ")+tc.env, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(tc.env, tc.val)
			}
			for _, cmd := range []string{"serve", "dev"} {
				var err error
				if cmd == "serve" {
					err = runServe(context.Background(), tc.args, io.Discard, io.Discard)
				} else {
					err = runDev(context.Background(), tc.args, io.Discard, io.Discard)
				}
				if err == nil || !strings.Contains(err.Error(), tc.wantNamed) {
					t.Errorf("%s %q %s=%s: got %v, want a refusal that names %s", cmd, tc.args, tc.env, tc.val, err, tc.wantNamed)
				}
			}
		})
	}
}

// Fault injection is off unless asked for: a node started without
// --debug-faults or NARAD_DEBUG_FAULTS serves no /debug/faults (404,
// actors' TestFaultRoutesAreUnknownWithoutDebugFaults), and its help says
// the flag is never for production.
func TestDebugFaultsIsOffByDefaultAndItsHelpWarns(t *testing.T) {
	t.Setenv("NARAD_DEBUG_FAULTS", "true") // restored after the test
	os.Unsetenv("NARAD_DEBUG_FAULTS")
	cfg, err := parseNode(t)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DebugFaults {
		t.Fatalf("DebugFaults without the flag: got true, want false")
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	var nf nodeFlags
	nf.register(fs)
	f := fs.Lookup("debug-faults")
	if f == nil || f.DefValue != "false" || !strings.Contains(f.Usage, "never production") {
		t.Fatalf("--debug-faults: got %+v, want a false default and a usage that says never production", f)
	}
}

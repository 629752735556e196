package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/naradmq/narad/actors"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/cmd/narad/certs"
)

// env returns the NARAD_* variable name or def when it is unset.
func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// envInt is the default of a flag named in strictEnv, which refuses a
// value that does not parse.
func envInt(name string, def int) int {
	if v, ok := os.LookupEnv(name); ok {
		if i, err := strconv.Atoi(v); err == nil {
			return i
		}
	}
	return def
}

// envInt64 is envInt for an int64 flag.
func envInt64(name string, def int64) int64 {
	if v, ok := os.LookupEnv(name); ok {
		if i, err := strconv.ParseInt(v, 10, 64); err == nil {
			return i
		}
	}
	return def
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// newNodeLogger is newLogger at --log-level, with Dragonboat's lines held
// to --dragonboat-log-level as well.
func newNodeLogger(w io.Writer, level, dragonboatLevel string) (*slog.Logger, error) {
	var db slog.Level
	if err := db.UnmarshalText([]byte(dragonboatLevel)); err != nil {
		return nil, fmt.Errorf("--dragonboat-log-level %q: %w", dragonboatLevel, err)
	}
	metastore.SetDragonboatLevel(db)
	return newLogger(w, level)
}

// startProcess is the set-up serve and dev share before a node starts: the
// logger at the node flags' levels, GOMAXPROCS, the Go memory limit, and
// the pprof listener, which ends with ctx.
func startProcess(ctx context.Context, stderr io.Writer, nf *nodeFlags, procs int, pprofAddr string) (*slog.Logger, error) {
	log, err := newNodeLogger(stderr, nf.logLevel, nf.dragonboatLogLevel)
	if err != nil {
		return nil, err
	}
	if err := setProcs(procs, log); err != nil {
		return nil, err
	}
	setMemoryLimit(nf.memoryLimitBytes, log)
	if _, err := servePprof(ctx, pprofAddr, log); err != nil {
		return nil, err
	}
	return log, nil
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var nf nodeFlags
	nf.register(fs)
	id := fs.String("id", env("NARAD_ID", "n1"), "node id (NARAD_ID)")
	data := fs.String("data", env("NARAD_DATA", "./data/n1"), "data directory (NARAD_DATA)")
	httpAddr := fs.String("http", env("NARAD_HTTP_ADDR", ":7942"), "HTTP listen address (NARAD_HTTP_ADDR)")
	raftAddr := fs.String("raft", env("NARAD_RAFT_ADDR", "127.0.0.1:7950"), "Raft address of the metastore (NARAD_RAFT_ADDR)")
	replica := fs.Uint64("replica-id", uint64(envInt("NARAD_REPLICA_ID", 1)), "Raft replica id, unique in the cluster and never reused (NARAD_REPLICA_ID)")
	natsURL := fs.String("nats", env("NARAD_NATS", ""), "NATS URL nodes talk through, or several comma-separated (the servers of a NATS cluster: the node moves to a live one when its server dies); empty runs without NATS (NARAD_NATS)")
	join := fs.Bool("join", env("NARAD_JOIN", "") == "true", "join a running cluster (asked over --nats) as a non-voting replica; pass it on every restart of a joined node; with --peers, only a node --peers does not name joins, so every pod of a StatefulSet can share one configuration (NARAD_JOIN=true)")
	peersFlag := fs.String("peers", env("NARAD_PEERS", ""), "the initial members as id=raftaddr,...; a node's replica id is its position, from 1 (NARAD_PEERS)")
	cluster := fs.String("cluster", env("NARAD_CLUSTER", "narad"), "cluster name in NATS subjects (NARAD_CLUSTER)")
	var raftTLS [3]string
	fs.StringVar(&raftTLS[0], "raft-tls-ca", env("NARAD_RAFT_TLS_CA", ""), "CA file every Raft peer's certificate must chain to; with --raft-tls-cert and --raft-tls-key, Raft runs over mutual TLS (narad cert makes the three files) (NARAD_RAFT_TLS_CA)")
	fs.StringVar(&raftTLS[1], "raft-tls-cert", env("NARAD_RAFT_TLS_CERT", ""), "certificate file this node presents to its Raft peers (NARAD_RAFT_TLS_CERT)")
	fs.StringVar(&raftTLS[2], "raft-tls-key", env("NARAD_RAFT_TLS_KEY", ""), "key file of --raft-tls-cert (NARAD_RAFT_TLS_KEY)")
	insecureRaft := fs.Bool("insecure-raft", env("NARAD_INSECURE_RAFT", "") == "true",
		"run Raft over plain TCP, without --raft-tls-*: whoever reaches the Raft port then talks to the metastore, so only on a network no one else reaches; without it a node given no Raft certificates refuses to start (NARAD_INSECURE_RAFT=true)")
	logDBBuffer := fs.Uint64("raft-logdb-write-buffer-bytes", uint64(envInt("NARAD_RAFT_LOGDB_WRITE_BUFFER_BYTES", metastore.DefaultLogDBWriteBufferBytes)),
		"bytes of one metastore LogDB memtable; up to four are held per LogDB instance (NARAD_RAFT_LOGDB_WRITE_BUFFER_BYTES)")
	logDBShards := fs.Uint64("raft-logdb-shards", uint64(envInt("NARAD_RAFT_LOGDB_SHARDS", metastore.DefaultLogDBShards)),
		"LogDB instances of a new Raft directory, a count (1 to 64); an existing one keeps its count (NARAD_RAFT_LOGDB_SHARDS)")
	pprofAddr := fs.String("pprof", env("NARAD_PPROF", ""), "serve net/http/pprof (CPU, heap, block and mutex profiles) on this address, e.g. 127.0.0.1:6060; off when empty (NARAD_PPROF)")
	stopProfile := fs.String("stop-profile", env("NARAD_STOP_PROFILE", ""), "write a CPU profile of the shutdown, from the first stop signal until the process exits (the hand-off of rule B8 and the drain), into this file; off when empty (NARAD_STOP_PROFILE)")
	procs := fs.Int("gomaxprocs", envInt("NARAD_GOMAXPROCS", 0), "Go Ps to run; 0 is 4 per core, unless GOMAXPROCS is set (NARAD_GOMAXPROCS)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: narad serve [flags]\n\nRuns one broker node. Every flag has a NARAD_* environment variable.\nRaft between nodes runs over mutual TLS: give --raft-tls-ca, --raft-tls-cert and\n--raft-tls-key (narad cert create-ca, create-node make them), or --insecure-raft.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := nf.parse(fs, args); err != nil {
		return err
	}
	if nf.printConfig {
		return printConfig(stdout, fs)
	}
	log, err := startProcess(ctx, stderr, &nf, *procs, *pprofAddr)
	if err != nil {
		return err
	}
	cfg := actors.DefaultConfig()
	cfg.NodeID, cfg.DataDir, cfg.HTTPAddr = *id, *data, *httpAddr
	cfg.NATSURL, cfg.Cluster = *natsURL, *cluster
	nf.apply(&cfg)
	cfg.Version = buildVersion()
	// Not a flag: a password on the command line shows in ps.
	cfg.AdminPassword = os.Getenv("NARAD_ADMIN_PASSWORD")
	var mcfg metastore.Config
	mcfg.NodeID, mcfg.ReplicaID, mcfg.RaftAddr = *id, *replica, *raftAddr
	mcfg.InitialMembers = map[uint64]string{*replica: *raftAddr}
	mcfg.TLSCAFile, mcfg.TLSCertFile, mcfg.TLSKeyFile = raftTLS[0], raftTLS[1], raftTLS[2]
	mcfg.LogDBWriteBufferBytes, mcfg.LogDBShards = *logDBBuffer, *logDBShards
	if *join, *peersFlag, err = joinOrPeer(*join, *peersFlag, *id); err != nil {
		return err
	}
	if *join {
		if cfg.NATSURL == "" {
			return errors.New("--join asks the cluster over --nats, and --nats is empty")
		}
		mcfg.Join, mcfg.InitialMembers = true, nil
		if !replicaIDGiven(fs) {
			// The cluster allocates one (or the data dir holds it).
			mcfg.ReplicaID = 0
		}
	}
	if *peersFlag != "" {
		members, self, err := parsePeers(*peersFlag, *id)
		if err != nil {
			return err
		}
		mcfg.InitialMembers, mcfg.ReplicaID, mcfg.RaftAddr = members, self, members[self]
		if cfg.NATSURL == "" {
			return errors.New("--peers needs --nats: nodes reach each other's partitions over NATS")
		}
	}
	if err := raftSecurity(raftTLS, *insecureRaft, mcfg.RaftAddr, time.Now()); err != nil {
		return err
	}
	if *insecureRaft {
		log.Warn("Raft runs over plain TCP (--insecure-raft): whoever reaches the Raft port talks to the metastore", "raft", mcfg.RaftAddr)
	}
	return serveUntilSignal(ctx, cfg, mcfg, log, *stopProfile)
}

// errRaftInsecure: a node given no Raft certificates and no --insecure-raft.
var errRaftInsecure = errors.New("no Raft certificates: Raft runs over mutual TLS unless --insecure-raft is given")

// raftSecurity refuses a node whose Raft would run over plain TCP without
// being told so by name, and one whose certificate its peers would refuse
// (files that do not belong together or to the CA, or that do not name the
// host of raftAddr they dial): such a node would start, and then never
// reach its peers. A partial set of files is the metastore's to refuse.
func raftSecurity(files [3]string, insecure bool, raftAddr string, now time.Time) error {
	host, _, err := net.SplitHostPort(raftAddr)
	if err != nil {
		return fmt.Errorf("--raft %q: %w", raftAddr, err)
	}
	given := files[0] != "" || files[1] != "" || files[2] != ""
	switch {
	case insecure && given:
		return errors.New("--insecure-raft with --raft-tls-*: pick one (the files run Raft over mutual TLS)")
	case insecure:
		return nil
	case !given:
		return fmt.Errorf("%w; %s", errRaftInsecure, raftCertsHowTo(host))
	case files[0] == "" || files[1] == "" || files[2] == "":
		return nil
	}
	if err := certs.Check(files[0], files[1], files[2], host, now); err != nil {
		return fmt.Errorf("--raft-tls-*: %w", err)
	}
	return nil
}

// replicaIDGiven reports whether --replica-id or NARAD_REPLICA_ID names an
// id, rather than the flag holding its default.
func replicaIDGiven(fs *flag.FlagSet) bool {
	_, given := os.LookupEnv("NARAD_REPLICA_ID")
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "replica-id" })
	return given
}

// joinOrPeer settles --join beside --peers, which lets every pod of a
// StatefulSet share one configuration: a node --peers names is one of the
// initial members, any other joins. Alone, each keeps its meaning.
func joinOrPeer(join bool, peers, id string) (bool, string, error) {
	if !join || peers == "" {
		return join, peers, nil
	}
	switch _, _, err := parsePeers(peers, id); {
	case err == nil:
		return false, peers, nil
	case errors.Is(err, errNotAPeer):
		return true, "", nil
	default:
		return false, "", err
	}
}

// errNotAPeer: --peers does not name this node. With --join too, the node
// joins instead.
var errNotAPeer = errors.New("--peers does not name this node")

// parsePeers reads id=raftaddr,... into replica ids (positions from 1) and
// finds this node's.
func parsePeers(s, self string) (map[uint64]string, uint64, error) {
	members := map[uint64]string{}
	var mine uint64
	for i, p := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || id == "" || addr == "" {
			return nil, 0, fmt.Errorf("--peers: %q is not id=raftaddr", p)
		}
		members[uint64(i+1)] = addr
		if id == self {
			mine = uint64(i + 1)
		}
	}
	if mine == 0 {
		return nil, 0, fmt.Errorf("%w (--id %s)", errNotAPeer, self)
	}
	return members, mine, nil
}

// serveUntilSignal runs a node until ctx ends (the first SIGTERM/SIGINT)
// or it left the cluster. At the signal it hands its partitions off
// (rules B8, B9: until it owns nothing, the timeout, or the second
// signal); then it stops gracefully.
func serveUntilSignal(ctx context.Context, cfg actors.Config, mcfg metastore.Config, log *slog.Logger, stopProfile string) error {
	n, err := actors.Start(ctx, cfg, mcfg, log)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		defer profileCPU(stopProfile, log)()
		handoff, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-secondSignal(ctx):
				cancel()
			case <-handoff.Done():
			}
		}()
		if _, _, err := n.HandOff(handoff, cfg.ShutdownHandoffTimeout); err != nil {
			log.Warn("hand-off", "err", err)
		}
		log.Info("stopping: produce answers 503 while the ingress WAL drains")
	case <-n.Left():
		log.Warn("stopping: this node left the cluster, so the process exits", "why", n.LeftReason())
	}
	return n.Stop(context.Background())
}

func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var nf nodeFlags
	nf.register(fs)
	fs.Lookup("security-enabled").Usage = "ignored: narad dev always runs with security off (NARAD_SECURITY_ENABLED)"
	data := fs.String("data", "./data/dev", "data directory, kept across restarts")
	fresh := fs.Bool("fresh", false, "start with an empty data directory")
	httpBase := fs.String("http-base", "127.0.0.1:7942", "HTTP address of the first node; further nodes take the next ports")
	nodes := fs.Int("nodes", 1, "number of nodes, each a voter of the metastore (1 to 9)")
	pprofAddr := fs.String("pprof", "", "serve net/http/pprof (CPU, heap, block and mutex profiles) on this address, e.g. 127.0.0.1:6060; off when empty")
	procs := fs.Int("gomaxprocs", 0, "Go Ps to run; 0 is 4 per core, unless GOMAXPROCS is set")
	natsPort := fs.Int("nats-port", envInt("NARAD_NATS_PORT", devNATSPort), "port of the embedded NATS server, on --http-base's host; 0 takes a free one (NARAD_NATS_PORT)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: narad dev [flags]\n\nRuns a local broker (one or more nodes in one process) with an embedded NATS\nserver (on port %d, where narad cluster and the nats CLI look by default)\nand security off.\n\nFlags:\n", devNATSPort)
		fs.PrintDefaults()
	}
	if err := nf.parse(fs, args); err != nil {
		return err
	}
	if *nodes < 1 || *nodes > maxDevNodes {
		return fmt.Errorf("--nodes %d: want 1 to %d", *nodes, maxDevNodes)
	}
	if *natsPort < 0 || *natsPort > 65535 {
		return fmt.Errorf("--nats-port %d: want 0 to 65535", *natsPort)
	}
	if nf.printConfig {
		return printConfig(stdout, fs)
	}
	log, err := startProcess(ctx, stderr, &nf, *procs, *pprofAddr)
	if err != nil {
		return err
	}
	if *fresh {
		if err := os.RemoveAll(*data); err != nil {
			return fmt.Errorf("--fresh: %w", err)
		}
	}
	host, port, err := net.SplitHostPort(*httpBase)
	if err != nil {
		return fmt.Errorf("--http-base %q: %w", *httpBase, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p+*nodes > 55535 {
		return fmt.Errorf("--http-base %q: needs a port below %d", *httpBase, 55536-*nodes)
	}
	if err := claimDevData(*data, devShape{Nodes: *nodes, HTTPBase: *httpBase}); err != nil {
		return err
	}
	// Raft runs over mutual TLS as in production, on a CA and a
	// certificate made at the first start and kept in the data directory.
	raftTLS, err := devRaftCerts(filepath.Join(*data, devRaftCertsDir), strings.Trim(host, "[]"), time.Now())
	if err != nil {
		return err
	}
	// The embedded NATS server authenticates like a production one: the
	// nodes get the node seed, the banner names the admin's.
	cluster := actors.DefaultConfig().Cluster
	sec, created, err := natsSecurityIn(filepath.Join(*data, "nats"), cluster, transport.TLSFiles{})
	if err != nil {
		return err
	}
	ns, err := startDevNATS(host, *natsPort, sec)
	if err != nil {
		return err
	}
	defer ns.Shutdown()

	// Every node's Raft address is derived from its HTTP port so that it is
	// stable across restarts: a metastore directory is bound to its address.
	peers := map[uint64]string{}
	for i := 1; i <= *nodes; i++ {
		peers[uint64(i)] = net.JoinHostPort(host, strconv.Itoa(p+10000+i-1))
	}
	started := make([]*actors.Node, *nodes)
	errs := make(chan error, *nodes)
	for i := 1; i <= *nodes; i++ {
		id := "n" + strconv.Itoa(i)
		cfg := actors.DefaultConfig()
		cfg.NodeID, cfg.DataDir, cfg.HTTPAddr = id, filepath.Join(*data, id), net.JoinHostPort(host, strconv.Itoa(p+i-1))
		cfg.NATSURL = ns.ClientURL()
		nf.apply(&cfg)
		cfg.Version = buildVersion()
		cfg.Cluster = cluster
		cfg.NATSAuth = transport.Auth{CredsFile: sec.creds.File(transport.RoleNode)}
		cfg.SecurityEnabled = false // §2.2: anonymous requests act as root
		mcfg := metastore.Config{NodeID: id, ReplicaID: uint64(i), RaftAddr: peers[uint64(i)], InitialMembers: peers,
			TLSCAFile: raftTLS[0], TLSCertFile: raftTLS[1], TLSKeyFile: raftTLS[2]}
		// The metastore needs a quorum to become ready, so every node starts
		// at once.
		go func() {
			n, err := actors.Start(ctx, cfg, mcfg, log)
			started[i-1] = n
			errs <- err
		}()
	}
	var startErr error
	for range *nodes {
		if err := <-errs; err != nil && startErr == nil {
			startErr = err
		}
	}
	// Nodes stop together: each drains its ingress WAL into partitions
	// that may live on the others, which must still be serving.
	stopAll := func() error {
		stopErrs := make(chan error, len(started))
		for _, n := range started {
			go func() {
				if n == nil {
					stopErrs <- nil
					return
				}
				stopErrs <- n.Stop(context.Background())
			}()
		}
		var first error
		for range started {
			if err := <-stopErrs; err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	if startErr != nil {
		stopAll()
		return startErr
	}
	base := "http://" + started[0].Addr()
	fmt.Fprintf(stdout, "narad dev: %d node(s), HTTP from %s (data in %s)\n", *nodes, base, *data)
	natsFlag := ""
	if ns.ClientURL() == defaultNATS {
		fmt.Fprintf(stdout, "NATS on %s: narad cluster and the nats CLI find it there without --nats/--server\n", ns.ClientURL())
	} else {
		natsFlag = " --nats " + ns.ClientURL()
		fmt.Fprintf(stdout, "NATS on %s: pass it to narad cluster with --nats, to the nats CLI with --server\n", ns.ClientURL())
	}
	for _, n := range started[1:] {
		fmt.Fprintf(stdout, "  also http://%s\n", n.Addr())
	}
	fmt.Fprintln(stdout, "HTTP API security is off: no credentials are needed (one sent is ignored), every request acts as root, /v1/users is open. Use narad serve for a secured API.")
	fmt.Fprintf(stdout, "Raft between the nodes runs over mutual TLS, certificates in %s (made at the first start)\n", filepath.Join(*data, devRaftCertsDir))
	printCredentials(stdout, sec.creds, created)
	fmt.Fprintf(stdout, `
Try it:
  curl -s -X POST %s/v1/topics -d '{"name":"orders"}'
  curl -s -X POST %s/v1/topics/orders/produce -d '{"id":1}'
  curl -s '%s/v1/topics/orders/consume?wait=5s'
  curl -s -X POST '%s/v1/topics/orders/ack?receipt_handle=<receipt_handle from the consume>'
  go run ./cmd/narad cluster members%s --nats-creds %s

Stop with Ctrl-C.
`, base, base, base, base, natsFlag, sec.creds.File(transport.RoleAdmin))
	<-ctx.Done()
	return stopAll()
}

// devRaftCertsDir is where in its data directory narad dev keeps the CA
// and the node certificate its nodes' Raft runs on.
const devRaftCertsDir = "raft-tls"

// devRaftCerts makes, at the first start, a CA and one certificate for
// host that every node of narad dev presents (they share the host), and
// returns the three files, checked as narad serve checks its own.
func devRaftCerts(dir, host string, now time.Time) ([3]string, error) {
	files := [3]string{filepath.Join(dir, certs.CAFile), filepath.Join(dir, certs.NodeName+".crt"), filepath.Join(dir, certs.NodeName+".key")}
	// A new CA makes any node certificate left beside it worthless.
	_, err := os.Stat(files[0])
	newCA := errors.Is(err, os.ErrNotExist)
	if newCA {
		if _, err := certs.CreateCA(dir, "", now, certs.DefaultCALifetime, true); err != nil {
			return files, fmt.Errorf("dev raft certificates: %w", err)
		}
	}
	if _, err := os.Stat(files[1]); newCA || errors.Is(err, os.ErrNotExist) {
		hosts := []string{host}
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			hosts = append(hosts, "localhost")
		}
		if _, err := certs.CreateNode(dir, "", certs.NodeName, hosts, now, certs.DefaultNodeLifetime, true); err != nil {
			return files, fmt.Errorf("dev raft certificates: %w", err)
		}
	}
	if err := certs.Check(files[0], files[1], files[2], host, now); err != nil {
		return files, fmt.Errorf("dev raft certificates: %w (remove %s to make new ones)", err, dir)
	}
	return files, nil
}

// maxDevNodes bounds narad dev's --nodes: every node is a voter of the
// metastore in one process, and Raft past nine voters only slows commits.
const maxDevNodes = 9

// devNATSPort is where narad dev's embedded NATS listens by default: the
// NATS port, so that narad cluster (defaultNATS) and the stock nats CLI
// find it with no flag.
const devNATSPort = 4222

// errNATSPortTaken is a fixed dev NATS port something else listens on.
var errNATSPortTaken = errors.New("port taken")

// startDevNATS starts the embedded NATS server nodes talk through on host
// and port, a free one when port is 0. A taken port is found first: the
// server itself only fails to become ready, after its start timeout and
// without saying why.
func startDevNATS(host string, port int, sec natsSecurity) (*natsserver.Server, error) {
	host = strings.Trim(host, "[]")
	if port == 0 {
		return startNATSAt(host, natsserver.RANDOM_PORT, sec)
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("embedded nats on %s: %w: %w; is another narad dev or a NATS server running there? stop it, or pass --nats-port N (0: any free port)",
			addr, errNATSPortTaken, err)
	}
	l.Close()
	return startNATSAt(host, port, sec)
}

// natsSecurity is how a NATS server narad runs authenticates clients: the
// seeds of its roles under one cluster's permissions, and TLS when files
// are set.
type natsSecurity struct {
	cluster string
	creds   transport.Credentials
	tls     transport.TLSFiles
}

// natsSecurityIn reads the seeds kept in dir, generating the missing ones
// (created reports it).
func natsSecurityIn(dir, cluster string, files transport.TLSFiles) (natsSecurity, bool, error) {
	if err := files.Validate(); err != nil {
		return natsSecurity{}, false, fmt.Errorf("nats tls: %w", err)
	}
	creds, created, err := transport.EnsureCredentials(dir)
	if err != nil {
		return natsSecurity{}, false, err
	}
	return natsSecurity{cluster: cluster, creds: creds, tls: files}, created, nil
}

// printCredentials says where the seeds are and which takes what.
func printCredentials(w io.Writer, c transport.Credentials, created bool) {
	how := "kept from an earlier start"
	if created {
		how = "generated now"
	}
	// Each identity reads replies under its own inbox only: the nats CLI
	// must be told it, narad cluster derives it from the seed.
	fmt.Fprintf(w, `NATS credentials in %s (%s); a client without one cannot connect:
  nodes:  narad serve --nats-creds %s
  admin:  narad cluster ... --nats-creds %s   (nats CLI: --nkey %s --inbox-prefix %s)
  viewer: %s (read verbs only: members, status, topics, moves, quarantine; nats CLI: --inbox-prefix %s)
`, c.Dir, how, c.File(transport.RoleNode), c.File(transport.RoleAdmin), c.File(transport.RoleAdmin),
		transport.InboxPrefix(c.Public[transport.RoleAdmin]), c.File(transport.RoleViewer), transport.InboxPrefix(c.Public[transport.RoleViewer]))
}

// natsMaxPayloadBytes is the max_payload of the NATS server narad embeds.
// NATS's default 1 MiB cannot carry a commit of one largest record (1 MiB
// body, 64 KiB key) to its owner, and a node refuses a server that cannot
// carry its largest commit (actors.Config.MaxRemoteCommitBytes, 2 MiB by
// default, with envelope and headers). 8 MiB leaves room to raise that and
// is the most NATS takes without warning of poor performance.
const natsMaxPayloadBytes = 8 << 20

// startNATSAt starts a NATS server narad embeds. NoSigs: without it the
// server exits the process on SIGTERM itself, before the node could stop
// gracefully.
func startNATSAt(host string, port int, sec natsSecurity) (*natsserver.Server, error) {
	return startNATSWith(&natsserver.Options{Host: host, Port: port, NoSigs: true, NoLog: true, MaxPayload: natsMaxPayloadBytes}, sec)
}

// startNATSWith starts a NATS server of o secured by sec.
func startNATSWith(o *natsserver.Options, sec natsSecurity) (*natsserver.Server, error) {
	if err := transport.SecureServer(o, sec.cluster, sec.creds, sec.tls); err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	s, err := natsserver.NewServer(o)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errors.New("embedded nats did not start")
	}
	return s, nil
}

package proc

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/naradmq/narad/cmd/narad/certs"
)

// Node is one narad serve process and what it needs to be started again.
type Node struct {
	ID      string
	HTTP    string // host:port
	Raft    string
	Replica int
	Joiner  bool
	Proc    *Proc
	// Past holds the processes this node ran before a restart, for their
	// peak RSS.
	Past []*Proc
	// Pprof is where it serves its profiles (host:port), "" for nowhere.
	Pprof string
	// NATSURL, when set, is the node's --nats instead of the cluster's: a
	// proxy in front of NATS, say, that the run can cut.
	NATSURL string
}

// URL is the node's HTTP base, http://host:port.
func (n *Node) URL() string { return "http://" + n.HTTP }

// PeakRSS is the highest VmHWM of any process the node ran, in KiB.
func (n *Node) PeakRSS() int64 {
	var k int64
	for _, p := range append(n.Past, n.Proc) {
		if p != nil {
			k = max(k, p.PeakRSS())
		}
	}
	return k
}

// Cluster is NATS and the nodes of one run, all under Dir: each process's
// log is Dir/<name>.log, a node's data Dir/<id>, NATS's credentials
// Dir/nats.
type Cluster struct {
	Bin string
	Dir string
	// Env is every node's environment; nil is this program's.
	Env []string
	// Args are flags every node gets after the ones StartNode sets
	// (--dead-timeout 3s, say).
	Args []string
	// StopProfiles, when set, is the path prefix of each node's CPU profile
	// of its shutdown (--stop-profile): <prefix>-<node>-run<k>.stop.cpu.pprof
	// for its k-th process. The stopped node's is the hand-off's own cost,
	// which no profile over HTTP can take from a process that exits.
	StopProfiles string
	// RSSPoll is how often each process's VmHWM is read; 0 never.
	RSSPoll time.Duration
	// NATSURL is every NATS server's client URL, comma-separated: what a
	// node is given by default.
	NATSURL string
	// NATS is the first NATS server's process.
	NATS *Proc
	// NATSServers are the NATS servers, one unless UseNATSCluster.
	NATSServers []*NATSServer
	Nodes       []*Node
	taken       map[int]bool
	// peers is Peers, set at its first call (at the latest in Replace).
	peers string
	// retired is the highest replica id of a node Replace took out, never
	// given again.
	retired int

	// netns, when UseNetns made it, holds a namespace per node slot.
	netns *Netns
	// disks, when UseLoopDisks made them, are a file system per node slot.
	disks *loopDisks

	// mu guards procs, and the making of the Raft certificates.
	mu    sync.Mutex
	procs []*Proc // every process started, for the cleanup
}

// Build builds narad (cmd/narad of the module this runs in, from any of
// its directories: a test's is its package's) once into dir and returns the
// binary's path.
func Build(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "narad")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/naradmq/narad/cmd/narad")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build github.com/naradmq/narad/cmd/narad: %w\n%s", err, out.String())
	}
	return bin, nil
}

// New picks the ports of NATS and of nodes node ids n1..nN, total of them:
// the first voters start with --peers, any further one joins. Nothing
// starts yet.
func New(bin, dir string, voters, total int) (*Cluster, error) {
	c := &Cluster{Bin: bin, Dir: dir, taken: map[int]bool{}}
	p, err := FreePort(c.taken)
	if err != nil {
		return nil, err
	}
	c.NATSServers = []*NATSServer{{Name: "nats", Addr: fmt.Sprintf("127.0.0.1:%d", p)}}
	c.NATSURL = "nats://" + c.NATSServers[0].Addr
	for i := 1; i <= total; i++ {
		hp, err := FreePort(c.taken)
		if err != nil {
			return nil, err
		}
		rp, err := FreePort(c.taken)
		if err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, &Node{ID: "n" + strconv.Itoa(i), Replica: i, Joiner: i > voters,
			HTTP: fmt.Sprintf("127.0.0.1:%d", hp), Raft: fmt.Sprintf("127.0.0.1:%d", rp)})
	}
	return c, nil
}

// Start runs one process of Bin with its output appended to Dir/name.log,
// in a process group of its own: a Ctrl-C on the terminal reaches only this
// program, which then stops the children itself. Close kills it.
func (c *Cluster) Start(name string, env []string, args ...string) (*Proc, error) {
	return c.startIn("", name, env, args...)
}

// startIn is Start in network namespace ns ("" for the bench's own):
// `ip netns exec` enters it and execs Bin in its place, so the process is
// Bin itself to every signal.
func (c *Cluster) startIn(ns, name string, env []string, args ...string) (*Proc, error) {
	bin := c.Bin
	if ns != "" {
		bin, args = "ip", append([]string{"netns", "exec", ns, c.Bin}, args...)
	}
	p, err := start(bin, name, filepath.Join(c.Dir, name+".log"), c.RSSPoll, env, args...)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p, nil
}

// Environ is this program's environment without the variables named in
// drop, with add (NAME=value each) appended: a node's Env when the harness
// sets some variables itself.
func Environ(drop []string, add ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, d := range drop {
			if name == d {
				keep = false
			}
		}
		if keep {
			env = append(env, kv)
		}
	}
	return append(env, add...)
}

// ServePprof gives every node a loopback port for --pprof.
func (c *Cluster) ServePprof() error {
	for _, n := range c.Nodes {
		p, err := FreePort(c.taken)
		if err != nil {
			return err
		}
		n.Pprof = fmt.Sprintf("127.0.0.1:%d", p)
	}
	return nil
}

// StartNATS starts every NATS server and waits until each accepts
// connections.
func (c *Cluster) StartNATS(ctx context.Context, timeout time.Duration) error {
	for i := range c.NATSServers {
		if err := c.StartNATSServer(ctx, i, timeout); err != nil {
			return err
		}
	}
	c.NATS = c.NATSServers[0].Proc
	return nil
}

// StartNATSServer starts NATS server i, or starts it again after it exited
// (its last process joins Past), and waits until it accepts connections.
// The servers share the credentials in NATSCreds: the first start writes
// them, before it listens.
func (c *Cluster) StartNATSServer(ctx context.Context, i int, timeout time.Duration) error {
	s := c.NATSServers[i]
	args := []string{"nats", "--listen", s.Addr, "--data", c.NATSCreds()}
	if s.Route != "" {
		var routes []string
		for _, o := range c.NATSServers {
			if o != s {
				routes = append(routes, "nats://"+o.Route)
			}
		}
		// No advertising: a client told of the other servers would
		// reconnect to them directly, past a proxy that cuts it off.
		args = append(args, "--cluster-listen", s.Route, "--routes", strings.Join(routes, ","), "--no-advertise")
	}
	p, err := c.Start(s.Name, os.Environ(), args...)
	if err != nil {
		return err
	}
	if s.Proc != nil {
		s.Past = append(s.Past, s.Proc)
	}
	s.Proc = p
	err = Poll(ctx, timeout, 50*time.Millisecond, p, func() bool {
		conn, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	if err != nil {
		return fmt.Errorf("%s on %s: %w\n%s", s.Name, s.Addr, err, Tail(p.LogPath))
	}
	return nil
}

// NATSServer is one narad nats process.
type NATSServer struct {
	Name string
	// Addr is where clients connect (host:port); Route where the other
	// servers route to, "" for a server alone.
	Addr, Route string
	Proc        *Proc
	Past        []*Proc
}

// UseNATSCluster makes NATS a cluster of n servers, nats1..natsN, routed
// to each other on loopback, in place of the one New picked. Call it before
// StartNATS.
func (c *Cluster) UseNATSCluster(n int) error {
	var servers []*NATSServer
	var urls []string
	for i := 1; i <= n; i++ {
		cp, err := FreePort(c.taken)
		if err != nil {
			return err
		}
		rp, err := FreePort(c.taken)
		if err != nil {
			return err
		}
		s := &NATSServer{Name: "nats" + strconv.Itoa(i), Addr: fmt.Sprintf("127.0.0.1:%d", cp), Route: fmt.Sprintf("127.0.0.1:%d", rp)}
		servers = append(servers, s)
		urls = append(urls, "nats://"+s.Addr)
	}
	c.NATSServers, c.NATSURL = servers, strings.Join(urls, ",")
	return nil
}

// NATSCreds is where narad nats writes the credentials, before it listens.
func (c *Cluster) NATSCreds() string { return filepath.Join(c.Dir, "nats") }

// Peers is the --peers value of the voters New made: always the same, since
// a voter's replica id is its position in it; a voter that Replace took
// out stays in it, or the voters after it would restart under another
// replica id.
func (c *Cluster) Peers() string {
	if c.peers != "" {
		return c.peers
	}
	var s []string
	for _, n := range c.Nodes {
		if !n.Joiner {
			s = append(s, n.ID+"="+n.Raft)
		}
	}
	c.peers = strings.Join(s, ",")
	return c.peers
}

// RaftCerts is where the run's Raft CA and the loopback certificate every
// node presents are, made at the first StartNode: the nodes run Raft over
// mutual TLS as production does. Made here rather than by Bin, so that a
// binary of an older revision (an A/B) runs over TLS too.
func (c *Cluster) RaftCerts() string { return filepath.Join(c.Dir, "raft-tls") }

// raftTLSArgs makes the run's Raft certificates once and returns the flags
// that pass them. Under mu: nodes may start from several goroutines.
func (c *Cluster) raftTLSArgs() ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	dir := c.RaftCerts()
	node := filepath.Join(dir, certs.NodeName)
	if _, err := os.Stat(node + ".crt"); errors.Is(err, os.ErrNotExist) {
		if _, err := certs.CreateCA(dir, "", time.Now(), certs.DefaultCALifetime, true); err != nil {
			return nil, err
		}
		// Every slot's Raft host: loopback, or each namespace's address
		// (UseNetns), which a replaced node keeps.
		hosts := []string{"127.0.0.1", "localhost"}
		for _, n := range c.Nodes {
			if h := hostOf(n.Raft); !slices.Contains(hosts, h) {
				hosts = append(hosts, h)
			}
		}
		if _, err := certs.CreateNode(dir, "", certs.NodeName, hosts, time.Now(), certs.DefaultNodeLifetime, true); err != nil {
			return nil, err
		}
	}
	return []string{"--raft-tls-ca", filepath.Join(dir, certs.CAFile), "--raft-tls-cert", node + ".crt", "--raft-tls-key", node + ".key"}, nil
}

// StartNode starts one node as deploy/local-cluster.sh does, or starts it
// again on its data after it exited (its last process joins Past).
func (c *Cluster) StartNode(n *Node) error {
	tlsArgs, err := c.raftTLSArgs()
	if err != nil {
		return fmt.Errorf("raft certificates: %w", err)
	}
	args := []string{"serve", "--id", n.ID, "--data", c.DataDir(n), "--http", n.HTTP,
		"--raft", n.Raft, "--nats", cmp.Or(n.NATSURL, c.NATSURL), "--nats-creds", filepath.Join(c.NATSCreds(), "node.nk")}
	args = append(args, tlsArgs...)
	if n.Pprof != "" {
		args = append(args, "--pprof", n.Pprof)
	}
	if c.StopProfiles != "" {
		args = append(args, "--stop-profile", fmt.Sprintf("%s-%s-run%d.stop.cpu.pprof", c.StopProfiles, n.ID, len(n.Past)+1))
	}
	if n.Joiner {
		args = append(args, "--join", "--replica-id", strconv.Itoa(n.Replica))
	} else {
		args = append(args, "--peers", c.Peers())
	}
	args = append(args, c.Args...)
	ns := ""
	if c.netns != nil {
		var err error
		if ns, err = c.slotOf(n); err != nil {
			return err
		}
	}
	p, err := c.startIn(ns, n.ID, c.Env, args...)
	if err != nil {
		return err
	}
	if n.Proc != nil {
		n.Past = append(n.Past, n.Proc)
	}
	n.Proc = p
	return nil
}

// WaitReady waits until the node's /readyz answers 200 and returns how long
// that took from the exec.
func (c *Cluster) WaitReady(ctx context.Context, n *Node, timeout time.Duration) (time.Duration, error) {
	hc := &http.Client{Timeout: time.Second}
	err := Poll(ctx, timeout, 50*time.Millisecond, n.Proc, func() bool {
		resp, err := hc.Get(n.URL() + "/readyz")
		if err != nil {
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if errors.Is(err, context.Canceled) {
		return 0, err
	}
	if err != nil {
		return 0, fmt.Errorf("%s ready: %w\n%s", n.ID, err, Tail(n.Proc.LogPath))
	}
	return time.Since(n.Proc.Started), nil
}

// Stop sends SIGTERM to a node and waits for its exit, at most timeout; past
// it the node is killed and ErrTimeout returned. A node that already exited
// by itself (a decommissioned one does, right after it leaves) is stopped:
// 0 and no error.
func (c *Cluster) Stop(ctx context.Context, n *Node, timeout time.Duration) (time.Duration, error) {
	p := n.Proc
	sent := time.Now()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); errors.Is(err, os.ErrProcessDone) {
		<-p.done
		return 0, nil
	} else if err != nil {
		return 0, fmt.Errorf("sigterm %s: %w", n.ID, err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return p.exited.Sub(sent), nil
	case <-t.C:
		p.KillGroup()
		<-p.done
		return 0, fmt.Errorf("%s did not exit: %w", n.ID, ErrTimeout)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Close kills every process still running and waits for each to exit.
func (c *Cluster) Close() {
	c.mu.Lock()
	procs := append([]*Proc(nil), c.procs...)
	c.mu.Unlock()
	for _, p := range procs {
		p.KillGroup()
	}
	for _, p := range procs {
		<-p.done
	}
	if c.netns != nil {
		if err := c.netns.close(); err != nil {
			fmt.Fprintf(os.Stderr, "proc: remove the network namespaces: %v\n", err)
		}
		c.netns = nil
	}
	if c.disks != nil {
		if err := c.disks.close(); err != nil {
			fmt.Fprintf(os.Stderr, "proc: unmount the loop disks: %v\n", err)
		}
		c.disks = nil
	}
}

// Replace puts a fresh node in slot i, in place of one that left the
// cluster (decommissioned): the next free id and replica id, a data
// directory of its own, a new Raft port, and the slot's HTTP port and NATS
// URL, so that clients of the slot reach it. It joins when started. The
// node it replaces must have exited.
func (c *Cluster) Replace(i int) (*Node, error) {
	old := c.Nodes[i]
	if old.Proc != nil && old.Proc.Running() {
		return nil, fmt.Errorf("replace %s: still running", old.ID)
	}
	c.Peers()
	replica := 0
	for _, n := range c.Nodes {
		replica = max(replica, n.Replica)
	}
	replica = max(replica, c.retired) + 1
	rp, err := FreePort(c.taken)
	if err != nil {
		return nil, err
	}
	n := &Node{ID: "n" + strconv.Itoa(replica), Replica: replica, Joiner: true, HTTP: old.HTTP,
		Raft: net.JoinHostPort(hostOf(old.Raft), strconv.Itoa(rp)), Pprof: old.Pprof, NATSURL: old.NATSURL}
	c.retired = max(c.retired, old.Replica)
	c.Nodes[i] = n
	return n, nil
}

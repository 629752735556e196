package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// handoffEnv is the variable that turns the shutdown hand-off off (0s); the
// "on" variant removes it from the environment so the node's default holds.
const handoffEnv = "NARAD_SHUTDOWN_HANDOFF_TIMEOUT"

// Port range the harness picks from: below 32768, so that no outgoing
// connection's ephemeral port can take one (the house rule for test ports).
const (
	portLow  = 20000
	portHigh = 32000
)

// errPortsExhausted is a run that found no free port to start a process on.
var errPortsExhausted = errors.New("no free port")

// freePort returns a port below 32768 that was free a moment ago: it is
// listened on and closed again, and the process that gets it listens on it
// a few hundred milliseconds later. Another program may take it in between;
// the process then fails to start and the run stops with its log's tail,
// which is a rerun, not a wrong figure.
func freePort(taken map[int]bool) (int, error) {
	for range 200 {
		p := portLow + rand.IntN(portHigh-portLow)
		if taken[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l.Close()
		taken[p] = true
		return p, nil
	}
	return 0, errPortsExhausted
}

// proc is one child process: the NATS server or a node.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	started time.Time
	// done is closed once the process has exited; exitErr and exited are
	// set before it closes.
	done    chan struct{}
	exitErr error
	exited  time.Time

	mu    sync.Mutex
	peakK int64 // VmHWM in KiB, the highest read
}

// peakRSS returns the highest VmHWM read from the process, in KiB.
func (p *proc) peakRSS() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peakK
}

// sampleRSS reads VmHWM once. The kernel keeps it as the peak itself, so the
// last read before the exit is the process's peak, give or take what it
// grew in its last poll interval.
func (p *proc) sampleRSS() {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return
	}
	for line := range strings.Lines(string(raw)) {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err == nil {
			p.mu.Lock()
			p.peakK = max(p.peakK, kb)
			p.mu.Unlock()
		}
	}
}

// running reports whether the process has not exited yet.
func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// node is one narad serve process and what it needs to be started again.
type node struct {
	id      string
	http    string // host:port
	raft    string
	replica int
	joiner  bool
	proc    *proc
	// past holds the processes this node ran before a restart, for their
	// peak RSS.
	past []*proc
	// pprof is where it serves its profiles (host:port), "" for nowhere.
	pprof string
}

func (n *node) url() string { return "http://" + n.http }

// cluster is NATS and the nodes of one scenario, all under dir.
type cluster struct {
	bin     string
	dir     string
	handoff bool // false: the nodes get NARAD_SHUTDOWN_HANDOFF_TIMEOUT=0s
	// stopProfiles, when set, is the path prefix of each node's CPU profile
	// of its shutdown (--stop-profile): <prefix>-<node>-run<k>.stop.cpu.pprof
	// for its k-th process. The stopped node's is the hand-off's own cost,
	// which no profile over HTTP can take from a process that exits.
	stopProfiles string
	rssPoll      time.Duration
	natsURL      string
	nats         *proc
	nodes        []*node
	taken        map[int]bool

	mu    sync.Mutex
	procs []*proc // every process started, for the cleanup
}

// buildBinary builds narad once into dir.
func buildBinary(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "narad")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/narad")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/narad: %w\n%s", err, out.String())
	}
	return bin, nil
}

// newCluster picks the ports of NATS and of nodes node ids n1..nN (the
// first voters of them start with --peers, any further one joins).
func newCluster(bin, dir string, voters, total int, handoff bool, rssPoll time.Duration) (*cluster, error) {
	c := &cluster{bin: bin, dir: dir, handoff: handoff, rssPoll: rssPoll, taken: map[int]bool{}}
	p, err := freePort(c.taken)
	if err != nil {
		return nil, err
	}
	c.natsURL = fmt.Sprintf("nats://127.0.0.1:%d", p)
	for i := 1; i <= total; i++ {
		hp, err := freePort(c.taken)
		if err != nil {
			return nil, err
		}
		rp, err := freePort(c.taken)
		if err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, &node{id: "n" + strconv.Itoa(i), replica: i, joiner: i > voters,
			http: fmt.Sprintf("127.0.0.1:%d", hp), raft: fmt.Sprintf("127.0.0.1:%d", rp)})
	}
	return c, nil
}

// start runs one process with its output appended to dir/name.log, in a
// process group of its own: a Ctrl-C on the terminal reaches only this
// program, which then stops the children itself.
func (c *cluster) start(name string, env []string, args ...string) (*proc, error) {
	logPath := filepath.Join(c.dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log of %s: %w", name, err)
	}
	cmd := exec.Command(c.bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	go func() {
		err := cmd.Wait()
		p.exited = time.Now()
		p.exitErr = err
		f.Close()
		close(p.done)
	}()
	// The sampler ends with the process.
	go func() {
		t := time.NewTicker(c.rssPoll)
		defer t.Stop()
		for {
			p.sampleRSS()
			select {
			case <-p.done:
				return
			case <-t.C:
			}
		}
	}()
	return p, nil
}

// nodeEnv is this program's environment with the hand-off variable set for
// the variant: removed for "on" (so the default holds), 0s for "off".
func (c *cluster) nodeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, handoffEnv+"=") && !strings.HasPrefix(kv, "NARAD_ADMIN_PASSWORD=") {
			env = append(env, kv)
		}
	}
	if !c.handoff {
		env = append(env, handoffEnv+"=0s")
	}
	// The first metadata leader seeds admin with it (CONTRACT.md §2.1).
	return append(env, "NARAD_ADMIN_PASSWORD="+benchPassword)
}

// waitAdmin waits until admin can log in: the metadata leader seeds it in
// the background after its election, so /readyz can answer 200 first.
func (c *cluster) waitAdmin(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		var users []json.RawMessage
		err := getJSON(ctx, c.nodes[0].url(), "/v1/users", &users)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("admin cannot log in: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// servePprof gives every node a loopback port for --pprof.
func (c *cluster) servePprof() error {
	for _, n := range c.nodes {
		p, err := freePort(c.taken)
		if err != nil {
			return err
		}
		n.pprof = fmt.Sprintf("127.0.0.1:%d", p)
	}
	return nil
}

// startNATS starts narad nats and waits until it accepts connections.
func (c *cluster) startNATS(ctx context.Context, timeout time.Duration) error {
	addr := strings.TrimPrefix(c.natsURL, "nats://")
	p, err := c.start("nats", os.Environ(), "nats", "--listen", addr, "--data", c.natsCreds())
	if err != nil {
		return err
	}
	c.nats = p
	err = poll(ctx, timeout, 50*time.Millisecond, p, func() bool {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	if err != nil {
		return fmt.Errorf("nats on %s: %w\n%s", addr, err, tail(p.logPath))
	}
	return nil
}

// natsCreds is where narad nats writes the credentials, before it listens.
func (c *cluster) natsCreds() string { return filepath.Join(c.dir, "nats") }

// peers is the --peers value of the voters.
func (c *cluster) peers() string {
	var s []string
	for _, n := range c.nodes {
		if !n.joiner {
			s = append(s, n.id+"="+n.raft)
		}
	}
	return strings.Join(s, ",")
}

// startNode starts one node as deploy/local-cluster.sh does.
func (c *cluster) startNode(n *node) error {
	args := []string{"serve", "--id", n.id, "--data", filepath.Join(c.dir, n.id), "--http", n.http,
		"--raft", n.raft, "--nats", c.natsURL, "--nats-creds", filepath.Join(c.natsCreds(), "node.nk")}
	if n.pprof != "" {
		args = append(args, "--pprof", n.pprof)
	}
	if c.stopProfiles != "" {
		args = append(args, "--stop-profile", fmt.Sprintf("%s-%s-run%d.stop.cpu.pprof", c.stopProfiles, n.id, len(n.past)+1))
	}
	if n.joiner {
		args = append(args, "--join", "--replica-id", strconv.Itoa(n.replica))
	} else {
		args = append(args, "--peers", c.peers())
	}
	p, err := c.start(n.id, c.nodeEnv(), args...)
	if err != nil {
		return err
	}
	if n.proc != nil {
		n.past = append(n.past, n.proc)
	}
	n.proc = p
	return nil
}

// waitReady waits until the node's /readyz answers 200 and returns how long
// that took from the exec.
func (c *cluster) waitReady(ctx context.Context, n *node, timeout time.Duration) (time.Duration, error) {
	hc := &http.Client{Timeout: time.Second}
	err := poll(ctx, timeout, 50*time.Millisecond, n.proc, func() bool {
		resp, err := hc.Get(n.url() + "/readyz")
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
		return 0, fmt.Errorf("%s ready: %w\n%s", n.id, err, tail(n.proc.logPath))
	}
	return time.Since(n.proc.started), nil
}

// stop sends SIGTERM to a node and waits for its exit, at most timeout; past
// it the node is killed and errTimeout returned.
func (c *cluster) stop(ctx context.Context, n *node, timeout time.Duration) (time.Duration, error) {
	p := n.proc
	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, fmt.Errorf("sigterm %s: %w", n.id, err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return p.exited.Sub(sent), nil
	case <-t.C:
		killGroup(p)
		<-p.done
		return 0, fmt.Errorf("%s did not exit: %w", n.id, errTimeout)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// killGroup ends a process and anything it started, at once.
func killGroup(p *proc) {
	if p.running() {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// close kills every process still running and waits for each to exit.
func (c *cluster) close() {
	c.mu.Lock()
	procs := append([]*proc(nil), c.procs...)
	c.mu.Unlock()
	for _, p := range procs {
		killGroup(p)
	}
	for _, p := range procs {
		<-p.done
	}
}

// peakRSS is the highest VmHWM of any process the node ran, in KiB.
func (n *node) peakRSS() int64 {
	var k int64
	for _, p := range append(n.past, n.proc) {
		if p != nil {
			k = max(k, p.peakRSS())
		}
	}
	return k
}

// errTimeout is a wait that passed its bound; the table prints it as
// "timeout after X".
var errTimeout = errors.New("timeout")

// errExited is a process that exited while the harness waited for it.
var errExited = errors.New("process exited")

// poll calls ok every interval until it is true, timeout passes (errTimeout),
// ctx ends, or p (when not nil) exits (errExited).
func poll(ctx context.Context, timeout, interval time.Duration, p *proc, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if ok() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", timeout, errTimeout)
		}
		var exited <-chan struct{}
		if p != nil {
			exited = p.done
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return fmt.Errorf("%s: %w (%v)", p.name, errExited, p.exitErr)
		case <-time.After(interval):
		}
	}
}

// tailLines bounds what a failure prints of a process's log.
const tailLines = 30

// tail returns the last lines of a log file, for an error message.
func tail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		lines = append(lines, s.Text())
		if len(lines) > tailLines {
			lines = lines[1:]
		}
	}
	return "--- tail of " + path + "\n" + strings.Join(lines, "\n")
}

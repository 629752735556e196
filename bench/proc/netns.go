package proc

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Network namespaces let a run cut the traffic between two nodes while
// each of them still reaches NATS and its clients: what Jepsen calls a
// partition with both sides alive. On loopback every process shares one
// network, so nothing short of a process's death separates two nodes'
// Raft; here each node slot runs in a namespace of its own, joined to the
// bench's namespace by a bridge:
//
//	bench, NATS, proxies ── bridge <prefix>br (Gateway 10.a.b.1)
//	                          ├─ veth ─ namespace <prefix>-1: n1 on 10.a.b.11
//	                          ├─ veth ─ namespace <prefix>-2: n2 on 10.a.b.12
//	                          └─ ...
//
// Nodes talk to each other directly only over Raft (their other traffic
// goes through NATS, which listens on the gateway), so dropping the
// packets from one node's address to another's cuts exactly their Raft.
// A drop sends the packets into a sink: a route in the sender's namespace
// to a veth whose far end answers no one, with a fixed neighbour entry so
// that not even an ARP fails. The sender sees what a real partition shows
// it, silence and timeouts, never a refusal.
//
// It needs Linux, root and iproute2's `ip`; NetnsAvailable says whether
// this machine has them. Close removes the namespaces and the bridge; a
// run killed with SIGKILL leaves them behind (`ip netns list`, `ip link`,
// names starting with nrd).

// ErrNoNetns is a machine where the run cannot make network namespaces.
var ErrNoNetns = errors.New("network namespaces unavailable")

// Netns is a cluster's namespaces: set by UseNetns.
type Netns struct {
	// Gateway is the bridge's address in the bench's namespace: NATS and
	// the proxies listen on it, so that every node reaches them.
	Gateway string
	prefix  string // of every name it makes: namespaces, bridge, veths
	subnet  string // "10.a.b."
	// slots are the namespaces made, in node slot order.
	slots []string
	// sinks are the namespaces that hold their sink pair already.
	sinks map[string]bool
}

// sinkHW is the link address the sink's neighbour entries give every
// dropped destination: locally administered, answered by no one.
const sinkHW = "02:00:00:00:00:01"

// NetnsAvailable reports whether this process can make network
// namespaces: Linux, root and `ip`.
func NetnsAvailable() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: not root", ErrNoNetns)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: no ip command (Debian's iproute2): %v", ErrNoNetns, err)
	}
	if err := ipCmd("netns", "list"); err != nil {
		return fmt.Errorf("%w: %v", ErrNoNetns, err)
	}
	return nil
}

// ipCmd runs `ip args...`, its output in the error.
func ipCmd(args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command("ip", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// UseNetns puts every node slot in a namespace of its own and NATS's
// client port on the bridge's gateway, rewriting the addresses New (and
// UseNATSCluster) picked: a node's HTTP, Raft and pprof listen on its slot's address, on
// the same ports. Call it before anything starts; Close undoes it.
func (c *Cluster) UseNetns() error {
	if err := NetnsAvailable(); err != nil {
		return err
	}
	n := &Netns{prefix: "nrd" + strconv.Itoa(os.Getpid()%100000), sinks: map[string]bool{}}
	subnet, err := freeSubnet()
	if err != nil {
		return err
	}
	n.subnet, n.Gateway = subnet, subnet+"1"
	c.netns = n
	bridge := n.prefix + "br"
	for _, args := range [][]string{
		{"link", "add", bridge, "type", "bridge"},
		{"addr", "add", n.Gateway + "/24", "dev", bridge},
		{"link", "set", bridge, "up"},
	} {
		if err := ipCmd(args...); err != nil {
			return err
		}
	}
	var urls []string
	for _, s := range c.NATSServers {
		// The routes between NATS servers stay on loopback: they all
		// run in the bench's namespace, and narad nats refuses a route
		// listener other hosts could reach without a route password.
		s.Addr = rehost(s.Addr, n.Gateway)
		urls = append(urls, "nats://"+s.Addr)
	}
	c.NATSURL = strings.Join(urls, ",")
	for i, node := range c.Nodes {
		ip, err := n.addSlot(bridge, i)
		if err != nil {
			return err
		}
		node.HTTP, node.Raft = rehost(node.HTTP, ip), rehost(node.Raft, ip)
		if node.Pprof != "" {
			node.Pprof = rehost(node.Pprof, ip)
		}
	}
	return nil
}

// ListenHost is where a process of the bench listens for the nodes: the
// gateway with namespaces, else loopback.
func (c *Cluster) ListenHost() string {
	if c.netns != nil {
		return c.netns.Gateway
	}
	return "127.0.0.1"
}

// freeSubnet picks a 10.a.b.0/24 that no interface of this machine uses,
// starting from one drawn from the process id so that runs side by side
// pick apart.
func freeSubnet() (string, error) {
	out, err := exec.Command("ip", "-o", "addr").Output()
	if err != nil {
		return "", fmt.Errorf("%w: ip -o addr: %v", ErrNoNetns, err)
	}
	start := os.Getpid()
	for k := range 50 * 256 {
		v := (start + k) % (50 * 256)
		subnet := fmt.Sprintf("10.%d.%d.", 200+v/256, v%256)
		if !bytes.Contains(out, []byte(" "+subnet)) {
			return subnet, nil
		}
	}
	return "", fmt.Errorf("%w: no free 10.200-249.x.0/24", ErrNoNetns)
}

// addSlot makes slot i's namespace, joined to the bridge by a veth pair,
// and returns its address.
func (n *Netns) addSlot(bridge string, i int) (string, error) {
	ns := fmt.Sprintf("%s-%d", n.prefix, i+1)
	host, inner := fmt.Sprintf("%s-%dh", n.prefix, i+1), fmt.Sprintf("%s-%dc", n.prefix, i+1)
	ip := n.subnet + strconv.Itoa(11+i)
	if err := ipCmd("netns", "add", ns); err != nil {
		return "", err
	}
	n.slots = append(n.slots, ns)
	for _, args := range [][]string{
		{"link", "add", host, "type", "veth", "peer", "name", inner},
		{"link", "set", inner, "netns", ns},
		{"link", "set", host, "master", bridge, "up"},
		{"-n", ns, "addr", "add", ip + "/24", "dev", inner},
		{"-n", ns, "link", "set", inner, "up"},
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "route", "add", "default", "via", n.Gateway},
	} {
		if err := ipCmd(args...); err != nil {
			return "", err
		}
	}
	return ip, nil
}

// close removes the namespaces (their veths go with them) and the bridge.
func (n *Netns) close() error {
	var errs []error
	for _, ns := range n.slots {
		errs = append(errs, ipCmd("netns", "del", ns))
	}
	errs = append(errs, ipCmd("link", "del", n.prefix+"br"))
	return errors.Join(errs...)
}

// slotOf is the namespace of the node in slot position of node.
func (c *Cluster) slotOf(node *Node) (string, error) {
	for i, o := range c.Nodes {
		if o == node && i < len(c.netns.slots) {
			return c.netns.slots[i], nil
		}
	}
	return "", fmt.Errorf("%s: no namespace", node.ID)
}

// Drop makes every packet from node from to node to vanish until Undrop:
// from's Raft to to, and, since TCP needs answers, any connection to
// from's Raft that to opens stalls too, while to's own packets still
// reach from. Drop both ways for a partition on both sides.
func (c *Cluster) Drop(from, to *Node) error {
	if c.netns == nil {
		return fmt.Errorf("drop %s to %s: %w: the cluster runs without UseNetns", from.ID, to.ID, ErrNoNetns)
	}
	ns, err := c.slotOf(from)
	if err != nil {
		return err
	}
	if !c.netns.sinks[ns] {
		for _, args := range [][]string{
			{"-n", ns, "link", "add", "sinka", "type", "veth", "peer", "name", "sinkb"},
			{"-n", ns, "link", "set", "sinka", "up"},
			{"-n", ns, "link", "set", "sinkb", "up"},
		} {
			if err := ipCmd(args...); err != nil {
				return err
			}
		}
		c.netns.sinks[ns] = true
	}
	ip := hostOf(to.Raft)
	if err := ipCmd("-n", ns, "neigh", "replace", ip, "lladdr", sinkHW, "dev", "sinka", "nud", "permanent"); err != nil {
		return err
	}
	return ipCmd("-n", ns, "route", "replace", ip+"/32", "dev", "sinka")
}

// Undrop lets from's packets reach to again.
func (c *Cluster) Undrop(from, to *Node) error {
	if c.netns == nil {
		return fmt.Errorf("undrop %s to %s: %w", from.ID, to.ID, ErrNoNetns)
	}
	ns, err := c.slotOf(from)
	if err != nil {
		return err
	}
	ip := hostOf(to.Raft)
	return errors.Join(ipCmd("-n", ns, "route", "del", ip+"/32", "dev", "sinka"),
		ipCmd("-n", ns, "neigh", "del", ip, "dev", "sinka"))
}

// rehost is addr (host:port) on host instead.
func rehost(addr, host string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return net.JoinHostPort(host, port)
}

// hostOf is addr's host.
func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}

package transport

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// startNATSCluster runs n embedded NATS servers joined by routes: each
// routes to every one started before it, and the route gossip links the
// rest, so losing any one leaves the others connected.
func startNATSCluster(t *testing.T, n int) []*server.Server {
	t.Helper()
	var servers []*server.Server
	var routes []*url.URL
	for i := range n {
		o := &server.Options{
			ServerName: fmt.Sprintf("s%d", i+1),
			Host:       "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true,
			Cluster: server.ClusterOpts{Name: "nats-test", Host: "127.0.0.1", Port: server.RANDOM_PORT},
			Routes:  append([]*url.URL(nil), routes...),
		}
		s := runServer(t, o)
		servers = append(servers, s)
		routes = append(routes, &url.URL{Scheme: "nats-route", Host: s.ClusterAddr().String()})
	}
	for _, s := range servers {
		waitFor(t, s.Name()+" routed to every other server", func() bool { return routedPeers(s) == n-1 })
	}
	return servers
}

// routedPeers counts the distinct servers s has a route to (a route pool
// opens several connections to each).
func routedPeers(s *server.Server) int {
	rz, err := s.Routez(nil)
	if err != nil {
		return 0
	}
	peers := map[string]bool{}
	for _, r := range rz.Routes {
		peers[r.RemoteID] = true
	}
	return len(peers)
}

// clusterURLs is the --nats form of the servers' client URLs: one
// comma-separated string, first at first.
func clusterURLs(servers []*server.Server, first int) string {
	urls := []string{servers[first].ClientURL()}
	for i, s := range servers {
		if i != first {
			urls = append(urls, s.ClientURL())
		}
	}
	return strings.Join(urls, ", ")
}

// serverOf is the index of the server tr is connected to, or -1.
func serverOf(tr *Transport, servers []*server.Server) int {
	for i, s := range servers {
		if tr.nc.ConnectedServerId() == s.ID() {
			return i
		}
	}
	return -1
}

// Nodes given the three servers of a NATS cluster as one comma-separated
// URL keep answering each other when the server one of them is on dies,
// and a node started afterwards with the dead server first in its list
// still connects.
func TestNATSClusterServerDies(t *testing.T) {
	servers := startNATSCluster(t, 3)
	list := clusterURLs(servers, 0)
	connect := func(id string) *Transport {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), liveness)
		defer cancel()
		tr, err := Connect(ctx, Config{Cluster: "test", NodeID: id, URLs: []string{list}}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("connect %s to %s: %v", id, list, err)
		}
		t.Cleanup(tr.Close)
		if err := tr.Handle("echo", echo); err != nil {
			t.Fatalf("handle on %s: %v", id, err)
		}
		return tr
	}
	a, b := connect("a"), connect("b")
	if got := len(a.Config().URLs); got != 3 {
		t.Fatalf("a's config has %d URLs, want 3 (the comma-separated list split)", got)
	}
	askAll := func(nodes ...*Transport) {
		t.Helper()
		for _, from := range nodes {
			for _, to := range nodes {
				if from == to {
					continue
				}
				for i := range 20 {
					body := []byte(fmt.Sprintf("%s to %s #%d", from.NodeID(), to.NodeID(), i))
					ctx, cancel := context.WithTimeout(context.Background(), liveness)
					got, err := from.Request(ctx, to.NodeID(), "echo", body)
					cancel()
					if err != nil || !bytes.Equal(got, body) {
						t.Fatalf("request %s: got %q, %v; want %q, nil", body, got, err, body)
					}
				}
			}
		}
	}
	waitFor(t, "a's echo heard through b's server", func() bool { return answers(b, "a") && answers(a, "b") })
	askAll(a, b)

	dead := serverOf(a, servers)
	if dead < 0 {
		t.Fatalf("a is connected to none of the three servers")
	}
	servers[dead].Shutdown()
	servers[dead].WaitForShutdown()
	waitFor(t, "a reconnected to a live server", func() bool {
		i := serverOf(a, servers)
		return a.nc.IsConnected() && i >= 0 && i != dead
	})
	waitFor(t, "a and b answer each other again", func() bool { return answers(b, "a") && answers(a, "b") })
	askAll(a, b)

	list = clusterURLs(servers, dead)
	c := connect("c")
	waitFor(t, "c heard by a and b", func() bool { return answers(a, "c") && answers(b, "c") && answers(c, "a") })
	askAll(a, b, c)
}

// answers reports whether one request from tr to node's echo is answered.
func answers(tr *Transport, node string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	defer cancel()
	got, err := tr.Request(ctx, node, "echo", []byte("ping"))
	return err == nil && string(got) == "ping"
}

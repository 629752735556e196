package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/cluster/transport/testpki"
)

// Routes see every message past the nkey permissions, so an open cluster
// port off loopback is refused, and --routes without a cluster port too.
func TestClusterOptionsRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, listen, routes, password, want string
	}{
		{"routes without a cluster port", "", "nats://a:6222", "", "--routes needs --cluster-listen"},
		{"open routes off loopback", "0.0.0.0:6222", "", "", "not loopback"},
		{"bad port", "127.0.0.1:x", "", "", "port must be"},
		{"not a route URL", "127.0.0.1:6222", "http://a:6222", "", "want nats://host:port"},
		{"route without a port", "127.0.0.1:6222", "nats://a", "", "want nats://host:port"},
		{"too many routes", "127.0.0.1:6222", strings.Repeat("nats://a:6222,", maxRoutes+1), "", "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := clusterOptions("narad", tc.listen, tc.routes, tc.password, transport.TLSFiles{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

func TestClusterOptionsPassword(t *testing.T) {
	co, urls, err := clusterOptions("narad", "0.0.0.0:6222", " nats://a:6222, nats://b:6222,nats://x:y@c:6222", "s3cret", transport.TLSFiles{})
	if err != nil {
		t.Fatalf("clusterOptions: %v", err)
	}
	if co.Name != "narad" || co.Port != 6222 || co.Username != routeUser || co.Password != "s3cret" {
		t.Fatalf("got cluster %q port %d user %q password %q, want narad 6222 %s s3cret", co.Name, co.Port, co.Username, co.Password, routeUser)
	}
	var got []string
	for _, u := range urls {
		got = append(got, u.String())
	}
	want := "nats://narad-route:s3cret@a:6222 nats://narad-route:s3cret@b:6222 nats://x:y@c:6222"
	if strings.Join(got, " ") != want {
		t.Fatalf("got routes %v, want %s (a URL naming its own user kept)", got, want)
	}
}

// Two narad nats servers sharing one credentials directory form a NATS
// cluster whose routes authenticate with the route password, and a node
// on each answers the other through the route.
func TestNATSClusterRoutes(t *testing.T) {
	sec, a, b := startRoutedPair(t, "s3cret", false)

	connect := func(id string, s *natsserver.Server) *transport.Transport {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		tr, err := transport.Connect(ctx, transport.Config{Cluster: "narad", NodeID: id, URLs: []string{s.ClientURL()},
			Auth: transport.Auth{CredsFile: sec.creds.File(transport.RoleNode)}}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("connect %s: %v", id, err)
		}
		t.Cleanup(tr.Close)
		return tr
	}
	na, nb := connect("n1", a), connect("n2", b)
	if err := na.Handle("echo", func(_ context.Context, _ string, req []byte) ([]byte, error) { return req, nil }); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "n2 heard by n1 across the route", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got, err := nb.Request(ctx, "n1", "echo", []byte("ping"))
		return err == nil && string(got) == "ping"
	})
}

// waitUntil polls cond for up to 10 s, a liveness bound only.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testnet.Eventually(t, 10*time.Second, what, cond)
}

// With --tls-* and no route password, routes authenticate by mutual TLS:
// each server presents its own certificate of the shared CA, and dials
// the other verifying it against that CA.
func TestNATSClusterRoutesOverTLS(t *testing.T) {
	ca := testpki.New(t, "routes")
	sec, _, err := natsSecurityIn(t.TempDir(), "narad", transport.TLSFiles{})
	if err != nil {
		t.Fatal(err)
	}
	start := func(name, routes string) *natsserver.Server {
		t.Helper()
		f := ca.Issue(t, name)
		files := transport.TLSFiles{CAFile: f.CAFile, CertFile: f.CertFile, KeyFile: f.KeyFile}
		co, urls, err := clusterOptions("narad", "127.0.0.1:0", routes, "", files)
		if err != nil {
			t.Fatalf("clusterOptions: %v", err)
		}
		o := &natsserver.Options{Host: "127.0.0.1", Port: natsserver.RANDOM_PORT, NoSigs: true, NoLog: true, Cluster: co, Routes: urls}
		s, err := startNATSWith(o, natsSecurity{cluster: sec.cluster, creds: sec.creds, tls: files})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		return s
	}
	a := start("s1", "")
	b := start("s2", fmt.Sprintf("nats://%s", a.ClusterAddr()))
	waitUntil(t, "b routed to a over TLS", func() bool { return a.NumRoutes() > 0 && b.NumRoutes() > 0 })
}

// A client of a NATS cluster learns the other servers' client URLs from
// the first INFO, and reconnects to them directly; with --no-advertise it
// learns none and keeps to the URLs it was given (a proxy in front of the
// server, in bench/chaos).
func TestNATSClusterNoAdvertiseTellsClientsNoOtherServer(t *testing.T) {
	for _, noAdvertise := range []bool{false, true} {
		t.Run(fmt.Sprintf("no-advertise %v", noAdvertise), func(t *testing.T) {
			sec, a, _ := startRoutedPair(t, "", noAdvertise)
			auth, err := transport.Auth{CredsFile: sec.creds.File(transport.RoleNode)}.Options()
			if err != nil {
				t.Fatal(err)
			}
			told := func() int {
				nc, err := nats.Connect(a.ClientURL(), auth...)
				if err != nil {
					t.Fatal(err)
				}
				defer nc.Close()
				return len(nc.DiscoveredServers())
			}
			if !noAdvertise {
				// b's URL reaches a over the route a moment after it.
				waitUntil(t, "a client of a told of b", func() bool { return told() == 1 })
				return
			}
			if got := told(); got != 0 {
				t.Errorf("servers a client of a was told of: got %d, want 0", got)
			}
		})
	}
}

// startRoutedPair starts two NATS servers of cluster "narad" with one
// security set-up, b routed to a (with the route password and NoAdvertise
// given), and returns once the route is up.
func startRoutedPair(t *testing.T, routePassword string, noAdvertise bool) (sec natsSecurity, a, b *natsserver.Server) {
	t.Helper()
	sec, _, err := natsSecurityIn(t.TempDir(), "narad", transport.TLSFiles{})
	if err != nil {
		t.Fatal(err)
	}
	a = startRoutedNATS(t, sec, "", routePassword, noAdvertise)
	b = startRoutedNATS(t, sec, fmt.Sprintf("nats://%s", a.ClusterAddr()), routePassword, noAdvertise)
	waitUntil(t, "b routed to a", func() bool { return a.NumRoutes() > 0 && b.NumRoutes() > 0 })
	return sec, a, b
}

// startRoutedNATS starts a NATS server of cluster "narad" on random ports,
// routed to routes (empty: the first of the cluster), with the route
// password given and the cluster's NoAdvertise, stopped when the test ends.
func startRoutedNATS(t *testing.T, sec natsSecurity, routes, routePassword string, noAdvertise bool) *natsserver.Server {
	t.Helper()
	co, urls, err := clusterOptions("narad", "127.0.0.1:0", routes, routePassword, transport.TLSFiles{})
	if err != nil {
		t.Fatalf("clusterOptions: %v", err)
	}
	co.NoAdvertise = noAdvertise
	o := &natsserver.Options{Host: "127.0.0.1", Port: natsserver.RANDOM_PORT, NoSigs: true, NoLog: true, MaxPayload: natsMaxPayloadBytes, Cluster: co, Routes: urls}
	s, err := startNATSWith(o, sec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/naradmq/narad/cluster/transport"
)

// routeUser is the user a route authenticates as when
// NARAD_NATS_ROUTE_PASSWORD is set: one shared secret for the whole NATS
// cluster, since every server routes to every other.
const routeUser = "narad-route"

// maxRoutes bounds --routes: NATS routes are a full mesh (a pool of
// connections to each peer), so a list longer than this is a mistake, not
// a cluster.
const maxRoutes = 32

// runNATS runs a standalone NATS server, alone or as one server of a NATS
// cluster (--cluster-listen, --routes), until the first SIGTERM/SIGINT.
func runNATS(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nats", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", env("NARAD_NATS_LISTEN", "127.0.0.1:4222"), "address to listen on (NARAD_NATS_LISTEN)")
	data := fs.String("data", env("NARAD_NATS_DATA", "./data/nats"), "directory of the credentials, generated at the first start and kept; every server of a NATS cluster needs the same files (NARAD_NATS_DATA)")
	cluster := fs.String("cluster", env("NARAD_CLUSTER", "narad"), "cluster name the subject permissions are for, also the NATS cluster's name (NARAD_CLUSTER)")
	clusterListen := fs.String("cluster-listen", env("NARAD_NATS_CLUSTER_LISTEN", ""), "host:port the NATS cluster's routes listen on, e.g. 0.0.0.0:6222; empty runs one server alone. Off loopback it needs NARAD_NATS_ROUTE_PASSWORD or --tls-* (NARAD_NATS_CLUSTER_LISTEN)")
	routes := fs.String("routes", env("NARAD_NATS_ROUTES", ""), "the NATS cluster's route URLs, comma-separated, e.g. nats://nats-1:6222,nats://nats-2:6222; a server's own is ignored (NARAD_NATS_ROUTES)")
	noAdvertiseEnv, _ := strconv.ParseBool(env("NARAD_NATS_NO_ADVERTISE", "false"))
	noAdvertise := fs.Bool("no-advertise", noAdvertiseEnv, "with --cluster-listen, do not tell clients the other servers' client URLs: a client then reconnects only to the URLs it was given, e.g. through a proxy or a load balancer (NARAD_NATS_NO_ADVERTISE=1)")
	var files transport.TLSFiles
	fs.StringVar(&files.CAFile, "tls-ca", env("NARAD_NATS_SERVER_TLS_CA", ""), "CA file clients' and routes' certificates must chain to; with --tls-cert and --tls-key the server requires TLS of clients and routes (NARAD_NATS_SERVER_TLS_CA)")
	fs.StringVar(&files.CertFile, "tls-cert", env("NARAD_NATS_SERVER_TLS_CERT", ""), "the server's certificate file, also presented to the other servers' routes (NARAD_NATS_SERVER_TLS_CERT)")
	fs.StringVar(&files.KeyFile, "tls-key", env("NARAD_NATS_SERVER_TLS_KEY", ""), "key file of --tls-cert (NARAD_NATS_SERVER_TLS_KEY)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `Usage: narad nats [flags]

Runs a standalone NATS server, or one server of a NATS cluster with
--cluster-listen and --routes. Clients authenticate with the nkey seeds it
writes into --data: node.nk for nodes, admin.nk and viewer.nk for the cluster
commands. Routes authenticate with NARAD_NATS_ROUTE_PASSWORD (user
narad-route) and, with --tls-*, mutual TLS.

Flags:`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", *listen, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return fmt.Errorf("--listen %q: bad port", *listen)
	}
	sec, created, err := natsSecurityIn(*data, *cluster, files)
	if err != nil {
		return err
	}
	// Not a flag: a password on the command line shows in ps.
	co, routeURLs, err := clusterOptions(*cluster, *clusterListen, *routes, os.Getenv("NARAD_NATS_ROUTE_PASSWORD"), files)
	if err != nil {
		return err
	}
	co.NoAdvertise = *noAdvertise
	o := &natsserver.Options{Host: host, Port: p, NoSigs: true, NoLog: true, MaxPayload: natsMaxPayloadBytes, Cluster: co, Routes: routeURLs}
	s, err := startNATSWith(o, sec)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "narad nats: listening on %s for cluster %s\n", s.ClientURL(), *cluster)
	if co.Port != 0 {
		fmt.Fprintf(stdout, "narad nats: routes on %s, to %d server(s), %s\n", s.ClusterAddr(), len(routeURLs), routeAuthSaid(co))
	}
	printCredentials(stdout, sec.creds, created)
	<-ctx.Done()
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}

// clusterOptions turns --cluster-listen and --routes into the server's
// cluster options. A route is not a client: it sees every message of the
// server, past the nkey permissions, so routes off loopback must
// authenticate: with password (user routeUser, added to each route URL
// that names no user) and, when files are set, with mutual TLS of the
// server's own certificate. Empty listen means no cluster.
func clusterOptions(cluster, listen, routes, password string, files transport.TLSFiles) (natsserver.ClusterOpts, []*url.URL, error) {
	if listen == "" {
		if routes != "" {
			return natsserver.ClusterOpts{}, nil, errors.New("--routes needs --cluster-listen: a server routes to others only from its own cluster port")
		}
		return natsserver.ClusterOpts{}, nil, nil
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return natsserver.ClusterOpts{}, nil, fmt.Errorf("--cluster-listen %q: %w", listen, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return natsserver.ClusterOpts{}, nil, fmt.Errorf("--cluster-listen %q: port must be 0 to 65535", listen)
	}
	if p == 0 {
		// Port 0 is any free port, as for --listen; NATS reads 0 as no cluster.
		p = natsserver.RANDOM_PORT
	}
	co := natsserver.ClusterOpts{Name: cluster, Host: host, Port: p}
	if password != "" {
		co.Username, co.Password = routeUser, password
	}
	if files.Enabled() {
		tc, err := transport.ServerTLS(files)
		if err != nil {
			return natsserver.ClusterOpts{}, nil, err
		}
		// A route dials as well as accepts: the same CA verifies both ways.
		tc.ClientAuth, tc.RootCAs = tls.RequireAndVerifyClientCert, tc.ClientCAs
		co.TLSConfig = tc
	}
	if password == "" && !files.Enabled() && !loopback(host) {
		return natsserver.ClusterOpts{}, nil, fmt.Errorf("--cluster-listen %s is not loopback and routes would be open to any host: set NARAD_NATS_ROUTE_PASSWORD or --tls-ca, --tls-cert, --tls-key", listen)
	}
	var urls []*url.URL
	for _, r := range strings.Split(routes, ",") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		u, err := url.Parse(r)
		if err != nil {
			return natsserver.ClusterOpts{}, nil, fmt.Errorf("--routes %q: %w", r, err)
		}
		if (u.Scheme != "nats" && u.Scheme != "nats-route" && u.Scheme != "tls") || u.Port() == "" || u.Hostname() == "" {
			return natsserver.ClusterOpts{}, nil, fmt.Errorf("--routes %q: want nats://host:port", r)
		}
		if u.User == nil && password != "" {
			u.User = url.UserPassword(routeUser, password)
		}
		urls = append(urls, u)
	}
	if len(urls) > maxRoutes {
		return natsserver.ClusterOpts{}, nil, fmt.Errorf("--routes names %d servers, want at most %d", len(urls), maxRoutes)
	}
	return co, urls, nil
}

// loopback reports whether host only listens on this machine.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// routeAuthSaid says how routes authenticate, for the start-up banner.
func routeAuthSaid(co natsserver.ClusterOpts) string {
	switch {
	case co.Password != "" && co.TLSConfig != nil:
		return "routes authenticate with NARAD_NATS_ROUTE_PASSWORD over mutual TLS"
	case co.Password != "":
		return "routes authenticate with NARAD_NATS_ROUTE_PASSWORD"
	case co.TLSConfig != nil:
		return "routes authenticate with mutual TLS"
	default:
		return "routes unauthenticated (loopback only)"
	}
}

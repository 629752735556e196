package main

// The driver talks to a broker through cmd/narad/client, the CLI's client:
// it depends on nothing but the wire types (messages/api.go) and the
// standard library, so the driver still only speaks the wire contract
// (shared/api/CONTRACT.md) and decodes exactly what a broker sends.

import (
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/naradmq/narad/cmd/narad/client"
)

// requestTimeout bounds one request beyond its long-poll wait, so that a
// broker that stops answering cannot stall a worker past the run's bounds.
const requestTimeout = 10 * time.Second

// checkLoopback parses server (client.ParseServer) and checks that it names
// a loopback host: a load run sends a lot of traffic and must never be aimed
// at another machine by mistake. The host is checked as written, without a
// DNS lookup. validate calls it for every server.
func checkLoopback(server string) (*url.URL, error) {
	u, err := client.ParseServer(server)
	if err != nil {
		return nil, err
	}
	host := u.Hostname()
	ip := net.ParseIP(host)
	if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("server url %q: the load driver only targets loopback addresses (127.0.0.0/8, ::1, localhost)", server)
	}
	return u, nil
}

// newBroker returns a client for server, which validate has checked, that
// keeps conns connections: every worker keeps one busy, and without enough
// idle slots the transport would close and reopen connections on every
// request and the run would measure handshakes. user and password, when
// user is set, are sent with every request (a broker with security on).
func newBroker(server string, conns int, user, password string) (*client.Broker, error) {
	return client.New(server, client.Options{Conns: conns, Timeout: requestTimeout, User: user, Password: password})
}

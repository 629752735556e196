package actors

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"os"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/naradmq/narad/actors/route"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/cluster/transport/testpki"
	"github.com/naradmq/narad/messages"
)

// startSecuredNATS runs an embedded NATS server that authenticates the
// roles of cluster with seeds generated for the test, until it ends.
func startSecuredNATS(t testing.TB, cluster string) (*natsserver.Server, transport.Credentials) {
	t.Helper()
	creds, _, err := transport.EnsureCredentials(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	o := &natsserver.Options{Host: "127.0.0.1", Port: natsserver.RANDOM_PORT, NoSigs: true, NoLog: true, MaxPayload: 8 << 20}
	if err := transport.SecureServer(o, cluster, creds, transport.TLSFiles{}); err != nil {
		t.Fatal(err)
	}
	return testnet.StartNATS(t, o), creds
}

// forgedCommit is the issue's raw NATS attack: a partition commit of one
// record sent straight to the owner's node subject, as `nats req -H
// Narad-From:n1 narad.narad.node.n1.partition` would.
func forgedCommit(t testing.TB, tn *testNode, topic string, body string) *nats.Msg {
	t.Helper()
	tp, ok := tn.n.store.Topic(topic)
	if !ok {
		t.Fatalf("topic %s unknown", topic)
	}
	k := messages.PartitionKey{Topic: topic, Incarnation: tp.Incarnation, Partition: 0}
	data, err := messages.EncodePartitionRequest(messages.PartitionRequest{Key: k,
		Commit: &messages.Commit{Key: k, Records: []messages.CommitRecord{{Seq: 1, Body: []byte(body)}}}})
	if err != nil {
		t.Fatal(err)
	}
	subj, err := transport.NodeSubject(tn.cfg.Cluster, tn.cfg.NodeID, route.PartitionService)
	if err != nil {
		t.Fatal(err)
	}
	return &nats.Msg{Subject: subj, Data: data, Header: nats.Header{messages.HeaderFrom: []string{"n2"}}}
}

// TestAForgedPartitionCommitIsRefusedAndNeverReadable: on a secured NATS
// the same forged commit that a node's identity could commit (the
// control, proving the message is well formed) is refused when sent with
// the admin's, and nothing of it can be consumed.
func TestAForgedPartitionCommitIsRefusedAndNeverReadable(t *testing.T) {
	ns, creds := startSecuredNATS(t, "narad")
	tn := newTestNode(t, func(c *Config) {
		c.NATSURL = ns.ClientURL()
		c.NATSAuth = transport.Auth{CredsFile: creds.File(transport.RoleNode)}
	})
	tn.createTopic("control", 3)
	tn.createTopic("victim", 3)

	dial := func(role transport.Role, inbox string, errs chan error) *nats.Conn {
		opt, err := nats.NkeyOptionFromSeed(creds.File(role))
		if err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect(ns.ClientURL(), opt, nats.CustomInboxPrefix(inbox), nats.NoReconnect(),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				select {
				case errs <- err:
				default:
				}
			}))
		if err != nil {
			t.Fatalf("connect as %s: %v", role, err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Control: a node's identity may do it (nodes are trusted with the
	// node subjects), so the forged message itself is a valid commit.
	asNode := dial(transport.RoleNode, "_NARAD_INBOX.narad", make(chan error, 1))
	rep, err := asNode.RequestMsgWithContext(ctx, forgedCommit(t, tn, "control", `{"forged":"control"}`))
	if err != nil {
		t.Fatalf("control commit as a node: %v", err)
	}
	if r, err := messages.DecodePartitionReply(rep.Data); err != nil || r.Commit == nil || r.Commit.Status != messages.StatusOK {
		t.Fatalf("control commit as a node: got %+v, %v; want a committed record", r.Commit, err)
	}
	if m := tn.consume("control", "wait=2s"); m == nil {
		t.Fatal("control: got nothing to consume, want the record a node committed")
	}

	errs := make(chan error, 4)
	asAdmin := dial(transport.RoleAdmin, "_INBOX", errs)
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	if _, err := asAdmin.RequestMsgWithContext(short, forgedCommit(t, tn, "victim", `{"forged":"victim"}`)); err == nil {
		t.Fatal("forged commit as admin: got an answer, want a refusal")
	}
	select {
	case err := <-errs:
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Fatalf("forged commit as admin: server said %v, want %v", err, nats.ErrPermissionViolation)
		}
	case <-ctx.Done():
		t.Fatal("forged commit as admin: no permission violation reported")
	}
	if m := tn.consume("victim", "wait=1s"); m != nil {
		t.Fatalf("victim: consumed %s, want nothing (the forged commit must never be readable)", m.Payload)
	}
	// The node still works on its secured NATS: a real produce is readable.
	tn.must(202, "POST", "/v1/topics/victim/produce", []byte(`{"real":true}`))
	if m := tn.consume("victim", "wait=5s"); m == nil {
		t.Fatal("victim: a real produce is not readable on the secured node")
	}
}

// TestASecuredClusterForwardsCommitsBetweenNodes: two nodes with the node
// seed on a secured NATS still reach each other's partitions (replies
// under the nodes' inbox, answers by allow_responses).
func TestASecuredClusterForwardsCommitsBetweenNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	ns, creds := startSecuredNATS(t, "test")
	c := newTestCluster(t, 2, func(_ int, cfg *Config) {
		cfg.NATSURL = ns.ClientURL()
		cfg.NATSAuth = transport.Auth{CredsFile: creds.File(transport.RoleNode)}
	})
	c.node(0).createTopic("t", 6)
	// Six partitions over two nodes: some records land on the other node's.
	for range 12 {
		c.node(0).must(202, "POST", "/v1/topics/t/produce", []byte(`{"x":1}`))
	}
	got := 0
	for got < 12 {
		m := c.node(1).consume("t", "wait=5s")
		if m == nil {
			t.Fatalf("consumed %d records on n2, want 12", got)
		}
		c.node(1).must(204, "POST", "/v1/topics/t/ack?receipt_handle="+m.ReceiptHandle, nil)
		got++
	}

}

// TestTheClientAPIServesHTTPSFromItsCertificateFlags: a client that trusts
// the test's CA gets answers; one that does not, or that speaks plain
// HTTP, gets none.
func TestTheClientAPIServesHTTPSFromItsCertificateFlags(t *testing.T) {
	ca := testpki.New(t, "api")
	f := ca.Issue(t, "n1")
	tn := newTestNode(t, func(c *Config) { c.HTTPTLSCertFile, c.HTTPTLSKeyFile = f.CertFile, f.KeyFile })
	pem, err := os.ReadFile(f.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	trusting := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	defer trusting.CloseIdleConnections()
	url := "https://" + tn.cfg.HTTPAddr + "/healthz"
	resp, err := trusting.Get(url)
	if err != nil {
		t.Fatalf("GET %s trusting the CA: %v", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s trusting the CA: got %d, want 200", url, resp.StatusCode)
	}

	stranger := &http.Client{Timeout: 10 * time.Second}
	if resp, err := stranger.Get(url); err == nil {
		resp.Body.Close()
		t.Fatalf("GET %s without the CA: got %d, want a certificate error", url, resp.StatusCode)
	}
	if resp, err := stranger.Get("http://" + tn.cfg.HTTPAddr + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP to the HTTPS API: got 200, want a refusal")
		}
	}
}

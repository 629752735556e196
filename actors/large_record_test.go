package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/naradmq/narad/actors/route"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// largestBody is a random body of the largest size the API takes (1 MiB).
// Its first byte makes it invalid UTF-8, so a consume answers it base64
// (messageOf) and the test can read it back exactly.
func largestBody(rng *rand.ChaCha8) []byte {
	b := make([]byte, maxRequestBytes)
	_, _ = rng.Read(b)
	b[0] = 0xff
	return b
}

// replayBytes reads partition/offset of topic through tn by replay and
// returns the record's partition and body.
func replayBytes(t *testing.T, tn *testNode, topic string, partition, offset int) (int, []byte) {
	t.Helper()
	m := tn.consume(topic, fmt.Sprintf("partition=%d&offset=%d", partition, offset))
	if m == nil {
		t.Fatalf("replay %s/%d@%d on %s: got 204, want the record", topic, partition, offset, tn.cfg.NodeID)
	}
	if m.PayloadEncoding != "base64" {
		t.Fatalf("replay %s/%d@%d on %s: got payload_encoding %q, want base64 for a binary body", topic, partition, offset, tn.cfg.NodeID, m.PayloadEncoding)
	}
	var body []byte
	if err := json.Unmarshal(m.Payload, &body); err != nil {
		t.Fatalf("replay %s/%d@%d on %s: payload: %v", topic, partition, offset, tn.cfg.NodeID, err)
	}
	return m.Partition, body
}

// Records of the largest body the API takes (1 MiB), produced with an
// explicit ?partition= through every node that does not own the partition,
// land in that partition and replay byte for byte through every node
// (issue 9: they were answered 202 and then never committed, or committed
// to another partition, since their commit, base64 inside JSON, did not
// fit a NATS message).
func TestClusterLargestRecordsLandInTheirNamedPartitionThroughAnyNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	c := newTestCluster(t, 3)
	c.waitFor("three members alive", func() bool { return len(c.memberStatuses(0)) == 3 })
	const partitions = 3
	c.node(0).createTopic("big", partitions)
	rng := rand.NewChaCha8([32]byte{9})
	sent := make([][][]byte, partitions)
	for p := range partitions {
		owner := c.assignmentOf(0, "big", p).Owner
		for i := range c.nodes {
			if c.node(i).cfg.NodeID == owner {
				continue
			}
			body := largestBody(rng)
			c.node(i).must(http.StatusAccepted, "POST", fmt.Sprintf("/v1/topics/big/produce?partition=%d", p), body)
			sent[p] = append(sent[p], body)
		}
	}
	for p, bodies := range sent {
		last := len(bodies) - 1
		c.waitFor(fmt.Sprintf("partition %d to hold its %d records", p, len(bodies)), func() bool {
			code, _ := c.node(0).do("GET", fmt.Sprintf("/v1/topics/big/consume?partition=%d&offset=%d", p, last), nil)
			return code == http.StatusOK
		})
		for i := range c.nodes {
			tn := c.node(i)
			// Two nodes' commits reach the owner in either order.
			found := make([]bool, len(bodies))
			for o := range bodies {
				got, body := replayBytes(t, tn, "big", p, o)
				if got != p {
					t.Fatalf("replay big/%d@%d on %s: got partition %d, want %d", p, o, tn.cfg.NodeID, got, p)
				}
				k := -1
				for j, b := range bodies {
					if !found[j] && bytes.Equal(b, body) {
						k = j
					}
				}
				if k < 0 {
					t.Fatalf("replay big/%d@%d on %s: got %d bytes matching no record produced to partition %d", p, o, tn.cfg.NodeID, len(body), p)
				}
				found[k] = true
			}
			if m := tn.consume("big", fmt.Sprintf("partition=%d&offset=%d", p, len(bodies))); m != nil {
				t.Fatalf("replay big/%d@%d on %s: got a record at offset %d, want 204 after the %d produced", p, len(bodies), tn.cfg.NodeID, m.Offset, len(bodies))
			}
		}
	}
	// Leased consumes hand out the largest records whole through a node
	// that does not own their partition (issue 15): pinned, one per
	// partition; then in queue mode through node 0, which leases at least
	// two of the three left from partitions other nodes own.
	checkBody := func(how string, tn *testNode, m *messages.MessageInfo) {
		t.Helper()
		if m == nil {
			t.Fatalf("leased consume of big (%s) through %s: got 204, want a 1 MiB record", how, tn.cfg.NodeID)
		}
		var body []byte
		if err := json.Unmarshal(m.Payload, &body); err != nil {
			t.Fatalf("leased consume of big (%s) through %s: payload: %v", how, tn.cfg.NodeID, err)
		}
		for _, b := range sent[m.Partition] {
			if bytes.Equal(b, body) {
				return
			}
		}
		t.Fatalf("leased consume of big (%s) through %s: got %d bytes of partition %d matching no record produced to it", how, tn.cfg.NodeID, len(body), m.Partition)
	}
	for p := range sent {
		owner := c.assignmentOf(0, "big", p).Owner
		for i := range c.nodes {
			if tn := c.node(i); tn.cfg.NodeID != owner {
				checkBody(fmt.Sprintf("partition=%d", p), tn, tn.consume("big", fmt.Sprintf("partition=%d", p)))
				break
			}
		}
	}
	for range sent {
		checkBody("queue mode", c.node(0), c.node(0).consume("big", "wait=0"))
	}
}

// startNodeOn starts a one-node cluster talking through the NATS server at
// url, stopped when the test ends, or returns why it did not start.
func startNodeOn(t *testing.T, url string, tweak func(*Config)) (*testNode, error) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DataDir, cfg.HTTPAddr, cfg.NATSURL, cfg.Cluster = t.TempDir(), freeAddr(t), url, "test"
	cfg.SecurityEnabled = false // a test with security on says so
	tweak(&cfg)
	mcfg := metastore.Config{NodeID: cfg.NodeID, ReplicaID: 1, RaftAddr: freeAddr(t), RTTMillisecond: 2, ElectionRTT: 20, HeartbeatRTT: 2}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Start(ctx, cfg, mcfg, testLogger(t))
	if err != nil {
		return nil, err
	}
	tn := &testNode{t: t, cfg: cfg, mcfg: mcfg, n: n, base: "http://" + cfg.HTTPAddr, http: &http.Client{Timeout: clusterWaitBound}}
	t.Cleanup(tn.stop)
	return tn, nil
}

// A node refuses to start on a NATS server whose max_payload is one byte
// short of its largest partition message, and starts on one that carries
// it exactly. There the largest record (1 MiB body, 64 KiB key) crosses the
// partition service both ways, as a commit and as a replay read: its
// bytes travel raw (base64 inside JSON would be a third larger and not fit).
func TestANodeTakesOnlyANATSServerThatCarriesItsLargestRecord(t *testing.T) {
	// The smallest remote commit the config allows: one largest record.
	tight := func(c *Config) { c.MaxRemoteCommitBytes = c.Log.MaxBodyBytes + c.Log.MaxKeyBytes + recordOverheadBytes }
	probe := startNATSWithMaxPayload(t, 1<<20)
	tr, err := transport.Connect(context.Background(), transport.Config{Cluster: "test", NodeID: DefaultConfig().NodeID, URLs: []string{probe.ClientURL()}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	headers := tr.MaxPayload() - tr.MaxRequestBytes()
	tr.Close()
	cfg := DefaultConfig()
	tight(&cfg)
	need, err := partitionPayloadBytes(cfg, headers)
	if err != nil {
		t.Fatal(err)
	}

	short := startNATSWithMaxPayload(t, need-1)
	_, err = startNodeOn(t, short.ClientURL(), tight)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("max_payload is %d bytes", need-1)) ||
		!strings.Contains(err.Error(), fmt.Sprintf("at least %d", need)) {
		t.Fatalf("start on a max_payload of %d: got %v, want ErrInvalid naming %d and the %d needed", need-1, err, need-1, need)
	}

	exact := startNATSWithMaxPayload(t, need)
	tn, err := startNodeOn(t, exact.ClientURL(), tight)
	if err != nil {
		t.Fatalf("start on a max_payload of %d: got %v, want started", need, err)
	}
	tn.createTopic("big", 3)
	topic, _ := tn.n.Store().Topic("big")
	k := messages.PartitionKey{Topic: "big", Incarnation: topic.Incarnation, Partition: 1}
	client, err := transport.Connect(context.Background(), transport.Config{Cluster: "test", NodeID: "client", URLs: []string{exact.ClientURL()}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	call := func(req messages.PartitionRequest) messages.PartitionReply {
		t.Helper()
		body, err := messages.EncodePartitionRequest(req)
		if err != nil {
			t.Fatal(err)
		}
		out, err := client.Request(context.Background(), tn.cfg.NodeID, route.PartitionService, body)
		if err != nil {
			t.Fatalf("partition request of %d bytes on a max_payload of %d: %v", len(body), need, err)
		}
		rep, err := messages.DecodePartitionReply(out)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	rng := rand.NewChaCha8([32]byte{7})
	key := make([]byte, cfg.Log.MaxKeyBytes)
	_, _ = rng.Read(key)
	body := largestBody(rng)
	rep := call(messages.PartitionRequest{Key: k, Commit: &messages.Commit{Key: k,
		Records: []messages.CommitRecord{{Seq: 1, Key: key, Body: body}}}})
	if rep.Commit == nil || rep.Commit.Status != messages.StatusOK {
		t.Fatalf("commit of the largest record: got %+v, want StatusOK", rep.Commit)
	}
	rep = call(messages.PartitionRequest{Key: k, ReadAt: &messages.ReadAt{Offset: rep.Commit.FirstOffset}})
	if rep.Reply == nil || rep.Reply.Status != messages.StatusOK {
		t.Fatalf("replay of the largest record: got %+v, want StatusOK", rep.Reply)
	}
	if d := rep.Reply.Delivery; !bytes.Equal(d.Key, key) || !bytes.Equal(d.Body, body) {
		t.Fatalf("replay of the largest record: got a %d-byte key and %d-byte body, want the %d and %d bytes committed", len(d.Key), len(d.Body), len(key), len(body))
	}
}

// The dispatcher counts recordOverheadBytes per record when it caps a
// commit; the start check relies on that covering what the wire form adds.
func TestRecordOverheadCoversTheWireForm(t *testing.T) {
	if recordOverheadBytes < messages.WireRecordOverheadBytes {
		t.Fatalf("recordOverheadBytes %d, want at least messages.WireRecordOverheadBytes %d", recordOverheadBytes, messages.WireRecordOverheadBytes)
	}
}

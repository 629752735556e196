// Package client is a small typed client for the /v1 HTTP API of
// shared/api/CONTRACT.md, shared by the narad CLI (cmd/narad) and the load
// driver (bench/load). Its bodies are the server's own wire types
// (messages/api.go), so what a tool prints re-encodes exactly the keys the
// contract names. It depends on nothing but messages and the standard
// library: a tool built on it speaks only the wire contract.
//
// Where to start: New and Broker in client.go (one method per call of the
// contract), then do in http.go, which every call goes through, and
// retry.go for the contract's retry guidance (IsRetryable, Backoff).
package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/naradmq/narad/messages"
)

// Options fit a Broker to its caller: the CLI sends a few requests in a
// row, a load run keeps many connections busy at once.
type Options struct {
	// Conns is how many idle connections are kept for reuse; 0 keeps 64.
	// Without enough of them the transport closes and reopens connections
	// between requests and every request pays a handshake.
	Conns int
	// Timeout bounds one request on top of any long-poll wait, so that a
	// broker that accepts a connection and never answers cannot hang the
	// caller; 0 is 30 s, the server's own write timeout.
	Timeout time.Duration
	// User and Password, when User is set, go with every request as HTTP
	// Basic credentials (a broker with security on wants them).
	User, Password string
}

// Broker talks to one broker over HTTP. It is safe for concurrent use.
type Broker struct {
	base    string // scheme://host[:port][/path], no trailing slash
	http    *http.Client
	timeout time.Duration
	// user and password are the Basic credentials; none when user is "".
	user, password string
}

// ParseServer parses server, a URL such as http://127.0.0.1:7942, and
// checks its scheme. New checks the host on top; a caller with rules of
// its own about the host (the load driver's loopback check) applies them
// to the result.
func ParseServer(server string) (*url.URL, error) {
	u, err := url.Parse(server)
	if err != nil {
		return nil, fmt.Errorf("parse server url %q: %w", server, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("server url %q: scheme must be http or https", server)
	}
	return u, nil
}

// BaseURL is the base a Broker builds its requests on for the parsed server
// u: scheme://host[:port][/path], no trailing slash. Two servers with one
// base are the same server.
func BaseURL(u *url.URL) string {
	return strings.TrimRight(u.Scheme+"://"+u.Host+u.Path, "/")
}

// New returns a Broker for the broker at server, a URL such as
// http://127.0.0.1:7942.
func New(server string, opts Options) (*Broker, error) {
	u, err := ParseServer(server)
	if err != nil {
		return nil, err
	}
	if u.Host == "" {
		return nil, fmt.Errorf("server url %q: no host", server)
	}
	conns := opts.Conns
	if conns == 0 {
		conns = 64
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	// Every request goes to one host, often many in a row (consume
	// --follow, list paging, a load run's workers), so keep connections
	// alive and reuse them.
	t.MaxIdleConns = conns
	t.MaxIdleConnsPerHost = conns
	t.IdleConnTimeout = 60 * time.Second
	// The contract's API needs no proxy, and a proxy from the environment
	// would send loopback traffic elsewhere.
	t.Proxy = nil
	return &Broker{
		base:    BaseURL(u),
		http:    &http.Client{Transport: t},
		timeout: timeout,
		user:    opts.User, password: opts.Password,
	}, nil
}

// Close drops idle connections, so that a test's server can shut down.
func (b *Broker) Close() { b.http.CloseIdleConnections() }

// ConsumeOptions selects the consume mode: queue mode by default (optionally
// pinned to Partition), replay mode when Offset is set too.
type ConsumeOptions struct {
	// Wait is the long-poll budget in queue mode; 0 answers at once.
	Wait      time.Duration
	Partition *int
	Offset    *int64
}

// CreateTopic creates a topic and returns the record the broker answers.
func (b *Broker) CreateTopic(ctx context.Context, req messages.CreateTopicRequest) (messages.TopicInfo, error) {
	var rec messages.TopicInfo
	body, err := json.Marshal(req)
	if err != nil {
		return rec, fmt.Errorf("encode create topic %q: %w", req.Name, err)
	}
	if err := b.doJSON(ctx, http.MethodPost, "/v1/topics", nil, body, http.StatusCreated, &rec); err != nil {
		return rec, fmt.Errorf("create topic %q: %w", req.Name, err)
	}
	return rec, nil
}

// AlterTopic changes what req sets (PATCH) and returns the topic record
// the broker answers.
func (b *Broker) AlterTopic(ctx context.Context, name string, req messages.AlterTopicRequest) (messages.TopicInfo, error) {
	var rec messages.TopicInfo
	body, err := json.Marshal(req)
	if err != nil {
		return rec, fmt.Errorf("encode alter topic %q: %w", name, err)
	}
	if err := b.doJSON(ctx, http.MethodPatch, "/v1/topics/"+url.PathEscape(name), nil, body, http.StatusOK, &rec); err != nil {
		return rec, fmt.Errorf("alter topic %q: %w", name, err)
	}
	return rec, nil
}

// ListTopics fetches one page; limit 0 leaves the page size to the server.
func (b *Broker) ListTopics(ctx context.Context, limit int, pageToken string) (messages.TopicPage, error) {
	var page messages.TopicPage
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if pageToken != "" {
		q.Set("page_token", pageToken)
	}
	if err := b.doJSON(ctx, http.MethodGet, "/v1/topics", q, nil, http.StatusOK, &page); err != nil {
		return page, fmt.Errorf("list topics: %w", err)
	}
	return page, nil
}

// GetTopic returns a topic's record and its per-partition stats.
func (b *Broker) GetTopic(ctx context.Context, name string) (messages.TopicDetails, error) {
	var d messages.TopicDetails
	p, err := topicPath(name, "")
	if err != nil {
		return d, err
	}
	if err := b.doJSON(ctx, http.MethodGet, p, nil, nil, http.StatusOK, &d); err != nil {
		return d, fmt.Errorf("get topic %q: %w", name, err)
	}
	return d, nil
}

// DeleteTopic deletes a topic, its messages and its in-flight leases.
func (b *Broker) DeleteTopic(ctx context.Context, name string) error {
	p, err := topicPath(name, "")
	if err != nil {
		return err
	}
	if _, _, err := b.do(ctx, http.MethodDelete, p, nil, nil, "", 0, http.StatusNoContent); err != nil {
		return fmt.Errorf("delete topic %q: %w", name, err)
	}
	return nil
}

// Produce sends one message. An empty key lets the server pick one; a
// non-nil partition overrides the key. It returns nil once the broker
// answered 202 (the record is durable on the accepting node).
func (b *Broker) Produce(ctx context.Context, topic string, body []byte, key string, partition *int) error {
	p, err := topicPath(topic, "produce")
	if err != nil {
		return err
	}
	q := url.Values{}
	if key != "" {
		q.Set("key", key)
	}
	if partition != nil {
		q.Set("partition", strconv.Itoa(*partition))
	}
	if _, _, err := b.do(ctx, http.MethodPost, p, q, body, "application/octet-stream", 0, http.StatusAccepted); err != nil {
		return fmt.Errorf("produce to %q: %w", topic, err)
	}
	return nil
}

// Consume fetches one message, or returns nil, nil when the broker had
// none within opts.Wait (204).
func (b *Broker) Consume(ctx context.Context, topic string, opts ConsumeOptions) (*messages.MessageInfo, error) {
	p, err := topicPath(topic, "consume")
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if opts.Wait > 0 {
		q.Set("wait", opts.Wait.String())
	}
	if opts.Partition != nil {
		q.Set("partition", strconv.Itoa(*opts.Partition))
	}
	if opts.Offset != nil {
		q.Set("offset", strconv.FormatInt(*opts.Offset, 10))
	}
	resp, status, err := b.do(ctx, http.MethodGet, p, q, nil, "", opts.Wait, http.StatusOK, http.StatusNoContent)
	if err != nil {
		return nil, fmt.Errorf("consume from %q: %w", topic, err)
	}
	if status == http.StatusNoContent {
		return nil, nil
	}
	var m messages.MessageInfo
	if err := decodeJSON(resp, &m); err != nil {
		return nil, fmt.Errorf("consume from %q: %w", topic, err)
	}
	return &m, nil
}

// Ack settles a delivered message for good.
func (b *Broker) Ack(ctx context.Context, topic, handle string) error {
	p, err := topicPath(topic, "ack")
	if err != nil {
		return err
	}
	if handle == "" {
		return fmt.Errorf("ack on %q: empty receipt handle: %w", topic, ErrInvalid)
	}
	// Handles are opaque: they go back query-escaped, exactly as received.
	q := url.Values{"receipt_handle": {handle}}
	if _, _, err := b.do(ctx, http.MethodPost, p, q, nil, "", 0, http.StatusNoContent); err != nil {
		return fmt.Errorf("ack on %q: %w", topic, err)
	}
	return nil
}

// ProduceBatch sends many records in one request (the batch route beside
// the contract's produce). The answer has one result per record: 202 for
// each the broker made durable, the one-record produce's status and error
// for each it refused. An error is the whole request's.
func (b *Broker) ProduceBatch(ctx context.Context, topic string, recs []messages.BatchRecord) (messages.ProduceBatchResponse, error) {
	var out messages.ProduceBatchResponse
	p, err := topicPath(topic, "produce/batch")
	if err != nil {
		return out, err
	}
	body, err := encodeProduceBatch(recs)
	if err != nil {
		return out, fmt.Errorf("produce batch to %q: %w", topic, err)
	}
	if err := b.doJSON(ctx, http.MethodPost, p, nil, body, http.StatusOK, &out); err != nil {
		return out, fmt.Errorf("produce batch to %q: %w", topic, err)
	}
	if len(out.Results) != len(recs) {
		return out, fmt.Errorf("produce batch to %q: %d results for %d records: %w", topic, len(out.Results), len(recs), ErrProtocol)
	}
	return out, nil
}

// ConsumeBatch leases up to max messages (the batch route beside the
// contract's consume), waiting up to opts.Wait for the first; none is an
// empty answer (204). opts.Offset is not used: a replay reads one.
func (b *Broker) ConsumeBatch(ctx context.Context, topic string, opts ConsumeOptions, max int) ([]messages.MessageInfo, error) {
	p, err := topicPath(topic, "consume/batch")
	if err != nil {
		return nil, err
	}
	q := url.Values{"max": {strconv.Itoa(max)}}
	if opts.Wait > 0 {
		q.Set("wait", opts.Wait.String())
	}
	if opts.Partition != nil {
		q.Set("partition", strconv.Itoa(*opts.Partition))
	}
	resp, status, err := b.do(ctx, http.MethodGet, p, q, nil, "", opts.Wait, http.StatusOK, http.StatusNoContent)
	if err != nil {
		return nil, fmt.Errorf("consume batch from %q: %w", topic, err)
	}
	if status == http.StatusNoContent {
		return nil, nil
	}
	var out messages.ConsumeBatchResponse
	if err := decodeJSON(resp, &out); err != nil {
		return nil, fmt.Errorf("consume batch from %q: %w", topic, err)
	}
	return out.Messages, nil
}

// AckBatch settles many handles in one request (the batch route beside the
// contract's ack): action is "ack" (or ""), "extend" or "nack". One result
// per handle: 204 when settled, else the one-record ack's status and error.
func (b *Broker) AckBatch(ctx context.Context, topic string, handles []string, action string) (messages.AckBatchResponse, error) {
	var out messages.AckBatchResponse
	p, err := topicPath(topic, "ack/batch")
	if err != nil {
		return out, err
	}
	body, err := json.Marshal(messages.AckBatchRequest{ReceiptHandles: handles, Action: action})
	if err != nil {
		return out, fmt.Errorf("ack batch on %q: %w", topic, err)
	}
	if err := b.doJSON(ctx, http.MethodPost, p, nil, body, http.StatusOK, &out); err != nil {
		return out, fmt.Errorf("ack batch on %q: %w", topic, err)
	}
	if len(out.Results) != len(handles) {
		return out, fmt.Errorf("ack batch on %q: %d results for %d handles: %w", topic, len(out.Results), len(handles), ErrProtocol)
	}
	return out, nil
}

// encodeProduceBatch is json.Marshal of a ProduceBatchRequest, but with
// each payload copied as it is: encoding/json validates and compacts a
// RawMessage it writes, two more passes over every body (the batch path's
// client spent more on them than on sending), and compacting would change
// the bytes of a JSON body with spaces. A payload that is not one JSON
// value is refused, as json.Marshal would.
func encodeProduceBatch(recs []messages.BatchRecord) ([]byte, error) {
	size := len(`{"records":[]}`)
	for _, r := range recs {
		size += len(r.Key) + len(r.Payload) + 96
	}
	b := make([]byte, 0, size)
	b = append(b, `{"records":[`...)
	for i, r := range recs {
		if !json.Valid(r.Payload) {
			// One value exactly: a payload that closed its record and
			// opened another would be read as two.
			return nil, fmt.Errorf("record %d: payload is not one JSON value: %w", i, ErrInvalid)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		if r.Key != "" {
			k, err := json.Marshal(r.Key)
			if err != nil {
				return nil, fmt.Errorf("record %d: key: %w", i, err)
			}
			b = append(append(append(b, `"key":`...), k...), ',')
		}
		if r.Partition != nil {
			b = append(strconv.AppendInt(append(b, `"partition":`...), int64(*r.Partition), 10), ',')
		}
		b = append(append(b, `"payload":`...), r.Payload...)
		if r.PayloadEncoding != "" {
			e, _ := json.Marshal(r.PayloadEncoding)
			b = append(append(b, `,"payload_encoding":`...), e...)
		}
		b = append(b, '}')
	}
	return append(b, `]}`...), nil
}

// BatchRecordOf is body as a batch record: a JSON body as itself, other
// UTF-8 as text, anything else in base64, so the broker stores exactly
// body.
func BatchRecordOf(key string, partition *int, body []byte) messages.BatchRecord {
	r := messages.BatchRecord{Key: key, Partition: partition}
	switch {
	case json.Valid(body):
		// Sent as it is (encodeProduceBatch): a JSON body with spaces
		// keeps them.
		r.Payload = json.RawMessage(body)
	case utf8.Valid(body):
		r.Payload, _ = json.Marshal(string(body))
		r.PayloadEncoding = "text"
	default:
		r.Payload, _ = json.Marshal(body) // standard base64
		r.PayloadEncoding = "base64"
	}
	return r
}

// topicPath builds /v1/topics/{topic}[/suffix]. The name is path-escaped
// even though the contract's name regex needs no escaping, so that a bad
// name reaches the server as the user typed it and gets the server's 400.
func topicPath(topic, suffix string) (string, error) {
	if topic == "" {
		return "", fmt.Errorf("topic name is empty: %w", ErrInvalid)
	}
	p := "/v1/topics/" + url.PathEscape(topic)
	if suffix != "" {
		p += "/" + suffix
	}
	return p, nil
}

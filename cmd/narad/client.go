package main

// A small typed client for the /v1 HTTP API in shared/api/CONTRACT.md. The
// CLI commands in client_cli.go use it. Its bodies are the server's own wire
// types (messages/api.go), so what the CLI prints re-encodes exactly the
// keys the contract names and can be piped to tools written against the
// public Narad API.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/naradmq/narad/messages"
)

// defaultServer is the broker a CLI command talks to when neither --server
// nor NARAD_SERVER says otherwise.
const defaultServer = "http://127.0.0.1:7942"

const (
	// requestTimeout bounds one request on top of any long-poll wait, so
	// that a broker that accepts a connection and never answers cannot hang
	// the CLI. The server's own write timeout is 30 s.
	requestTimeout = 30 * time.Second
	// maxResponseBytes bounds what the client reads from one response: a
	// message is at most 1 MiB, which base64 and the envelope grow by a
	// third at most.
	maxResponseBytes = 4 << 20
	// maxErrorBytes bounds how much of an error body is kept.
	maxErrorBytes = 4 << 10
)

// client talks to one broker. It is safe for concurrent use.
type client struct {
	base string // scheme://host[:port], no trailing slash
	http *http.Client
}

// newClient returns a client for the broker at server, a URL such as
// http://127.0.0.1:7942.
func newClient(server string) (*client, error) {
	u, err := url.Parse(server)
	if err != nil {
		return nil, fmt.Errorf("parse server url %q: %w", server, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("server url %q: scheme must be http or https", server)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("server url %q: no host", server)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	// Every command sends its requests to one host, often many in a row
	// (consume --follow, list paging), so keep connections alive and reuse
	// them rather than paying a handshake per request.
	t.MaxIdleConns = 64
	t.MaxIdleConnsPerHost = 64
	t.IdleConnTimeout = 60 * time.Second
	// The contract's API needs no proxy, and a proxy from the environment
	// would send loopback traffic elsewhere.
	t.Proxy = nil
	return &client{
		base: strings.TrimRight(u.Scheme+"://"+u.Host+u.Path, "/"),
		http: &http.Client{Transport: t},
	}, nil
}

// statusError is a non-2xx answer from the broker.
type statusError struct {
	Method string
	Path   string
	Status int
	// Message is the error body's "error" field, or the plain text body
	// (cluster forwarding errors and mux 404/405 are text/plain), or the
	// status text when the body is empty.
	Message string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, e.Message)
}

// isStatus reports whether err is a statusError with the given status.
func isStatus(err error, status int) bool {
	var se *statusError
	return errors.As(err, &se) && se.Status == status
}

// isRetryable reports whether the contract's retry guidance says to try
// again: 502, 503 and transport errors, never another 4xx or 5xx.
func isRetryable(err error) bool {
	var se *statusError
	if errors.As(err, &se) {
		return se.Status == http.StatusBadGateway || se.Status == http.StatusServiceUnavailable
	}
	return err != nil && !errors.Is(err, context.Canceled)
}

// consumeOptions selects the consume mode: queue mode by default (optionally
// pinned to Partition), replay mode when Offset is set too.
type consumeOptions struct {
	// Wait is the long-poll budget in queue mode; 0 answers at once.
	Wait      time.Duration
	Partition *int
	Offset    *int64
}

func (c *client) createTopic(ctx context.Context, req messages.CreateTopicRequest) (messages.TopicInfo, error) {
	var rec messages.TopicInfo
	body, err := json.Marshal(req)
	if err != nil {
		return rec, fmt.Errorf("encode create topic %q: %w", req.Name, err)
	}
	resp, _, err := c.do(ctx, http.MethodPost, "/v1/topics", nil, body, "application/json", 0, http.StatusCreated)
	if err != nil {
		return rec, fmt.Errorf("create topic %q: %w", req.Name, err)
	}
	if err := decodeJSON(resp, &rec); err != nil {
		return rec, fmt.Errorf("create topic %q: %w", req.Name, err)
	}
	return rec, nil
}

// listTopics fetches one page; limit 0 leaves the page size to the server.
func (c *client) listTopics(ctx context.Context, limit int, pageToken string) (messages.TopicPage, error) {
	var page messages.TopicPage
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if pageToken != "" {
		q.Set("page_token", pageToken)
	}
	resp, _, err := c.do(ctx, http.MethodGet, "/v1/topics", q, nil, "", 0, http.StatusOK)
	if err != nil {
		return page, fmt.Errorf("list topics: %w", err)
	}
	if err := decodeJSON(resp, &page); err != nil {
		return page, fmt.Errorf("list topics: %w", err)
	}
	return page, nil
}

func (c *client) getTopic(ctx context.Context, name string) (messages.TopicDetails, error) {
	var d messages.TopicDetails
	p, err := topicPath(name, "")
	if err != nil {
		return d, err
	}
	resp, _, err := c.do(ctx, http.MethodGet, p, nil, nil, "", 0, http.StatusOK)
	if err != nil {
		return d, fmt.Errorf("get topic %q: %w", name, err)
	}
	if err := decodeJSON(resp, &d); err != nil {
		return d, fmt.Errorf("get topic %q: %w", name, err)
	}
	return d, nil
}

func (c *client) deleteTopic(ctx context.Context, name string) error {
	p, err := topicPath(name, "")
	if err != nil {
		return err
	}
	if _, _, err := c.do(ctx, http.MethodDelete, p, nil, nil, "", 0, http.StatusNoContent); err != nil {
		return fmt.Errorf("delete topic %q: %w", name, err)
	}
	return nil
}

// produce sends one message. An empty key lets the server pick one; a
// non-nil partition overrides the key. It returns nil once the broker
// answered 202 (the record is durable on the accepting node).
func (c *client) produce(ctx context.Context, topic string, body []byte, key string, partition *int) error {
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
	if _, _, err := c.do(ctx, http.MethodPost, p, q, body, "application/octet-stream", 0, http.StatusAccepted); err != nil {
		return fmt.Errorf("produce to %q: %w", topic, err)
	}
	return nil
}

// consume fetches one message, or returns nil, nil when the broker had
// none within opts.Wait (204).
func (c *client) consume(ctx context.Context, topic string, opts consumeOptions) (*messages.MessageInfo, error) {
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
	resp, status, err := c.do(ctx, http.MethodGet, p, q, nil, "", opts.Wait, http.StatusOK, http.StatusNoContent)
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

// ack settles a delivered message for good.
func (c *client) ack(ctx context.Context, topic, handle string) error {
	return c.settle(ctx, "ack", topic, handle, "")
}

// extend restarts the lease of a delivered message with a full visibility
// timeout; the handle keeps working.
func (c *client) extend(ctx context.Context, topic, handle string) error {
	return c.settle(ctx, "extend", topic, handle, "true")
}

// nack releases a delivered message for redelivery right away; the handle
// is dead afterwards.
func (c *client) nack(ctx context.Context, topic, handle string) error {
	return c.settle(ctx, "nack", topic, handle, "0")
}

func (c *client) settle(ctx context.Context, what, topic, handle, extend string) error {
	p, err := topicPath(topic, "ack")
	if err != nil {
		return err
	}
	if handle == "" {
		return fmt.Errorf("%s on %q: empty receipt handle", what, topic)
	}
	// Handles are opaque: they go back query-escaped, exactly as received.
	q := url.Values{"receipt_handle": {handle}}
	if extend != "" {
		q.Set("extend", extend)
	}
	if _, _, err := c.do(ctx, http.MethodPost, p, q, nil, "", 0, http.StatusNoContent); err != nil {
		return fmt.Errorf("%s on %q: %w", what, topic, err)
	}
	return nil
}

// topicPath builds /v1/topics/{topic}[/suffix]. The name is path-escaped
// even though the contract's name regex needs no escaping, so that a bad
// name reaches the server as the user typed it and gets the server's 400.
func topicPath(topic, suffix string) (string, error) {
	if topic == "" {
		return "", errors.New("topic name is empty")
	}
	p := "/v1/topics/" + url.PathEscape(topic)
	if suffix != "" {
		p += "/" + suffix
	}
	return p, nil
}

// do sends one request and returns the response body and status when the
// status is one of want. wait is added to the request's deadline for
// long-polls. Any other status is an error: *statusError for non-2xx.
func (c *client) do(ctx context.Context, method, path string, q url.Values, body []byte, contentType string, wait time.Duration, want ...int) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout+wait)
	defer cancel()

	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, 0, fmt.Errorf("build request %s %s: %w", method, path, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// *url.Error repeats the method and the whole URL; keep its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
		return nil, resp.StatusCode, &statusError{Method: method, Path: path, Status: resp.StatusCode, Message: errorText(resp.StatusCode, raw)}
	}
	// Read to the end (bounded) so that the connection can be reused.
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("%s %s: read response: %w", method, path, err)
	}
	if len(raw) > maxResponseBytes {
		return nil, resp.StatusCode, fmt.Errorf("%s %s: response larger than %d bytes", method, path, maxResponseBytes)
	}
	for _, w := range want {
		if resp.StatusCode == w {
			return raw, resp.StatusCode, nil
		}
	}
	return nil, resp.StatusCode, fmt.Errorf("%s %s: unexpected status %d", method, path, resp.StatusCode)
}

// errorText picks the message out of an error body: the JSON "error" field
// when there is one, else the text itself, else the status text.
func errorText(status int, raw []byte) string {
	var e messages.ErrorBody
	if json.Unmarshal(raw, &e) == nil && e.Error != "" {
		return e.Error
	}
	if s := strings.TrimSpace(string(raw)); s != "" {
		return s
	}
	return http.StatusText(status)
}

func decodeJSON(raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	return nil
}

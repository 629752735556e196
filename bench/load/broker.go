package main

// A minimal client for the four calls a load run makes. It is separate from
// cmd/narad's client on purpose: the load driver must stay a self-contained
// program that only speaks the wire contract (shared/api/CONTRACT.md). The
// bodies are the wire types the server encodes (messages/api.go), so the
// driver decodes exactly what a broker sends.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/naradmq/narad/messages"
)

// requestTimeout bounds one request beyond its long-poll wait, so that a
// broker that stops answering cannot stall a worker past the run's bounds.
const requestTimeout = 10 * time.Second

type broker struct {
	base string
	hc   *http.Client
}

// loopbackURL checks that server names a loopback host: a load run sends
// a lot of traffic and must never be aimed at another machine by mistake.
// The host is checked as written, without a DNS lookup.
func loopbackURL(server string) (string, error) {
	u, err := url.Parse(server)
	if err != nil {
		return "", fmt.Errorf("parse server url %q: %w", server, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("server url %q: scheme must be http or https", server)
	}
	host := u.Hostname()
	ip := net.ParseIP(host)
	if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", fmt.Errorf("server url %q: the load driver only targets loopback addresses (127.0.0.0/8, ::1, localhost)", server)
	}
	return strings.TrimRight(u.Scheme+"://"+u.Host+u.Path, "/"), nil
}

func newBroker(server string, conns int) (*broker, error) {
	base, err := loopbackURL(server)
	if err != nil {
		return nil, err
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	// Every worker keeps one connection busy; without enough idle slots the
	// transport would close and reopen connections on every request and
	// the run would measure handshakes.
	t.MaxIdleConns = conns
	t.MaxIdleConnsPerHost = conns
	t.Proxy = nil // loopback traffic must not go through a proxy
	return &broker{base: base, hc: &http.Client{Transport: t}}, nil
}

// close drops idle connections so that a test's server can shut down.
func (b *broker) close() { b.hc.CloseIdleConnections() }

type statusError struct {
	op     string
	status int
	msg    string
}

func (e *statusError) Error() string { return fmt.Sprintf("%s: %d %s", e.op, e.status, e.msg) }

func isStatus(err error, status int) bool {
	var se *statusError
	return errors.As(err, &se) && se.status == status
}

// retryable follows the contract's retry guidance: 502, 503 and transport
// errors are retried, other statuses are not.
func retryable(err error) bool {
	var se *statusError
	if errors.As(err, &se) {
		return se.status == http.StatusBadGateway || se.status == http.StatusServiceUnavailable
	}
	return err != nil
}

func (b *broker) createTopic(ctx context.Context, name string, partitions int) error {
	body, err := json.Marshal(messages.CreateTopicRequest{Name: name, Partitions: partitions})
	if err != nil {
		return fmt.Errorf("encode create topic: %w", err)
	}
	_, _, err = b.do(ctx, "create topic "+name, http.MethodPost, "/v1/topics", nil, body, "application/json", 0, http.StatusCreated)
	return err
}

func (b *broker) produce(ctx context.Context, topic string, body []byte) error {
	_, _, err := b.do(ctx, "produce", http.MethodPost, topicPath(topic, "produce"), nil, body, "application/octet-stream", 0, http.StatusAccepted)
	return err
}

// consume returns nil, nil when the broker had nothing within wait.
func (b *broker) consume(ctx context.Context, topic string, wait time.Duration) (*messages.MessageInfo, error) {
	q := url.Values{"wait": {wait.String()}}
	raw, status, err := b.do(ctx, "consume", http.MethodGet, topicPath(topic, "consume"), q, nil, "", wait, http.StatusOK, http.StatusNoContent)
	if err != nil || status == http.StatusNoContent {
		return nil, err
	}
	var d messages.MessageInfo
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("consume: decode response: %w", err)
	}
	return &d, nil
}

func (b *broker) ack(ctx context.Context, topic, handle string) error {
	q := url.Values{"receipt_handle": {handle}}
	_, _, err := b.do(ctx, "ack", http.MethodPost, topicPath(topic, "ack"), q, nil, "", 0, http.StatusNoContent)
	return err
}

func (b *broker) partitionStats(ctx context.Context, topic string) ([]messages.PartitionInfo, error) {
	raw, _, err := b.do(ctx, "get topic", http.MethodGet, topicPath(topic, ""), nil, nil, "", 0, http.StatusOK)
	if err != nil {
		return nil, err
	}
	var d messages.TopicDetails
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("get topic: decode response: %w", err)
	}
	return d.PartitionStats, nil
}

func topicPath(topic, suffix string) string {
	p := "/v1/topics/" + url.PathEscape(topic)
	if suffix != "" {
		p += "/" + suffix
	}
	return p
}

// do sends one request; wait extends its deadline for long-polls. A status
// not in want is a *statusError.
func (b *broker) do(ctx context.Context, op, method, path string, q url.Values, body []byte, contentType string, wait time.Duration, want ...int) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout+wait)
	defer cancel()
	u := b.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: build request: %w", op, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, 0, fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	// Messages are at most 1 MiB; base64 and the envelope add a third.
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("%s: read response: %w", op, err)
	}
	for _, w := range want {
		if resp.StatusCode == w {
			return raw, resp.StatusCode, nil
		}
	}
	return nil, resp.StatusCode, &statusError{op: op, status: resp.StatusCode, msg: errorText(resp.StatusCode, raw)}
}

// errorText reads the contract's {"error": ...} body, falling back to the
// text itself: cluster forwarding errors are text/plain.
func errorText(status int, raw []byte) string {
	var e messages.ErrorBody
	if json.Unmarshal(raw, &e) == nil && e.Error != "" {
		return e.Error
	}
	if s := strings.TrimSpace(string(raw)); s != "" {
		if len(s) > 200 {
			s = s[:200] + "..."
		}
		return s
	}
	return http.StatusText(status)
}

package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/naradmq/narad/messages"
)

const (
	// maxResponseBytes bounds what the client reads from one response: a
	// message is at most 1 MiB, which base64 and the envelope grow by a
	// third at most.
	maxResponseBytes = 4 << 20
	// maxErrorBytes bounds how much of an error body is kept.
	maxErrorBytes = 4 << 10
)

// The client's own errors, besides StatusError and the transport's.
var (
	// ErrInvalid is a call the client refused to send: an empty topic
	// name or receipt handle.
	ErrInvalid = errors.New("invalid argument")
	// ErrProtocol is an answer outside the contract: a 2xx the call does
	// not expect, a body too large or that does not decode.
	ErrProtocol = errors.New("answer outside the contract")
)

// StatusError is a non-2xx answer from the broker.
type StatusError struct {
	Method string
	Path   string
	Status int
	// Message is the error body's "error" field, or the plain text body
	// (cluster forwarding errors and mux 404/405 are text/plain), or the
	// status text when the body is empty.
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, e.Message)
}

// IsStatus reports whether err is a StatusError with the given status.
func IsStatus(err error, status int) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Status == status
}

// do sends one request and returns the response body and status when the
// status is one of want. wait is added to the request's deadline for
// long-polls. Any other status is an error: *StatusError for non-2xx.
func (b *Broker) do(ctx context.Context, method, path string, q url.Values, body []byte, contentType string, wait time.Duration, want ...int) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout+wait)
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
		return nil, 0, fmt.Errorf("build request %s %s: %w", method, path, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if b.user != "" {
		req.SetBasicAuth(b.user, b.password)
	}
	resp, err := b.http.Do(req)
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
		return nil, resp.StatusCode, &StatusError{Method: method, Path: path, Status: resp.StatusCode, Message: errorText(resp.StatusCode, raw)}
	}
	// Read to the end (bounded) so that the connection can be reused.
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("%s %s: read response: %w", method, path, err)
	}
	if len(raw) > maxResponseBytes {
		return nil, resp.StatusCode, fmt.Errorf("%s %s: response larger than %d bytes: %w", method, path, maxResponseBytes, ErrProtocol)
	}
	for _, w := range want {
		if resp.StatusCode == w {
			return raw, resp.StatusCode, nil
		}
	}
	return nil, resp.StatusCode, fmt.Errorf("%s %s: unexpected status %d: %w", method, path, resp.StatusCode, ErrProtocol)
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

// doJSON is do for a route that answers JSON with status want: it decodes
// the answer into out. A body, when there is one, is JSON too.
func (b *Broker) doJSON(ctx context.Context, method, path string, q url.Values, body []byte, want int, out any) error {
	contentType := ""
	if body != nil {
		contentType = "application/json"
	}
	resp, _, err := b.do(ctx, method, path, q, body, contentType, 0, want)
	if err != nil {
		return err
	}
	return decodeJSON(resp, out)
}

func decodeJSON(raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decode response: %w: %w", err, ErrProtocol)
	}
	return nil
}

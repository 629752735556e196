package transport

import (
	"context"
	"encoding/json"
	"fmt"
)

// RequestJSON sends in, JSON-encoded, to node's service and decodes the
// reply into out (out may be nil to ignore the body). Errors are Request's,
// plus encoding errors.
func RequestJSON(ctx context.Context, t *Transport, node, service string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("transport: encode request to %s/%s: %w", node, service, err)
	}
	resp, err := t.Request(ctx, node, service, body)
	if err != nil {
		return err
	}
	return decodeJSON(resp, out, node+"/"+service)
}

// RequestAdminJSON is RequestJSON for an admin verb.
func RequestAdminJSON(ctx context.Context, t *Transport, verb string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("transport: encode admin %s request: %w", verb, err)
	}
	resp, err := t.RequestAdmin(ctx, verb, body)
	if err != nil {
		return err
	}
	return decodeJSON(resp, out, "admin "+verb)
}

func decodeJSON(resp []byte, out any, what string) error {
	if out == nil || len(resp) == 0 {
		return nil
	}
	if err := json.Unmarshal(resp, out); err != nil {
		return fmt.Errorf("transport: decode reply of %s: %w", what, err)
	}
	return nil
}

// HandleJSON serves a service whose request and reply are JSON: the body
// decodes into In (an empty body is In's zero value; a body that does not
// decode is answered with StatusBadRequest without calling h), and h's
// result is encoded as the reply.
func HandleJSON[In, Out any](t *Transport, service string, h func(ctx context.Context, from string, in In) (Out, error)) error {
	return t.Handle(service, jsonHandler(h))
}

// HandleAdminJSON is HandleJSON for an admin verb (queue group: one node
// answers), so `nats req narad.<cluster>.admin.<verb> '{}'` works.
func HandleAdminJSON[In, Out any](t *Transport, verb string, h func(ctx context.Context, from string, in In) (Out, error)) error {
	return t.HandleAdmin(verb, jsonHandler(h))
}

func jsonHandler[In, Out any](h func(ctx context.Context, from string, in In) (Out, error)) Handler {
	return func(ctx context.Context, from string, req []byte) ([]byte, error) {
		var in In
		if len(req) > 0 {
			if err := json.Unmarshal(req, &in); err != nil {
				return nil, Errorf(StatusBadRequest, "bad request: %v", err)
			}
		}
		out, err := h(ctx, from, in)
		if err != nil {
			return nil, err
		}
		body, err := json.Marshal(out)
		if err != nil {
			return nil, fmt.Errorf("encode reply: %w", err)
		}
		return body, nil
	}
}

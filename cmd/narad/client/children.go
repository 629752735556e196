package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/naradmq/narad/messages"
)

// AttachChild makes child a fan-out child of parent (delayed delayMs when
// it is not nil) and returns the parent's record.
func (b *Broker) AttachChild(ctx context.Context, parent, child string, delayMs *int64) (messages.TopicInfo, error) {
	var rec messages.TopicInfo
	p, err := topicPath(parent, "children")
	if err != nil {
		return rec, err
	}
	body, err := json.Marshal(messages.AttachChildRequest{Child: child, DelayMs: delayMs})
	if err != nil {
		return rec, fmt.Errorf("encode attach %q to %q: %w", child, parent, err)
	}
	if err := b.doJSON(ctx, http.MethodPost, p, nil, body, http.StatusOK, &rec); err != nil {
		return rec, fmt.Errorf("attach %q to %q: %w", child, parent, err)
	}
	return rec, nil
}

// Children lists parent's children with their lag.
func (b *Broker) Children(ctx context.Context, parent string) (messages.ChildList, error) {
	var l messages.ChildList
	p, err := topicPath(parent, "children")
	if err != nil {
		return l, err
	}
	if err := b.doJSON(ctx, http.MethodGet, p, nil, nil, http.StatusOK, &l); err != nil {
		return l, fmt.Errorf("children of %q: %w", parent, err)
	}
	return l, nil
}

// DetachChild removes the link from parent to child.
func (b *Broker) DetachChild(ctx context.Context, parent, child string) error {
	if child == "" {
		return fmt.Errorf("child name is empty: %w", ErrInvalid)
	}
	p, err := topicPath(parent, "children/"+url.PathEscape(child))
	if err != nil {
		return err
	}
	if _, _, err := b.do(ctx, http.MethodDelete, p, nil, nil, "", 0, http.StatusNoContent); err != nil {
		return fmt.Errorf("detach %q from %q: %w", child, parent, err)
	}
	return nil
}

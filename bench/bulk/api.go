package main

// The cluster routes (members, moves, decommission) and the one-partition
// stats read have no method in cmd/narad/client, so they are plain GETs and
// POSTs here, decoded into the server's own wire types.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/naradmq/narad/messages"
)

// apiTimeout bounds one request of the harness: a node that accepts and
// never answers must not stall a wait past its own bound.
const apiTimeout = 10 * time.Second

// maxAPIBytes bounds a response read: a members list or a topic's stats are
// a few KiB; the moves list of a large rebalance may be a few MiB.
const maxAPIBytes = 16 << 20

var apiClient = &http.Client{Timeout: apiTimeout}

// The nodes run secured (HTTP Basic, users and grants, as narad serve does
// by default): the harness is the root user admin, seeded with a password
// made for the run.
const benchUser = "admin"

var benchPassword = func() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}()

// authorize adds the harness's credentials to a request.
func authorize(req *http.Request) { req.SetBasicAuth(benchUser, benchPassword) }

// call sends the harness's request without a body to u and answers the
// status and the body, read up to maxAPIBytes.
func call(ctx context.Context, method, u string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return 0, nil, err
	}
	authorize(req)
	resp, err := apiClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIBytes))
	return resp.StatusCode, raw, err
}

// getJSON GETs base+path and decodes a 200 answer into v.
func getJSON(ctx context.Context, base, path string, v any) error {
	status, raw, err := call(ctx, http.MethodGet, base+path)
	if err != nil {
		return fmt.Errorf("get %s: %w", path, err)
	}
	if status != http.StatusOK {
		return fmt.Errorf("get %s: %d %s", path, status, raw)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("get %s: %w", path, err)
	}
	return nil
}

// members reads GET /v1/cluster/members from the node at base.
func members(ctx context.Context, base string) (map[string]messages.MemberInfo, error) {
	var l messages.MemberList
	if err := getJSON(ctx, base, "/v1/cluster/members", &l); err != nil {
		return nil, err
	}
	out := make(map[string]messages.MemberInfo, len(l.Members))
	for _, m := range l.Members {
		out[m.ID] = m
	}
	return out, nil
}

// movesInFlight counts the moves GET /v1/cluster/moves lists.
func movesInFlight(ctx context.Context, base string) (int, error) {
	var l messages.MoveList
	if err := getJSON(ctx, base, "/v1/cluster/moves", &l); err != nil {
		return 0, err
	}
	return len(l.Moves), nil
}

// partitionStats reads one partition's stats (GET /v1/topics/{t}?partition=).
func partitionStats(ctx context.Context, base, topic string, partition int) (messages.PartitionInfo, error) {
	var d messages.TopicDetails
	path := "/v1/topics/" + url.PathEscape(topic) + "?partition=" + strconv.Itoa(partition)
	if err := getJSON(ctx, base, path, &d); err != nil {
		return messages.PartitionInfo{}, err
	}
	for _, p := range d.PartitionStats {
		if p.Index == partition {
			return p, nil
		}
	}
	return messages.PartitionInfo{}, fmt.Errorf("stats of %s/%d: not served yet", topic, partition)
}

// decommission starts draining a member (POST .../decommission, 204).
func decommission(ctx context.Context, base, id string) error {
	status, raw, err := call(ctx, http.MethodPost, base+"/v1/cluster/members/"+url.PathEscape(id)+"/decommission")
	if err != nil {
		return fmt.Errorf("decommission %s: %w", id, err)
	}
	if status != http.StatusNoContent {
		return fmt.Errorf("decommission %s: %d %s", id, status, raw)
	}
	return nil
}

package transport

import (
	"errors"
	"fmt"
	"github.com/VictoriaMetrics/metrics"
	"strings"
	"time"

	"github.com/naradmq/narad/actors/clock"
)

// Config is one node's transport. Zero values of the tuning fields take the
// defaults of WithDefaults; Connect applies them before Validate.
type Config struct {
	// Cluster is the cluster name, the second token of every subject, so
	// two clusters can share one NATS deployment without hearing each other.
	Cluster string
	// NodeID is this node's id: the subject token other nodes address
	// (narad.<cluster>.node.<NodeID>.<service>) and the node label of metrics.
	NodeID string
	// Metrics is the node's metrics set, which holds the transport's
	// series; nil is the process-wide default set.
	Metrics *metrics.Set
	// URLs are the NATS servers to connect to; several give the client a
	// fallback when one server of a NATS cluster is down. An entry may hold
	// a comma-separated list (one --nats flag naming a whole NATS cluster);
	// WithDefaults splits it. At most MaxURLs.
	URLs []string
	// RequestTimeout bounds one Request, retries included (the caller's
	// context may end it sooner). Past it the outcome is unknown: ErrTimeout.
	RequestTimeout time.Duration
	// MaxRetries is how many times a request is sent again after an error
	// that proves it was not processed (no responders, not connected): a
	// restarting node resubscribes within moments. Timeouts never retry.
	MaxRetries int
	// RetryBackoff is the pause before the first retry; it doubles for each
	// further retry, always within RequestTimeout.
	RetryBackoff time.Duration
	// MaxPayloadBytes caps a request or reply (body plus headers). 0 means
	// the server's max_payload (1 MiB by default), read from the connection
	// at each send because a reconnect may land on another server; a value
	// above the server's is lowered to it. Larger payloads are refused
	// before sending with ErrTooLarge: NATS would otherwise drop the
	// connection.
	MaxPayloadBytes int64
	// MaxConcurrentHandlers bounds the handler goroutines of this transport
	// across all services. When it is reached, subscriptions stop taking
	// messages (they queue in NATS's per-subscription buffer) instead of
	// growing goroutines without limit.
	MaxConcurrentHandlers int
	// MaxAdminTimeout caps the budget an admin request names (its
	// Narad-Timeout-Ms header): admin and viewer clients choose it, and
	// their handlers share MaxConcurrentHandlers with the node's own
	// services, so none may hold a slot longer than this. Past it the
	// asker gets StatusTimeout. Within 1s..10m.
	MaxAdminTimeout time.Duration
	// ConnectTimeout bounds one dial of a NATS server.
	ConnectTimeout time.Duration
	// ReconnectWait is the pause between reconnect attempts to one server.
	ReconnectWait time.Duration
	// MaxReconnects is how many reconnect attempts are made before the
	// connection is given up for good; -1 (the default) retries forever,
	// which a broker node wants: NATS coming back must heal the node. 0
	// takes the default (a node never wants to give up after one drop).
	MaxReconnects int
	// DrainTimeout bounds Close's drain of subscriptions and pending
	// publishes before the connection is closed anyway.
	DrainTimeout time.Duration
	// Auth is the node's NATS credentials and TLS; zero connects to an open
	// server only.
	Auth Auth
	// Clock times the pauses between retries and Close's wait for the
	// drain, and measures requests for the metrics: the node's steady
	// clock (actors/clock). Nil is the wall clock. A request's and a
	// handler's deadlines are their contexts', kept by the runtime.
	Clock clock.Clock
}

// Defaults of Config's tuning fields, for a LAN where a request/reply takes
// about 50 µs.
const (
	DefaultRequestTimeout = 5 * time.Second
	DefaultMaxRetries     = 3
	// 20 ms, 40 ms, 80 ms: 140 ms in all, long enough for a node that is
	// restarting its subscriptions, short against RequestTimeout.
	DefaultRetryBackoff          = 20 * time.Millisecond
	DefaultMaxConcurrentHandlers = 1024
	// Six times the CLI's default --timeout and three times a node's
	// request: no admin verb legitimately takes longer.
	DefaultMaxAdminTimeout = 30 * time.Second
	// AdminTimeoutMin and AdminTimeoutMax bound MaxAdminTimeout: below a
	// second a slow disk fails a verb; past ten minutes the cap caps nothing.
	AdminTimeoutMin       = time.Second
	AdminTimeoutMax       = 10 * time.Minute
	DefaultConnectTimeout = 2 * time.Second
	DefaultReconnectWait  = 250 * time.Millisecond
	DefaultMaxReconnects  = -1
	DefaultDrainTimeout   = 5 * time.Second
	// MaxURLs bounds the server list: a first connect may dial each for
	// ConnectTimeout, and a NATS cluster that needs more seeds than this
	// is a configuration mistake (the client learns the other servers of
	// a cluster from the ones it reaches).
	MaxURLs = 16
)

// WithDefaults returns c with every zero tuning field set to its default.
// MaxRetries 0 means the default; use -1 for no retries at all.
func (c Config) WithDefaults() Config {
	c.URLs = splitURLs(c.URLs)
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = DefaultMaxRetries
	} else if c.MaxRetries < 0 {
		c.MaxRetries = 0
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = DefaultRetryBackoff
	}
	if c.MaxConcurrentHandlers == 0 {
		c.MaxConcurrentHandlers = DefaultMaxConcurrentHandlers
	}
	if c.MaxAdminTimeout == 0 {
		c.MaxAdminTimeout = DefaultMaxAdminTimeout
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.ReconnectWait == 0 {
		c.ReconnectWait = DefaultReconnectWait
	}
	if c.MaxReconnects == 0 {
		c.MaxReconnects = DefaultMaxReconnects
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	return c
}

// Validate reports every problem of c (after WithDefaults) at once; each
// wraps ErrInvalid.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("transport config: "+format+": %w", append(args, ErrInvalid)...))
	}
	if err := ValidToken("Cluster", c.Cluster); err != nil {
		errs = append(errs, fmt.Errorf("transport config: %w", err))
	}
	if err := ValidToken("NodeID", c.NodeID); err != nil {
		errs = append(errs, fmt.Errorf("transport config: %w", err))
	}
	if len(c.URLs) == 0 {
		bad("URLs is empty")
	}
	if len(c.URLs) > MaxURLs {
		bad("%d URLs, want at most %d", len(c.URLs), MaxURLs)
	}
	for i, u := range c.URLs {
		if u == "" {
			bad("URLs[%d] is empty", i)
		}
	}
	if c.RequestTimeout < 0 {
		bad("RequestTimeout %s is negative", c.RequestTimeout)
	}
	if c.RetryBackoff < 0 {
		bad("RetryBackoff %s is negative", c.RetryBackoff)
	}
	if c.RetryBackoff >= c.RequestTimeout {
		bad("RetryBackoff %s must be below RequestTimeout %s", c.RetryBackoff, c.RequestTimeout)
	}
	if c.MaxPayloadBytes < 0 {
		bad("MaxPayloadBytes %d is negative", c.MaxPayloadBytes)
	}
	if c.MaxConcurrentHandlers < 1 {
		bad("MaxConcurrentHandlers %d, want >= 1", c.MaxConcurrentHandlers)
	}
	if c.MaxAdminTimeout < AdminTimeoutMin || c.MaxAdminTimeout > AdminTimeoutMax {
		bad("MaxAdminTimeout %s, want within %s..%s", c.MaxAdminTimeout, AdminTimeoutMin, AdminTimeoutMax)
	}
	if c.ConnectTimeout < 0 || c.ReconnectWait < 0 || c.DrainTimeout < 0 {
		bad("ConnectTimeout %s, ReconnectWait %s, DrainTimeout %s: none may be negative",
			c.ConnectTimeout, c.ReconnectWait, c.DrainTimeout)
	}
	if err := c.Auth.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("transport config: %w", err))
	}
	if c.MaxReconnects < -1 {
		bad("MaxReconnects %d, want -1 (forever) or >= 0", c.MaxReconnects)
	}
	return errors.Join(errs...)
}

// splitURLs flattens entries holding comma-separated lists and trims the
// spaces around each URL. An empty piece stays, so Validate names it.
func splitURLs(urls []string) []string {
	var out []string
	for _, u := range urls {
		for _, p := range strings.Split(u, ",") {
			out = append(out, strings.TrimSpace(p))
		}
	}
	return out
}

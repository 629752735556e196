package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/messages"
)

// Handler serves one request. from is the calling node's id ("" when the
// caller is not a node, e.g. the nats CLI). ctx ends at the caller's
// deadline or when the transport closes. The returned bytes are the reply
// body; a returned error travels back as a *RemoteError (choose the status
// by returning one, see Errorf), plain errors as StatusInternal.
type Handler func(ctx context.Context, from string, req []byte) ([]byte, error)

// Transport is one node's NATS connection: it serves this node's services
// and admin verbs and sends requests to other nodes. It is safe for
// concurrent use.
type Transport struct {
	cfg   Config
	clock clock.Clock // cfg.Clock or the wall
	log   *slog.Logger
	nc    *nats.Conn

	// sem holds one token per running handler (MaxConcurrentHandlers).
	sem chan struct{}
	// base is the parent of every handler context and of every request's
	// context; Close cancels it.
	base   context.Context
	cancel context.CancelFunc
	// connClosed is closed by NATS's ClosedHandler: the connection and its
	// goroutines are gone.
	connClosed chan struct{}

	// cut is the fault-injection seam (CutOff). Production never sets it.
	cut atomic.Bool

	mu       sync.Mutex
	closed   bool                          // under mu; set once by Close
	subs     map[string]*nats.Subscription // subject -> subscription, under mu
	handlers sync.WaitGroup                // running handler goroutines; Add under mu while !closed

	closeOnce sync.Once
	metrics   metricsCache
}

// Connect validates cfg, connects to NATS and waits until the connection is
// up or ctx ends. NATS reconnects by itself afterwards (MaxReconnects,
// ReconnectWait) and restores the subscriptions. log may be nil.
func Connect(ctx context.Context, cfg Config, log *slog.Logger) (*Transport, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "transport", "node", cfg.NodeID)
	base, cancel := context.WithCancel(context.Background())
	t := &Transport{
		cfg:        cfg,
		log:        log,
		sem:        make(chan struct{}, cfg.MaxConcurrentHandlers),
		base:       base,
		cancel:     cancel,
		connClosed: make(chan struct{}),
		subs:       make(map[string]*nats.Subscription),
		metrics:    metricsCache{node: cfg.NodeID, set: setOrDefault(cfg.Metrics)},
		clock:      clock.Or(cfg.Clock),
	}
	up := make(chan struct{}, 1)
	signalUp := func(*nats.Conn) {
		select {
		case up <- struct{}{}:
		default:
		}
	}
	auth, err := cfg.Auth.Options()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("transport: %w", err)
	}
	nc, err := nats.Connect(strings.Join(cfg.URLs, ","), append(auth,
		nats.Name("narad-"+cfg.Cluster+"-"+cfg.NodeID),
		// Replies to this node land under a prefix only nodes may
		// subscribe to (RolePermissions); it replaces the user's inbox
		// that Auth.Options set.
		nats.CustomInboxPrefix(nodeInboxPrefix(cfg.Cluster)),
		nats.Timeout(cfg.ConnectTimeout),
		nats.ReconnectWait(cfg.ReconnectWait),
		nats.MaxReconnects(cfg.MaxReconnects),
		// A node may start before NATS does: keep trying in the background
		// and let Connect's ctx decide how long to wait.
		nats.RetryOnFailedConnect(true),
		nats.DrainTimeout(cfg.DrainTimeout),
		nats.ConnectHandler(signalUp),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info("nats reconnected", "url", c.ConnectedUrlRedacted())
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			log.Error("nats async error", "subject", subj, "err", err)
		}),
		nats.ClosedHandler(func(*nats.Conn) { close(t.connClosed) }),
	)...)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("transport: connect %v: %w", cfg.URLs, err)
	}
	t.nc = nc
	if !nc.IsConnected() {
		select {
		case <-up:
		case <-t.connClosed:
			cancel()
			return nil, fmt.Errorf("transport: connect %v: gave up reconnecting%s: %w", cfg.URLs, lastError(nc), ErrNotConnected)
		case <-ctx.Done():
			// Why the attempts failed (refused credentials, a server that
			// takes no nkeys, a certificate) is the operator's clue.
			why := lastError(nc)
			nc.Close()
			<-t.connClosed
			cancel()
			return nil, fmt.Errorf("transport: connect %v%s: %w: %w", cfg.URLs, why, ErrNotConnected, ctx.Err())
		}
	}
	log.Info("nats connected", "url", nc.ConnectedUrlRedacted(), "max_payload", nc.MaxPayload())
	return t, nil
}

// lastError is ", last error: ..." for a connection that has one.
func lastError(nc *nats.Conn) string {
	if err := nc.LastError(); err != nil {
		return ", last error: " + err.Error()
	}
	return ""
}

// NodeID is this transport's node id.
func (t *Transport) NodeID() string { return t.cfg.NodeID }

// Config is the effective configuration (defaults applied).
func (t *Transport) Config() Config { return t.cfg }

// Close stops serving and closes the connection: new requests are refused
// (StatusUnavailable), running handlers see their context cancelled and are
// waited for (handlers must honour ctx), then subscriptions are drained and
// the connection closed. When Close returns no goroutine of the transport is
// left. Requests in flight on this transport end with ErrClosed. Safe to call
// more than once.
func (t *Transport) Close() {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.closed = true
		t.mu.Unlock()
		t.cancel()
		t.handlers.Wait()
		if err := t.nc.Drain(); err != nil {
			// Not connected (reconnecting) or already closed: Drain has
			// closed the connection itself, or will not; make sure.
			t.nc.Close()
		}
		waited := clock.NewAlarm(t.clock, t.cfg.DrainTimeout+time.Second)
		defer waited.Stop()
		select {
		case <-t.connClosed:
		case <-waited.C:
			t.log.Error("nats connection did not close after drain", "waited", t.cfg.DrainTimeout+time.Second)
			t.nc.Close()
			<-t.connClosed
		}
	})
}

// isClosed reports whether Close has started.
func (t *Transport) isClosed() bool { return t.base.Err() != nil }

// CutOff is a fault-injection seam for cluster tests, never flipped in
// production. While on, this node behaves as if its network were cut: its
// outgoing requests get no answer (they wait out their deadline and return
// ErrTimeout), and incoming requests are dropped unanswered before their
// handler is called (callers time out too); a handler already running when
// the cut starts has its reply dropped. Subscriptions stay in place, so a
// caller sees ErrTimeout rather than ErrNoResponders, as in the first minutes
// of a real partition before NATS notices the dead client. An admin request
// routed by the queue group to a cut-off node times out as well. Off heals.
func (t *Transport) CutOff(on bool) {
	t.cut.Store(on)
	t.log.Warn("transport cut-off (test seam)", "on", on)
}

// Handle serves this node's service: requests to
// narad.<cluster>.node.<NodeID>.<service> run h, each on its own goroutine
// within MaxConcurrentHandlers. One handler per service. When NATS is up,
// Handle returns once the server has the subscription.
func (t *Transport) Handle(service string, h Handler) error {
	subj, err := NodeSubject(t.cfg.Cluster, t.cfg.NodeID, service)
	if err != nil {
		return err
	}
	return t.subscribe(subj, "", service, 0, h)
}

// HandleAdmin serves an admin verb: requests to narad.<cluster>.admin.<verb>
// run h on exactly one of the nodes that serve the verb (a queue group), so
// any node answers. Bodies are JSON by convention, so `nats req
// narad.<cluster>.admin.<verb> '{}'` works; see HandleAdminJSON.
func (t *Transport) HandleAdmin(verb string, h Handler) error {
	subj, err := AdminSubject(t.cfg.Cluster, verb)
	if err != nil {
		return err
	}
	// Anyone with admin or viewer credentials asks these, and names its
	// own budget: the ceiling keeps one from holding a handler slot of
	// the node's shared pool for longer.
	return t.subscribe(subj, adminQueue, "admin."+verb, t.cfg.MaxAdminTimeout, h)
}

// subjectFreeLocked is nil when a subscription on subj may be added: the
// transport is open and nothing listens there yet (what names the
// listener a second one would clash with).
func (t *Transport) subjectFreeLocked(subj, what string) error {
	if t.closed {
		return ErrClosed
	}
	if _, dup := t.subs[subj]; dup {
		return fmt.Errorf("transport: %s already has %s: %w", subj, what, ErrInvalid)
	}
	return nil
}

// subscribe serves subj with h; ceiling, when positive, caps the budget a
// request names.
func (t *Transport) subscribe(subj, queue, label string, ceiling time.Duration, h Handler) error {
	if h == nil {
		return fmt.Errorf("transport: nil handler for %s: %w", subj, ErrInvalid)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.subjectFreeLocked(subj, "a handler"); err != nil {
		return err
	}
	cb := t.dispatch(label, ceiling, h)
	var sub *nats.Subscription
	var err error
	if queue == "" {
		sub, err = t.nc.Subscribe(subj, cb)
	} else {
		sub, err = t.nc.QueueSubscribe(subj, queue, cb)
	}
	if err != nil {
		return fmt.Errorf("transport: subscribe %s: %w", subj, err)
	}
	t.subs[subj] = sub
	// Make the subscription live at the server before Handle returns, so a
	// request sent right after does not find no responders. When NATS is
	// down the subscription is sent on reconnect instead.
	if t.nc.IsConnected() {
		if err := t.nc.FlushTimeout(t.cfg.RequestTimeout); err != nil {
			t.log.Warn("transport subscribe not confirmed", "subject", subj, "err", err)
		}
	}
	return nil
}

// dispatch is the NATS callback of one subscription. NATS calls it on the
// subscription's own goroutine, one message at a time; it only takes a
// handler slot and starts the handler, so a slow handler never holds up
// the subscription unless all slots are busy.
func (t *Transport) dispatch(label string, ceiling time.Duration, h Handler) nats.MsgHandler {
	sm := t.metrics.get(label)
	return func(m *nats.Msg) {
		if t.cut.Load() || m.Reply == "" {
			return // cut off: as if never received; no reply subject: nobody waits
		}
		budget := t.cfg.RequestTimeout
		if v := m.Header.Get(messages.HeaderTimeoutMs); v != "" {
			if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms > 0 {
				budget = time.Duration(min(ms, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond
			}
		}
		if ceiling > 0 {
			budget = min(budget, ceiling)
		}
		// The handler's context, from now: the wait for a slot counts
		// against the caller's budget too.
		ctx, cancel := context.WithTimeout(t.base, budget)
		if !t.acquire(ctx) {
			cancel()
			if t.isClosed() {
				t.respond(m, nil, Errorf(StatusUnavailable, "node %s is closing", t.cfg.NodeID))
			}
			return // the caller's deadline passed while waiting: it is gone
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			<-t.sem
			cancel()
			t.respond(m, nil, Errorf(StatusUnavailable, "node %s is closing", t.cfg.NodeID))
			return
		}
		t.handlers.Add(1)
		t.mu.Unlock()
		from := m.Header.Get(messages.HeaderFrom)
		go func() {
			defer t.handlers.Done()
			defer func() { <-t.sem }()
			defer cancel()
			out, err := t.run(ctx, h, from, m)
			if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				err = Errorf(StatusTimeout, "handler ran out of time: %v", err)
			}
			sm.handled.Inc()
			t.respond(m, out, err)
		}()
	}
}

// acquire takes a handler slot, waiting until one is free or ctx ends
// (its deadline passes, or the transport closes: ctx is of t.base).
func (t *Transport) acquire(ctx context.Context) bool {
	select {
	case t.sem <- struct{}{}:
		return true
	default:
	}
	select {
	case t.sem <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// run calls h, turning a panic into a StatusInternal error with the stack
// logged: one bad request must not take the node down.
func (t *Transport) run(ctx context.Context, h Handler, from string, m *nats.Msg) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			t.log.Error("transport handler panicked", "subject", m.Subject, "from", from,
				"panic", p, "stack", string(debug.Stack()))
			t.metrics.set.GetOrCreateCounter(fmt.Sprintf(`narad_nats_handler_panics_total{node=%q,subject=%q}`, t.cfg.NodeID, m.Subject)).Inc()
			out, err = nil, Errorf(StatusInternal, "handler panicked: %v", p)
		}
	}()
	return h(ctx, from, m.Data)
}

// respond sends the handler's answer, or an error envelope. A reply too large
// for the connection becomes a StatusTooLarge error.
func (t *Transport) respond(m *nats.Msg, out []byte, err error) {
	if t.cut.Load() {
		return
	}
	reply := &nats.Msg{Data: out}
	if err != nil {
		reply = errorReply(err)
	}
	if max := t.maxPayload(); msgSize(reply) > max {
		reply = errorReply(Errorf(StatusTooLarge, "reply of %d bytes exceeds max payload %d", msgSize(reply), max))
	}
	if err := m.RespondMsg(reply); err != nil {
		t.log.Debug("transport reply not sent", "subject", m.Subject, "err", err)
	}
}

// errorReply is the envelope of a handler error.
func errorReply(err error) *nats.Msg {
	status, text := StatusInternal, err.Error()
	if re, ok := errors.AsType[*RemoteError](err); ok {
		status, text = re.Status, re.Msg
		if status == 0 {
			status = StatusInternal
		}
	}
	body, _ := json.Marshal(messages.ErrorReply{Status: status, Error: text})
	h := nats.Header{}
	h[messages.HeaderStatus] = []string{strconv.Itoa(status)}
	return &nats.Msg{Header: h, Data: body}
}

// MaxPayload is the largest message, body plus headers, this transport
// sends now: the server's max_payload, or Config.MaxPayloadBytes when
// lower. It is read from the connection at each call, since a reconnect
// may land on a server with another limit.
func (t *Transport) MaxPayload() int64 { return t.maxPayload() }

// MaxRequestBytes is the largest request body Request can send now:
// MaxPayload less the headers every request carries, counted at their
// longest, so a body of this size is never refused as too large.
func (t *Transport) MaxRequestBytes() int64 {
	return t.maxPayload() - msgSize(&nats.Msg{Header: t.requestHeader(math.MaxInt64)})
}

// maxPayload is the largest message (body plus headers) this transport sends.
func (t *Transport) maxPayload() int64 {
	max := t.nc.MaxPayload()
	if max <= 0 { // not connected yet: assume the NATS default
		max = 1 << 20
	}
	if c := t.cfg.MaxPayloadBytes; c > 0 && c < max {
		max = c
	}
	return max
}

// msgSize is what NATS counts against max_payload: the body plus the header
// block ("NATS/1.0\r\n", "Key: value\r\n" per value, "\r\n").
func msgSize(m *nats.Msg) int64 {
	n := int64(len(m.Data))
	if len(m.Header) == 0 {
		return n
	}
	n += int64(len("NATS/1.0\r\n") + len("\r\n"))
	for k, vs := range m.Header {
		for _, v := range vs {
			n += int64(len(k) + len(": ") + len(v) + len("\r\n"))
		}
	}
	return n
}

// Request sends req to node's service and returns the reply body. It waits
// at most RequestTimeout (less if ctx ends sooner). It retries, within that
// budget, only errors that prove the request was not processed (no
// responders, not connected); a timeout is never retried because the
// outcome is unknown. Errors wrap the package's sentinels: ErrTimeout,
// ErrNoResponders, ErrNotConnected, ErrRemote (a *RemoteError), ErrTooLarge,
// ErrClosed.
func (t *Transport) Request(ctx context.Context, node, service string, req []byte) ([]byte, error) {
	subj, err := NodeSubject(t.cfg.Cluster, node, service)
	if err != nil {
		return nil, err
	}
	return t.request(ctx, subj, service, req)
}

// RequestAdmin sends req to an admin verb; one node of the cluster answers.
func (t *Transport) RequestAdmin(ctx context.Context, verb string, req []byte) ([]byte, error) {
	subj, err := AdminSubject(t.cfg.Cluster, verb)
	if err != nil {
		return nil, err
	}
	return t.request(ctx, subj, "admin."+verb, req)
}

func (t *Transport) request(ctx context.Context, subj, label string, req []byte) ([]byte, error) {
	start := t.clock.Now()
	sm := t.metrics.get(label)
	out, reason, err := t.attempts(ctx, subj, req, sm)
	sm.observe(clock.Since(t.clock, start), reason)
	return out, err
}

// attempts runs the send/retry loop of one Request and names the failure
// reason for metrics.
func (t *Transport) attempts(ctx context.Context, subj string, req []byte, sm *serviceMetrics) ([]byte, string, error) {
	if t.isClosed() {
		return nil, reasonClosed, fmt.Errorf("transport: request %s: %w", subj, ErrClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.RequestTimeout)
	defer cancel()
	// Close ends requests in flight too.
	stop := context.AfterFunc(t.base, cancel)
	defer stop()

	backoff := t.cfg.RetryBackoff
	for attempt := 0; ; attempt++ {
		if t.cut.Load() {
			return t.cutOffWait(ctx, subj)
		}
		msg, err := t.newRequestMsg(ctx, subj, req)
		if err != nil {
			return nil, reasonTooLarge, err
		}
		var resp *nats.Msg
		if t.nc.IsConnected() {
			resp, err = t.nc.RequestMsgWithContext(ctx, msg)
		} else {
			err = ErrNotConnected
		}
		if err == nil {
			if t.cut.Load() { // cut while the request was in flight: drop the answer
				return t.cutOffWait(ctx, subj)
			}
			return decodeReply(subj, resp)
		}
		reason, err := t.classify(ctx, subj, err)
		if reason != reasonNoResponders && reason != reasonNotConnected {
			return nil, reason, err
		}
		// Not processed: retry while the budget allows a pause and another try.
		if attempt >= t.cfg.MaxRetries {
			return nil, reason, err
		}
		if left, _ := clock.Left(ctx); left <= backoff {
			return nil, reason, err
		}
		sm.retries.Inc()
		if clock.Sleep(ctx, t.clock, backoff) != nil {
			return nil, reason, err // still not processed: the last attempt's error stands
		}
		backoff *= 2
	}
}

// newRequestMsg builds the request with its headers, refusing it when it
// would exceed the max payload.
func (t *Transport) newRequestMsg(ctx context.Context, subj string, req []byte) (*nats.Msg, error) {
	left, _ := clock.Left(ctx) // always set: attempts adds RequestTimeout
	ms := left.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	msg := &nats.Msg{Subject: subj, Header: t.requestHeader(ms), Data: req}
	if size, max := msgSize(msg), t.maxPayload(); size > max {
		return nil, fmt.Errorf("transport: request %s: %d bytes with headers, max payload %d: %w", subj, size, max, ErrTooLarge)
	}
	return msg, nil
}

// requestHeader is the header block of a request with budgetMs left.
func (t *Transport) requestHeader(budgetMs int64) nats.Header {
	h := nats.Header{}
	h[messages.HeaderFrom] = []string{t.cfg.NodeID}
	h[messages.HeaderTimeoutMs] = []string{strconv.FormatInt(budgetMs, 10)}
	return h
}

// classify maps a NATS error of one attempt to the package's errors.
func (t *Transport) classify(ctx context.Context, subj string, err error) (string, error) {
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return reasonNoResponders, fmt.Errorf("transport: request %s: %w", subj, ErrNoResponders)
	case errors.Is(err, ErrNotConnected), errors.Is(err, nats.ErrReconnectBufExceeded):
		return reasonNotConnected, fmt.Errorf("transport: request %s: %w", subj, ErrNotConnected)
	case errors.Is(err, nats.ErrMaxPayload):
		return reasonTooLarge, fmt.Errorf("transport: request %s: %w", subj, ErrTooLarge)
	case t.isClosed():
		return reasonClosed, fmt.Errorf("transport: request %s: %w (outcome unknown: %w)", subj, ErrClosed, ErrTimeout)
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionDraining):
		return reasonClosed, fmt.Errorf("transport: request %s: %w: %w", subj, ErrClosed, err)
	case ctx.Err() != nil, errors.Is(err, nats.ErrTimeout), errors.Is(err, nats.ErrDisconnected):
		cause := err
		if ctx.Err() != nil {
			cause = ctx.Err()
		}
		return reasonTimeout, fmt.Errorf("transport: request %s: %w: %w", subj, ErrTimeout, cause)
	default:
		return reasonError, fmt.Errorf("transport: request %s: %w", subj, err)
	}
}

// cutOffWait is a cut-off node's request: nothing arrives, so it waits out
// the deadline like a real timeout would.
func (t *Transport) cutOffWait(ctx context.Context, subj string) ([]byte, string, error) {
	<-ctx.Done()
	if t.isClosed() {
		return nil, reasonClosed, fmt.Errorf("transport: request %s: %w", subj, ErrClosed)
	}
	return nil, reasonCutOff, fmt.Errorf("transport: request %s: node cut off: %w: %w", subj, ErrTimeout, ctx.Err())
}

// decodeReply turns a reply into the body or a *RemoteError.
func decodeReply(subj string, resp *nats.Msg) ([]byte, string, error) {
	st := resp.Header.Get(messages.HeaderStatus)
	if st == "" {
		return resp.Data, "", nil
	}
	re := &RemoteError{}
	var body messages.ErrorReply
	if err := json.Unmarshal(resp.Data, &body); err == nil {
		re.Status, re.Msg = body.Status, body.Error
	} else {
		re.Msg = string(resp.Data)
	}
	if n, err := strconv.Atoi(st); err == nil {
		re.Status = n
	}
	if re.Status == StatusTimeout {
		return nil, reasonTimeout, fmt.Errorf("transport: request %s: %w (%w): %w", subj, ErrTimeout, context.DeadlineExceeded, re)
	}
	return nil, reasonRemote, fmt.Errorf("transport: request %s: %w", subj, re)
}

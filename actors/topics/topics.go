// Package topics is the node's side of the topic verbs: create, alter,
// delete, get and list a topic as the API contract words them (defaults,
// limits, the order an alter applies its fields in), its partitions'
// stats asked of their owners, and the fan-out links a client attaches,
// lists and detaches (children.go). Start at Catalog, which the node
// embeds, so its methods are the node's own (api.Topics). It knows no
// Node: Deps is what it asks of one.
package topics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/actors/schema"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// Store is what the verbs read of the local replica, and the links they
// propose themselves (a create, an alter and a delete go through the
// controller, Deps.AskController).
type Store interface {
	Topic(name string) (messages.Topic, bool)
	Topics() []messages.Topic
	Assignments(incarnation uint64, partitions int) []messages.Assignment
	// CatchUp returns once the local replica applied everything the
	// leaders had committed when it was called.
	CatchUp(ctx context.Context) error
	AttachChild(ctx context.Context, parent, child string, delayMs int64) (messages.Topic, error)
	DetachChild(ctx context.Context, parent, child string) (messages.Topic, error)
}

// Owners asks a partition's owner, this node or a peer (the router).
type Owners interface {
	Ask(ctx context.Context, k messages.PartitionKey, msg any) (any, error)
}

// Config is the contract's topic defaults and limits as this node applies
// them, and how long an attach waits for its anchors.
type Config struct {
	// DefaultPartitions is used when a create names none (the API's 3).
	DefaultPartitions int
	// MaxPartitions bounds a topic's partitions (the API's 108).
	MaxPartitions int
	// DefaultRetention replaces a retention of 0 (the API's 7 days).
	DefaultRetention time.Duration
	// AnchorWait bounds an attach's wait for every parent partition's
	// owner to anchor the link (Config.FanoutAnchorWait of the node).
	AnchorWait time.Duration
}

// Validate reports the first limit out of range; the node checks
// AnchorWait against its HTTP write timeout.
func (c Config) Validate() error {
	switch {
	case c.DefaultPartitions < 3 || c.DefaultPartitions > c.MaxPartitions:
		return fmt.Errorf("TopicDefaultPartitions %d must be within 3..TopicMaxPartitions: %w", c.DefaultPartitions, errs.ErrInvalid)
	case c.MaxPartitions < 3 || c.MaxPartitions > 10000:
		return fmt.Errorf("TopicMaxPartitions %d must be within 3..10000: %w", c.MaxPartitions, errs.ErrInvalid)
	case c.DefaultRetention != 0 && c.DefaultRetention < time.Hour:
		return fmt.Errorf("TopicDefaultRetention %s must be 0 or at least 1h: %w", c.DefaultRetention, errs.ErrInvalid)
	case c.DefaultRetention > maxRetentionMs*time.Millisecond:
		// The default stands in for a client's retention_ms, so it has
		// the client's ceiling.
		return fmt.Errorf("TopicDefaultRetention %s must be at most 100 years (876000h): %w", c.DefaultRetention, errs.ErrInvalid)
	}
	return nil
}

// Deps is what the verbs need of their node.
type Deps struct {
	Config Config
	Store  Store
	Owners Owners
	// AskController has the controller store a topic change (a create, an
	// alter, a delete), wherever the metadata leader is.
	AskController func(ctx context.Context, req messages.ControllerRequest) (messages.ControllerReply, error)
	// Reconcile has the partitions supervisor start and stop this node's
	// partition actors as the replica now places them.
	Reconcile func(ctx context.Context) error
	Log       *slog.Logger
	// Clock stamps a topic's CreatedAt, which clients read beside their own
	// time (the wall clock in a node), and paces an attach's polls.
	Clock clock.Clock
}

// Catalog is the topic verbs over Deps. The node embeds it: its methods
// are the node's, its Deps its own.
type Catalog struct{ deps Deps }

// New is the verbs over d.
func New(d Deps) Catalog { return Catalog{deps: d} }

// Defaults and limits of the API contract for a topic's settings; a create
// or alter that leaves a field at 0 gets the default.
const (
	defaultVisibilityMs  = 30_000
	defaultMaxInFlight   = 1024
	defaultMaxAckedAhead = 1024
	minRetentionMs       = 3_600_000
	maxFanoutDelayMs     = 31_536_000_000
)

// The ceilings of a topic's numeric settings. Each value the state machine
// stores is read back as a time.Duration or a count that something must
// hold, so a value past what that can hold is refused with a 400 here, not
// found later as an overflow or a partition that cannot flush. A topic
// stored before a ceiling existed keeps its value: only a create or an
// alter that names the field is checked.
const (
	// maxRetentionMs is 100 years. A retention becomes a time.Duration
	// (at most about 292 years) that the sweep subtracts from now; past
	// that it overflows into a retention of minus a century. Nothing
	// needs longer than "keep forever" (0) does not say better, and the
	// longest fan-out delay (one year) plus its hour of headroom is far
	// below it.
	maxRetentionMs = 100 * 365 * 24 * 3_600_000
	// maxVisibilityMs is 7 days. A lease's length becomes a
	// time.Duration, which 10^13 ms overflows into a negative lease; and a
	// lease that outlives the default retention (7 days) can hold a record
	// retention has already removed. A consumer needing longer extends
	// its lease.
	maxVisibilityMs = 7 * 24 * 3_600_000
	// maxInFlightPerPartition bounds the leases a partition holds in
	// memory at once (one table entry each) and, once they are acked out
	// of order, its acked-ahead set: 2^20, storage's default
	// MaxAckedAheadEntries (DefaultConsumerConfig).
	maxInFlightPerPartition = 1 << 20
	// maxAckedAheadPerPartition is 2^20 too: storage's default
	// MaxAckedAheadEntries, the largest acked-ahead set a partition's
	// consumer state flushes. A larger cap would let the set grow past
	// what the partition can write, and its flushes would fail.
	maxAckedAheadPerPartition = 1 << 20
)

// overCeiling words the refusal of a setting past its ceiling, ceiling
// included in the text so a client can correct its request.
func overCeiling(field string, ceiling int64, means string) string {
	return field + " must be between 0 and " + strconv.FormatInt(ceiling, 10) + " (" + means + ")"
}

var topicNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,255}$`)

func validTopicName(s string) bool { return topicNameRE.MatchString(s) && s != "." && s != ".." }

// Info is t's record as clients see it.
func Info(t messages.Topic) messages.TopicInfo {
	info := messages.TopicInfo{Name: t.Name, Partitions: t.Partitions, RetentionMs: t.RetentionMs,
		VisibilityTimeoutMs: t.VisibilityTimeoutMs, MaxInFlightPerPartition: t.MaxInFlightPerPartition,
		MaxAckedAheadPerPartition: t.MaxAckedAheadPerPartition, CreatedAt: t.CreatedAt, Owner: t.Owner, Role: t.Role(),
		Parent: t.Parent, FanoutDelayMs: t.FanoutDelayMs}
	for _, l := range t.Children {
		info.Children = append(info.Children, l.Name)
	}
	if t.AttachEpoch != 0 {
		info.AttachEpoch = strconv.FormatUint(t.AttachEpoch, 10)
	}
	return info
}

// Reader is a lookup of a topic on the local replica.
type Reader interface {
	Topic(name string) (messages.Topic, bool)
}

// PartitionOf looks a topic up on the local replica and checks that it
// has partition (any, when partition < 0).
func PartitionOf(r Reader, topic string, partition int) (messages.Topic, error) {
	t, ok := r.Topic(topic)
	if !ok {
		return t, fmt.Errorf("topic %s: %w", topic, errs.ErrNotFound)
	}
	if partition >= t.Partitions {
		return t, fmt.Errorf("topic %s, partition %d: %w", topic, partition, errs.ErrNoSuchPartition)
	}
	return t, nil
}

// Topic is the topic's record on the local replica.
func (c *Catalog) Topic(name string) (messages.TopicInfo, error) {
	t, ok := c.deps.Store.Topic(name)
	if !ok {
		return messages.TopicInfo{}, fmt.Errorf("topic %s: %w", name, errs.ErrNotFound)
	}
	return Info(t), nil
}

// TopicsAfter pages through the local replica's topics by name.
func (c *Catalog) TopicsAfter(after string, limit int) ([]messages.TopicInfo, bool) {
	all := c.deps.Store.Topics()
	i := sort.Search(len(all), func(i int) bool { return all[i].Name > after })
	page := []messages.TopicInfo{}
	for ; i < len(all) && len(page) < limit; i++ {
		page = append(page, Info(all[i]))
	}
	return page, i < len(all)
}

// PartitionStats asks each owner, this node or a peer, for its partitions'
// stats.
func (c *Catalog) PartitionStats(ctx context.Context, topic string, only int) ([]messages.PartitionInfo, error) {
	t, err := PartitionOf(c.deps.Store, topic, only)
	if err != nil {
		return nil, fmt.Errorf("partition stats: %w", err)
	}
	out := []messages.PartitionInfo{}
	for _, o := range c.ownerStats(ctx, t, only, true) {
		if o.err != nil {
			// An owner that answered nothing usable is a failure of the
			// request, not a reason to retry it.
			return nil, o.err
		}
		if o.stats == nil {
			// The owner has not started the partition yet (a create moments
			// ago): the entry is left out, and clients poll until every
			// partition has one, as the contract describes.
			continue
		}
		st := o.stats
		out = append(out, messages.PartitionInfo{Index: o.owner.Partition, OwnerNode: o.owner.Owner, Segments: st.Segments,
			OldestOffset: st.OldestOffset, NextOffset: st.NextOffset, HighWatermark: st.HighWatermark,
			SizeBytes: st.SizeBytes, OldestSegmentAt: st.OldestSegmentAt, InFlightLeases: st.InFlight})
	}
	slices.SortFunc(out, func(a, b messages.PartitionInfo) int { return a.Index - b.Index })
	return out, nil
}

// ownerStat is one assigned partition's stats as its owner answered them:
// stats nil when the owner has not started it yet, err when it answered
// nothing usable.
type ownerStat struct {
	owner messages.Assignment
	stats *messages.PartitionStats
	err   error
}

// ownerStats asks each assigned partition's owner (of one partition when
// only >= 0) for its stats, in assignment order. With stopAtError it asks
// no further owner after one failed: the caller fails the request anyway,
// and each owner that cannot be reached costs a timeout.
func (c *Catalog) ownerStats(ctx context.Context, t messages.Topic, only int, stopAtError bool) []ownerStat {
	var out []ownerStat
	for _, a := range c.deps.Store.Assignments(t.Incarnation, t.Partitions) {
		if only >= 0 && a.Partition != only {
			continue
		}
		k := messages.PartitionKey{Topic: t.Name, Incarnation: t.Incarnation, Partition: a.Partition}
		res, err := c.deps.Owners.Ask(ctx, k, &messages.GetStats{})
		st, isStats := res.(*messages.PartitionStats)
		switch {
		case notServedYet(err):
			out = append(out, ownerStat{owner: a})
		case err != nil || !isStats:
			out = append(out, ownerStat{owner: a, err: fmt.Errorf("partition stats of %s/%d: %v (answered %T)", t.Name, a.Partition, err, res)})
			if stopAtError {
				return out
			}
		default:
			out = append(out, ownerStat{owner: a, stats: st})
		}
	}
	return out
}

// notServedYet reports an owner that answered but has no actor for the
// partition yet, as opposed to an owner that cannot be reached.
func notServedYet(err error) bool {
	var re *transport.RemoteError
	return errors.Is(err, actor.ErrDeadLetter) || (errors.As(err, &re) && re.Status == transport.StatusUnavailable)
}

// CreateTopic resolves the contract's defaults and limits, then has the
// controller store the topic and place its partitions. It returns once
// this node can serve the topic.
func (c *Catalog) CreateTopic(ctx context.Context, req messages.CreateTopicRequest) (messages.TopicInfo, error) {
	var parent messages.Topic
	found := false
	if req.Parent != "" {
		parent, found = c.deps.Store.Topic(req.Parent)
	}
	// A bad request is 400 whether or not its parent exists.
	t, why := c.resolveCreate(req, parent.Partitions)
	if why != "" {
		return messages.TopicInfo{}, fmt.Errorf("create topic %s: %w", req.Name, errs.Invalid(why))
	}
	if req.Parent != "" && !found {
		return messages.TopicInfo{}, fmt.Errorf("create topic %s under %s: %w", req.Name, req.Parent, errs.ErrParentNotFound)
	}
	if parent.Name != "" {
		// Asked of the local replica to word the refusal: through a
		// controller on another node only the status would come back. The
		// state machine judges again, and its answer holds.
		t.Parent, t.FanoutDelayMs = parent.Name, orZero(req.FanoutDelayMs)
		candidate := t
		candidate.Parent = ""
		if code, why := metastore.AttachRefusal(parent, candidate, t.FanoutDelayMs); code != messages.ResultOK {
			return messages.TopicInfo{}, refusalError("create topic "+req.Name+" under "+parent.Name, code, why)
		}
	}
	rep, err := c.deps.AskController(ctx, messages.ControllerRequest{CreateTopic: &t})
	if err != nil {
		return messages.TopicInfo{}, fmt.Errorf("create topic %s: %w", req.Name, fanoutError(err))
	}
	c.servePlaced(ctx, rep.Topic)
	if parent.Name != "" {
		c.awaitAnchors(ctx, parent, t.Name)
	}
	return Info(rep.Topic), nil
}

// resolveCreate applies the contract's defaults and limits; a non-empty
// reason is why the create is invalid. parentPartitions is the parent's
// count, the default under a parent (0 without one).
func (c *Catalog) resolveCreate(req messages.CreateTopicRequest, parentPartitions int) (messages.Topic, string) {
	t := messages.Topic{Name: req.Name, Partitions: req.Partitions, RetentionMs: orZero(req.RetentionMs),
		VisibilityTimeoutMs: orZero(req.VisibilityTimeoutMs), MaxInFlightPerPartition: orZero(req.MaxInFlightPerPartition),
		MaxAckedAheadPerPartition: orZero(req.MaxAckedAheadPerPartition), CreatedAt: c.deps.Clock.Now().Unix(),
		Owner: req.Owner} // the API put the caller there, never the client's value
	delay := orZero(req.FanoutDelayMs)
	switch {
	case !validTopicName(req.Name):
		return messages.Topic{}, "invalid topic name"
	case req.Partitions < 0:
		return messages.Topic{}, "partitions must not be negative"
	case t.RetentionMs < 0 || t.VisibilityTimeoutMs < 0 || t.MaxInFlightPerPartition < 0 || t.MaxAckedAheadPerPartition < 0:
		return messages.Topic{}, "negative values are not allowed"
	case t.RetentionMs > maxRetentionMs:
		return messages.Topic{}, overCeiling("retention_ms", maxRetentionMs, "100 years; 0 keeps records forever")
	case t.VisibilityTimeoutMs > maxVisibilityMs:
		return messages.Topic{}, overCeiling("visibility_timeout_ms", maxVisibilityMs, "7 days")
	case t.MaxInFlightPerPartition > maxInFlightPerPartition:
		return messages.Topic{}, overCeiling("max_in_flight_per_partition", maxInFlightPerPartition, "2^20")
	case t.MaxAckedAheadPerPartition > maxAckedAheadPerPartition:
		return messages.Topic{}, overCeiling("max_acked_ahead_per_partition", maxAckedAheadPerPartition, "2^20")
	case delay != 0 && req.Parent == "":
		return messages.Topic{}, "fanout_delay_ms needs parent"
	case delay < 0 || delay > maxFanoutDelayMs:
		return messages.Topic{}, "fanout_delay_ms must be between 0 and 31536000000 (1 year)"
	case req.Parent == req.Name && req.Parent != "":
		return messages.Topic{}, "a topic cannot be its own parent"
	}
	if t.Partitions == 0 {
		t.Partitions = c.deps.Config.DefaultPartitions
		if parentPartitions != 0 {
			t.Partitions = parentPartitions
		}
	}
	if t.Partitions < 3 || t.Partitions > c.deps.Config.MaxPartitions {
		return t, "partitions must be between 3 and " + strconv.Itoa(c.deps.Config.MaxPartitions)
	}
	if t.RetentionMs == 0 {
		t.RetentionMs = c.deps.Config.DefaultRetention.Milliseconds()
	}
	if t.RetentionMs != 0 && t.RetentionMs < minRetentionMs {
		return t, "retention_ms must be 0 or at least 3600000 (1h)"
	}
	if t.VisibilityTimeoutMs == 0 {
		t.VisibilityTimeoutMs = defaultVisibilityMs
	}
	if t.MaxInFlightPerPartition == 0 {
		t.MaxInFlightPerPartition = defaultMaxInFlight
	}
	if t.MaxAckedAheadPerPartition == 0 {
		t.MaxAckedAheadPerPartition = defaultMaxAckedAhead
	}
	if hasSchema(req.Schema) {
		if _, err := schema.Compile(req.Schema); err != nil {
			return t, err.Error()
		}
		t.Schemas = []json.RawMessage{req.Schema}
	}
	return t, ""
}

func hasSchema(s json.RawMessage) bool { return len(s) > 0 && string(s) != "null" }

// orZero reads an optional number of a create: absent, null and 0 all
// mean "the default", as in Narad.
func orZero(v *int64) int64 {
	if v == nil {
		return 0
	}
	return *v
}

// servePlaced returns once this node's replica has the placement the
// controller just made and the partitions placed here have running actors,
// so a client can use the topic through this node as soon as the create is
// answered (other nodes spawn theirs within milliseconds). Failing that,
// the partitions supervisor catches up on its own: the answer stands.
func (c *Catalog) servePlaced(ctx context.Context, t messages.Topic) {
	if err := c.deps.Store.CatchUp(ctx); err != nil {
		c.deps.Log.Warn("catch up with a placement", "topic", t.Name, "err", err)
	}
	if err := c.deps.Reconcile(ctx); err != nil {
		c.deps.Log.Warn("reconcile after placing partitions", "topic", t.Name, "err", err)
	}
}

// AlterTopic applies retention, caps, partitions and schema in that order
// without a transaction, as the contract says: the first field refused
// still applies the fields before it, and the refusal is the answer.
func (c *Catalog) AlterTopic(ctx context.Context, name string, req messages.AlterTopicRequest) (messages.TopicInfo, error) {
	if req.Partitions == nil && req.RetentionMs == nil && req.MaxInFlightPerPartition == nil && req.MaxAckedAheadPerPartition == nil && !hasSchema(req.Schema) {
		return messages.TopicInfo{}, fmt.Errorf("alter topic %s: %w", name, errs.Invalid("no field to change"))
	}
	t, ok := c.deps.Store.Topic(name)
	if !ok {
		return messages.TopicInfo{}, fmt.Errorf("alter topic %s: %w", name, errs.ErrNotFound)
	}
	alter, refused := c.resolveAlter(t, req)
	if refused == nil || alter.RetentionMs != nil || alter.MaxInFlightPerPartition != nil || alter.MaxAckedAheadPerPartition != nil || alter.Partitions != 0 {
		altered, err := c.applyAlter(ctx, t, alter)
		if err != nil {
			return messages.TopicInfo{}, fmt.Errorf("alter topic %s: %w", name, fanoutError(err))
		}
		t = altered
	}
	if refused != nil {
		return messages.TopicInfo{}, fmt.Errorf("alter topic %s: %w", name, refused)
	}
	return Info(t), nil
}

// resolveAlter turns an alter request into the command that stores it,
// field by field in the contract's order. At the first field refused it
// stops and answers the refusal; the command holds the fields before it.
// The fan-out checks are asked of the local replica (the controller may
// answer from another node, with only a status); the state machine judges
// again.
func (c *Catalog) resolveAlter(t messages.Topic, req messages.AlterTopicRequest) (messages.AlterTopic, error) {
	alter := messages.AlterTopic{Name: t.Name}
	if v := req.RetentionMs; v != nil {
		ret := *v
		if ret == 0 {
			ret = c.deps.Config.DefaultRetention.Milliseconds()
		}
		if ret < 0 || (ret != 0 && ret < minRetentionMs) {
			return alter, errs.Invalid("retention_ms must be 0 or at least 3600000 (1h)")
		}
		if ret > maxRetentionMs {
			return alter, errs.Invalid(overCeiling("retention_ms", maxRetentionMs, "100 years; 0 keeps records forever"))
		}
		if code, why := metastore.AlterRefusal(t, messages.AlterTopic{Name: t.Name, RetentionMs: &ret}); code != messages.ResultOK {
			return alter, refusalError("alter topic "+t.Name, code, why)
		}
		alter.RetentionMs = &ret
	}
	for _, c := range []struct {
		in       *int64
		out      **int64
		def, max int64
		field    string
	}{{req.MaxInFlightPerPartition, &alter.MaxInFlightPerPartition, defaultMaxInFlight, maxInFlightPerPartition, "max_in_flight_per_partition"},
		{req.MaxAckedAheadPerPartition, &alter.MaxAckedAheadPerPartition, defaultMaxAckedAhead, maxAckedAheadPerPartition, "max_acked_ahead_per_partition"}} {
		if c.in == nil {
			continue
		}
		v := *c.in
		if v < 0 {
			return alter, errs.Invalid("caps must not be negative")
		}
		if v > c.max {
			return alter, errs.Invalid(overCeiling(c.field, c.max, "2^20"))
		}
		if v == 0 {
			v = c.def
		}
		*c.out = &v
	}
	if p := req.Partitions; p != nil && *p != 0 {
		if *p < 0 || *p <= t.Partitions || *p > c.deps.Config.MaxPartitions {
			return alter, errs.Invalid("partitions may only grow, up to " + strconv.Itoa(c.deps.Config.MaxPartitions))
		}
		alter.Partitions = *p
	}
	if hasSchema(req.Schema) {
		if code, why := metastore.AlterRefusal(t, messages.AlterTopic{Name: t.Name, AddSchema: req.Schema}); code != messages.ResultOK {
			return alter, refusalError("alter topic "+t.Name, code, why)
		}
		if _, err := schema.Compile(req.Schema); err != nil {
			return alter, errs.Invalid(err.Error())
		}
		if len(t.Schemas) > 0 {
			if err := schema.Compatible(t.Schemas[len(t.Schemas)-1], req.Schema); err != nil {
				return alter, errs.Invalid("incompatible schema: " + err.Error())
			}
		}
		alter.AddSchema = req.Schema
	}
	return alter, nil
}

// applyAlter has the controller store an alter of t and place the
// partitions it added. A refused later field still applies the earlier
// ones, a grow included, so this is the only way an alter is stored.
func (c *Catalog) applyAlter(ctx context.Context, t messages.Topic, alter messages.AlterTopic) (messages.Topic, error) {
	rep, err := c.deps.AskController(ctx, messages.ControllerRequest{AlterTopic: &alter})
	if err != nil {
		return rep.Topic, err
	}
	if rep.Topic.Partitions > t.Partitions {
		c.servePlaced(ctx, rep.Topic)
	}
	return rep.Topic, nil
}

// DeleteTopic removes the topic and its assignments. The local partitions
// stop and their data goes before it returns, so a create of the same
// name right after starts from offset 0.
func (c *Catalog) DeleteTopic(ctx context.Context, name string) error {
	if _, err := c.deps.AskController(ctx, messages.ControllerRequest{DeleteTopic: name}); err != nil {
		return fmt.Errorf("delete topic %s: %w", name, fanoutError(err))
	}
	// The local partitions stop once this replica has the delete.
	if err := c.deps.Store.CatchUp(ctx); err != nil {
		c.deps.Log.Warn("catch up after deleting a topic", "topic", name, "err", err)
	}
	if err := c.deps.Reconcile(ctx); err != nil {
		c.deps.Log.Warn("reconcile after deleting a topic", "topic", name, "err", err)
	}
	return nil
}

package messages

// The controller protocol: what a node asks of the controller, the actor on
// the node that leads the metadata shard. Any node takes a client's topic
// create or grow and forwards it here (over NATS to another node, or to the
// local actor), so partitions are placed by one decider that sees every
// placement before the next.

// ControllerRequest is one request to the controller; exactly one field is
// set.
type ControllerRequest struct {
	// CreateTopic creates the topic, already validated and given its
	// defaults by the node that took the client's request, then places its
	// partitions.
	CreateTopic *Topic `json:"create_topic,omitempty"`
	// PlaceTopic names an existing topic whose partitions without an owner
	// are placed, after a grow.
	PlaceTopic string `json:"place_topic,omitempty"`
	// DecommissionBlocked asks why each draining member cannot progress.
	DecommissionBlocked bool `json:"decommission_blocked,omitempty"`
}

// ControllerReply answers a ControllerRequest.
type ControllerReply struct {
	// Topic is the topic as stored: with its incarnation after a create.
	Topic Topic `json:"topic"`
	// Placed counts the partitions this request gave an owner.
	Placed int `json:"placed"`
	// Blocked is, per draining member, why its decommission waits.
	Blocked map[string]string `json:"blocked,omitempty"`
}

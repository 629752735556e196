package messages

// The controller protocol: what a node asks of the controller, the actor on
// the node that leads the metadata shard. Any node takes a client's topic
// create, alter or delete and forwards it here (over NATS to another node,
// or to the local actor), so every write that spans the metadata and the
// assignment shards has one owner, and partitions are placed by one
// decider that sees every placement before the next.

// ControllerRequest is one request to the controller; exactly one field is
// set.
type ControllerRequest struct {
	// CreateTopic creates the topic, already validated and given its
	// defaults by the node that took the client's request, then places its
	// partitions.
	CreateTopic *Topic `json:"create_topic,omitempty"`
	// AlterTopic stores an alter, already resolved by the node that took
	// the client's request, then places the partitions a grow added.
	AlterTopic *AlterTopic `json:"alter_topic,omitempty"`
	// DeleteTopic deletes the named topic and then its assignments.
	DeleteTopic string `json:"delete_topic,omitempty"`
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

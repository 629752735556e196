// Package dispatch is the node's dispatcher: the actor that commits every
// record of the ingress WAL at its partition's owner, retrying about once a
// second until it is committed, and only then releases it from the WAL
// (seed "Produce path", rules K3, F1, D6's drain waits for it).
//
// Start with Actor (actor.go): one per node, fed a Record by the node's
// Produce once the record is durable in the WAL, and by its own replay of
// the WAL at start. It queues records per partition (partitionQueue), keeps
// up to Config.MaxCommitsInFlight commits in flight to a partition owned
// here and one to a peer's, and on its tick retries what was refused,
// drops what lost its topic incarnation, and reroutes to a live sibling
// partition only what its partition will not take soon (reroute.go: a dead
// or gone owner, a freeze that outlasts Config.RerouteGrace), never records
// whose commit has an unknown outcome while the node it went to is a
// member. metrics.go sets the backlog and unknown-outcome gauges.
//
// The package knows no Node: what it needs of its node comes in Deps (a
// Store of the replica reads it makes, Owners for the router, the WAL, the
// partition PID lookup, a Clock, the Metrics the node registered), and the
// root package actors spawns the actor (node.go) and sends it Record from
// Node.Produce (actors/produce).
package dispatch

// Package controller is the cluster's one decider: the actor that runs on
// every node and acts only while its node leads the metadata shard. It
// marks members dead and alive on its own clock (rule T1), creates, alters
// and deletes topics and places their partitions, keeps every metastore
// shard's voters, plans the moves that even the partitions out (rules
// L1-L6, B1-B11), and walks a decommissioned member out of the cluster
// (rules D1-D8).
//
// Start with Actor (actor.go): its tick runs liveness, the placement sweep
// a previous leader left, the voter check and the rebalance pass
// (rebalance.go), which ends with the decommission pass
// (decommission.go); its Ask answers the node's topic creates, alters and
// deletes. Creates asked at once commit as a group (create.go). The pure
// decisions are placement.go (planPlacement, pickPromotion), avoid.go (the
// node a fan-out child's partition avoids, rule L6), DecommissionVerdict,
// and package cluster/planner.
//
// The package knows no Node: what it needs of its node comes in Deps (a
// Store of the metastore roles it uses, the node's NATS transport to ask a
// draining node's drain service, the Metrics the node registered). The
// root package actors spawns the actor; Client (client.go) routes every
// node's requests to the one on the metadata leader (Ask, and the
// "controller" service it serves, which send the actor an Ask). The drain
// service the controller asks (DrainService, DrainStatus) is served by
// actors/decommission.
package controller

package controller

// Anti-affinity (rule L6): a fan-out child's partition i prefers a node
// other than the one owning its parent's partition i, so one node's loss
// or load does not take both the parent's records and their copies. The
// planner weighs it below balance; here the controller only names the node.

// parentPlacement reads a parent's assignments once per planning pass: many
// children and partitions ask for the same parent.
type parentPlacement struct {
	store Replica
	// owners by parent name, by partition; nil: the parent is unknown.
	owners map[string][]string
}

func newParentPlacement(store Replica) *parentPlacement {
	return &parentPlacement{store: store, owners: map[string][]string{}}
}

// avoid is the node a child's partition p should preferably not land on:
// the owner of partition p of parent, "" when parent is "" (no child), is
// unknown or has fewer partitions.
func (pp *parentPlacement) avoid(parent string, p int) string {
	if parent == "" {
		return ""
	}
	owners, ok := pp.owners[parent]
	if !ok {
		if parent, found := pp.store.Topic(parent); found {
			for _, as := range pp.store.Assignments(parent.Incarnation, parent.Partitions) {
				for len(owners) <= as.Partition {
					owners = append(owners, "")
				}
				owners[as.Partition] = as.Owner
			}
		}
		pp.owners[parent] = owners
	}
	if p < 0 || p >= len(owners) {
		return ""
	}
	return owners[p]
}

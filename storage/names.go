package storage

import (
	"path/filepath"
	"strconv"
)

// The names a node derives from a topic's name outside topics/<topic>: a
// move's staging copy under .moves and a topic directory set aside under
// .stale. A topic name may be 255 bytes (the API's rule), which is also
// the file systems' limit on one name (NAME_MAX), so a name that adds a
// suffix to the topic's cannot always exist. A topic short enough for
// every suffix keeps the flat form it always had; a longer one gets the
// topic as a directory of its own under longNamesDir, with the suffix in
// the name below it:
//
//	.moves/<topic>-<N>[.quarantine[.<k>]]       .stale/<topic>@<inc>[.<k>]
//	.moves/@long/<topic>/<N>[.quarantine[.<k>]] .stale/@long/<topic>/<inc>[.<k>]
//
// No name grows past its topic's that way. Which form a topic gets depends
// on the length of its name alone, so the two never meet: '@' cannot occur
// in a topic name, so no flat name is "@long", and the flat names of
// every topic that fits are where they were before the long form existed.
// The readers (classify, StaleDirs) accept both forms for any topic.
const (
	// longNamesDir is the directory, under .moves and under .stale, that
	// holds one directory per topic whose name is too long for the flat
	// form.
	longNamesDir = "@long"
	// nameMaxBytes is NAME_MAX of Linux file systems (ext4, XFS, tmpfs):
	// the longest one name of a path may be.
	nameMaxBytes = 255
	// intMaxDigits and uint64MaxDigits are the most decimal digits of a
	// partition number or a set-aside counter (an int), and of an
	// incarnation: the worst case, not the usual one, so a name that
	// fits once fits for every partition and every counter.
	intMaxDigits    = 19
	uint64MaxDigits = 20
	// stagingFlatMaxTopicBytes is the longest topic name whose staging
	// copy, quarantined with a counter, still fits in one name:
	// <topic>-<N>.quarantine.<k>.
	stagingFlatMaxTopicBytes = nameMaxBytes - len("-") - intMaxDigits - len(".quarantine.") - intMaxDigits
	// staleFlatMaxTopicBytes is the longest topic name whose set-aside
	// directory still fits in one name: <topic>@<incarnation>.<k>.
	staleFlatMaxTopicBytes = nameMaxBytes - len("@") - uint64MaxDigits - len(".") - intMaxDigits
)

// stagingName is a staging copy's path under .moves.
func stagingName(topic string, partition int) string {
	if len(topic) <= stagingFlatMaxTopicBytes {
		return topic + "-" + strconv.Itoa(partition)
	}
	return filepath.Join(longNamesDir, topic, strconv.Itoa(partition))
}

// staleName is the path under .stale of a topic directory set aside that
// held found (its marker's incarnation, "unmarked" or "unreadable"),
// before any .<k> a taken name adds.
func staleName(topic, found string) string {
	if len(topic) <= staleFlatMaxTopicBytes {
		return topic + "@" + found
	}
	return filepath.Join(longNamesDir, topic, found)
}

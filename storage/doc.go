// Package storage is everything that touches a node's disk: the partition log
// (Log), the node's ingress write-ahead log (WAL), consumer state and fan-out
// cursor files, and the receiving side of a partition move (Staging, the move
// marker, install and quarantine).
//
// It is plain Go: no actors, no network, no goroutines except the WAL's
// group-commit writer and position saver and the SyncLane's (with its
// per-file round's helpers), which end on Close. Callers (the partition
// actors) serialise access to a Log; the WAL is safe for concurrent
// producers. Every error wraps a sentinel of errors.go; storage never logs.
//
// Where to start: log.go (Open, Write, Sync, Publish, Read, the high
// watermark), then frame.go (the bytes on disk) and recover.go (what a
// reopened log may expose). The files, by concern:
//
//   - a partition's log: log.go, frame.go (the frame format and its CRC),
//     origins.go (the memory behind Log.Committed), recover.go, listing.go
//     (List and ReadChunk: committed bytes only), files.go (the node-wide
//     bound on open segment files), fs.go (FS, the file system under all
//     of storage, which the crash tests replace: crashpoints_test.go and
//     powerloss_test.go on storage/crashfs), config.go (LogConfig);
//   - syncs: lane.go, lane_linux.go, lane_other.go (SyncLane: many logs'
//     syncs in one syncfs or one fdatasync round), fsync.go, fsync_linux.go,
//     fsync_other.go (directory and file-system syncs);
//   - the ingress WAL: wal.go (the writer, the low watermark, the position
//     slots, Replay, Compact), wallives.go (a random life per open, so a
//     replayed record is recognised);
//   - consumers: consumer.go (three slot files and OffsetCommitter),
//     cursor.go (fan-out cursor files and their install as move sidecars);
//   - a move's copy: staging.go (Staging, Install, RenameBack, InstallBatch),
//     stage.go (Stage, StagedHWM, StageBatch: a copy made durable before its
//     freeze), marker.go (move.marker);
//   - topic directories: topicdir.go (the incarnation marker, .stale),
//     guard.go (Guards, the topic open guard), copies.go (what the sweep
//     walks), inventory.go (the copies set aside), names.go (the staging
//     and set-aside names derived from a topic's, within NAME_MAX);
//   - faults.go (the nemesis's disk-fault switch), errors.go (the sentinels).
package storage

package storage

// The twins on an FS of the functions that have no config, for the crash
// tests of package storage_test (which may import storage/crashfs; this
// package's own tests may not, crashfs imports storage).
var (
	PrepareTopicDirOn     = prepareTopicDir
	SweepOrphanTopicDirOn = sweepOrphanTopicDir
	RemoveDirOn           = removeDir
	QuarantineOn          = quarantine
	ReadMarkerOn          = readMarker
	TopicIncarnationOn    = topicIncarnation
	LoadConsumerStateOn   = loadConsumerState
	SaveConsumerStateOn   = saveConsumerState
	RenameBackOn          = renameBack
	WriteCursorOn         = writeCursor
)

// ReadCursorOn is ReadCursor on fsys.
func ReadCursorOn(fsys FS, dir, child string, attempts int) (Cursor, error) {
	read := func(path string) ([]byte, error) { return readFile(fsys, path, cursorMaxRecord+1) }
	_, c, err := cursorRead(read, dir, child, attempts)
	return c, err
}

package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// logSummary counts the error and warning lines of every node log under
// dir by message, so that a run that lost nothing still shows what went
// wrong on the way (a copy set aside, a move blocked): the near misses of
// a loss. It returns one line per level and message, most frequent first.
func logSummary(dir string) ([]string, error) {
	logs, err := filepath.Glob(filepath.Join(dir, "n*.log"))
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		err = countLevels(f, filepath.Base(path), counts)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	lines := make([]string, 0, len(counts))
	for k := range counts {
		lines = append(lines, k)
	}
	sort.Slice(lines, func(i, j int) bool {
		if counts[lines[i]] != counts[lines[j]] {
			return counts[lines[i]] > counts[lines[j]]
		}
		return lines[i] < lines[j]
	})
	for i, k := range lines {
		lines[i] = fmt.Sprintf("%6d %s", counts[k], k)
	}
	return lines, nil
}

// countLevels adds the ERROR and WARN lines of one slog text log to counts,
// keyed by "<log> <level> <msg>".
func countLevels(r io.Reader, name string, counts map[string]int) error {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), 4<<20)
	for s.Scan() {
		line := s.Text()
		var level string
		switch {
		case strings.Contains(line, " level=ERROR "):
			level = "ERROR"
		case strings.Contains(line, " level=WARN "):
			level = "WARN"
		default:
			continue
		}
		counts[name+" "+level+" "+logMessage(line)]++
	}
	return s.Err()
}

// logMessage is the msg field of a slog text line, quoted or bare.
func logMessage(line string) string {
	_, rest, ok := strings.Cut(line, " msg=")
	if !ok {
		return "(no msg)"
	}
	if strings.HasPrefix(rest, `"`) {
		for i := 1; i < len(rest); i++ {
			switch rest[i] {
			case '\\':
				i++
			case '"':
				return rest[:i+1]
			}
		}
		return rest
	}
	msg, _, _ := strings.Cut(rest, " ")
	return msg
}

// removeData removes the data directories of a clean run's scenarios
// (dir/<scenario>/<node>/), keeping their logs: the data is most of the
// disk a run takes, the logs are what a later look at a near miss needs.
func removeData(dir string) {
	scenarios, _ := os.ReadDir(dir)
	for _, sc := range scenarios {
		if !sc.IsDir() {
			continue
		}
		ents, _ := os.ReadDir(filepath.Join(dir, sc.Name()))
		for _, e := range ents {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".log") {
				os.RemoveAll(filepath.Join(dir, sc.Name(), e.Name()))
			}
		}
	}
}

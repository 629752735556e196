package deploy

import (
	"testing"

	"sigs.k8s.io/yaml"
)

// Taskfile.yml parses as YAML with a desc and commands for every task:
// `task` refuses the whole file over one bad line (a desc with an unquoted
// ": " in it stopped every task once), and no test ran it.
func TestTaskfileParses(t *testing.T) {
	raw := readFile(t, "../Taskfile.yml")
	var tf struct {
		Version string `json:"version"`
		Tasks   map[string]struct {
			Desc string `json:"desc"`
			Cmds []any  `json:"cmds"`
		} `json:"tasks"`
	}
	if err := yaml.Unmarshal(raw, &tf); err != nil {
		t.Fatalf("Taskfile.yml: %v", err)
	}
	if tf.Version != "3" || len(tf.Tasks) < 10 {
		t.Fatalf("Taskfile.yml: version %q, %d tasks: want version 3 and every task", tf.Version, len(tf.Tasks))
	}
	for name, task := range tf.Tasks {
		if task.Desc == "" || len(task.Cmds) == 0 {
			t.Errorf("task %s: desc %q, %d commands: want both", name, task.Desc, len(task.Cmds))
		}
	}
}
